import type { SystemEmail } from '../db/accounts/system-emails';
import { type Address, messageIdFor, type OutgoingMessage } from './compose';
import { escapeHtml } from './html';

type Content = Pick<SystemEmail, 'subject' | 'text' | 'html'>;


const duration = (minutes: number) =>
  minutes % 1440 === 0 ? plural(minutes / 1440, 'day') : minutes % 60 === 0 ? plural(minutes / 60, 'hour') : plural(minutes, 'minute');
const plural = (n: number, unit: string) => `${n} ${unit}${n === 1 ? '' : 's'}`;

function linkEmail(subject: string, intro: string, action: string, link: string, ttlMinutes: number, outro: string): Content {
  const expiry = `The link works once and expires in ${duration(ttlMinutes)}.`;
  return {
    subject,
    text: `${intro}\n\n${action}:\n${link}\n\n${expiry}\n${outro}\n`,
    html: `<!doctype html><html><body style="font-family:system-ui,sans-serif;color:#222">
<p>${escapeHtml(intro)}</p>
<p><a href="${escapeHtml(link)}">${escapeHtml(action)}</a></p>
<p style="color:#555">${escapeHtml(expiry)} ${escapeHtml(outro)}</p>
<p style="color:#555;font-size:small">${escapeHtml(link)}</p>
</body></html>`,
  };
}

/**
 * The links open the dashboard (/app/verify, /app/reset), which posts the token and goes on signed
 * in; GET /auth/verify-email and GET /auth/reset-password (api/auth-pages.ts) still answer links
 * mailed before.
 */
export function verificationEmail(publicUrl: string, token: string, ttlMinutes: number): Content {
  return linkEmail(
    'Confirm your email address',
    'Welcome to Tidings. Please confirm that this is your email address.',
    'Confirm your email address',
    `${publicUrl}/app/verify?token=${encodeURIComponent(token)}`,
    ttlMinutes,
    'If you did not sign up, you can ignore this email.',
  );
}

export function passwordResetEmail(publicUrl: string, token: string, ttlMinutes: number): Content {
  return linkEmail(
    'Reset your password',
    'Someone (hopefully you) asked to reset the password of your Tidings account.',
    'Choose a new password',
    `${publicUrl}/app/reset?token=${encodeURIComponent(token)}`,
    ttlMinutes,
    'If you did not ask for this, ignore this email: your password stays as it is.',
  );
}

/** SYSTEM_EMAIL_FROM as `Name <address>` or a bare address. */
export function parseMailbox(value: string): Address {
  const match = /^\s*"?([^"<]*?)"?\s*<([^<>\s]+)>\s*$/.exec(value);
  if (!match) return { address: value.trim() };
  return match[1] ? { name: match[1], address: match[2]! } : { address: match[2]! };
}

/** The stored row as a message; its id is the Message-ID's local part, so a retry is recognisable. */
export function systemMessage(email: SystemEmail, systemFrom: string, dkim?: OutgoingMessage['dkim']): OutgoingMessage {
  const from = parseMailbox(systemFrom);
  return {
    ...(dkim ? { dkim } : {}),
    messageId: messageIdFor(email.id, from.address),
    from,
    to: { address: email.to },
    subject: email.subject,
    text: email.text,
    html: email.html,
    headers: {},
    attachments: [],
  };
}

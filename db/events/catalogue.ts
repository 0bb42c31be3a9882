import { z } from 'zod';
import { RESERVED_EVENT_PREFIXES } from './events';

/**
 * The events the service records itself, and their `data`. Clients may not track these names
 * (the reserved prefixes in db/events/events.ts); a journey may be triggered by them or wait for
 * them, and a name under a reserved prefix that the service never records is refused.
 */
export interface SystemEvent {
  name: string;
  description: string;
  data: Record<string, string>;
}

const email = { emailId: 'the email (GET /emails/:id)', campaignId: 'the campaign, for a campaign email' };

export const SYSTEM_EVENTS: readonly SystemEvent[] = [
  { name: 'email.sent', description: 'The relay accepted the email.', data: email },
  { name: 'email.delivered', description: 'The mail infrastructure reported the email delivered.', data: email },
  { name: 'email.opened', description: 'The email was first opened (its tracking pixel fetched, or a link clicked).', data: { ...email, viaClick: 'true when a click showed the open' } },
  { name: 'email.clicked', description: 'A tracked link of the email was first clicked (once per link).', data: { ...email, url: 'the link' } },
  {
    name: 'email.bounced',
    description: 'The email bounced: refused by the relay, or reported by a delivery status notification or the notify webhook.',
    data: { ...email, bounceType: 'hard or soft', diagnostic: 'what the receiving server said, when known' },
  },
  { name: 'email.complained', description: 'The recipient reported the email as spam (a feedback-loop report or the notify webhook).', data: email },
  {
    name: 'email.received',
    description: 'Mail arrived from the contact at an address of a verified domain (a reply, or a new message).',
    data: {
      from: 'the sender address',
      subject: 'its subject',
      text: 'its plain text (the first 20,000 characters)',
      messageId: 'its Message-ID',
      emailId: 'our email it answers (In-Reply-To / References), when it answers one',
      rawKey: 'where the whole message is kept in upload storage',
      rawBytes: 'its size',
    },
  },
  { name: 'contact.subscribed', description: "An explicit change set the contact's subscription to true.", data: {} },
  { name: 'contact.unsubscribed', description: "An explicit change set the contact's subscription to false (an unsubscribe link, the API, a bounce or a complaint).", data: {} },
  {
    name: 'segment.<slug>.entry',
    description: 'The contact entered a tracked dynamic segment (POST /segments/:id/compute); `<slug>` is the segment name in lower case with dashes.',
    data: { segmentId: 'the segment', segmentName: 'its name' },
  },
  { name: 'segment.<slug>.exit', description: 'The contact left a tracked dynamic segment.', data: { segmentId: 'the segment', segmentName: 'its name' } },
];

const SEGMENT_EVENT = /^segment\.[^\s.]+\.(entry|exit)$/;
const EXACT = new Set(SYSTEM_EVENTS.map((e) => e.name).filter((n) => !n.includes('<')));

/** A name the service records itself (or could: a segment's entry or exit). */
export const isSystemEventName = (name: string) => EXACT.has(name) || SEGMENT_EVENT.test(name);

/** Names a journey can listen for: any client event name, or one the service records. */
export const listenableEventName = z
  .string()
  .trim()
  .min(1)
  .max(255)
  .refine((name) => !RESERVED_EVENT_PREFIXES.some((p) => name.startsWith(p)) || isSystemEventName(name), {
    message: `The service never records this name. Names under email., contact. and segment. are its own: ${SYSTEM_EVENTS.map((e) => e.name).join(', ')} (GET /events/system)`,
  });

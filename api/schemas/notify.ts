import { z } from 'zod';
import type { DeliveryNotification } from '../../db/messages/engagement';

/**
 * Bodies of POST /webhooks/notify: the service's own JSON (one notification or an array), an
 * Amazon SNS envelope carrying an SES notification, or an SES notification as such (SNS raw
 * message delivery, or an SES configuration-set event). `normalizeNotifications` turns each
 * into the same list.
 */

export const MAX_NOTIFICATIONS = 1000;

const tidingsNotification = z
  .object({
    type: z.enum(['delivered', 'bounced', 'complained']),
    emailId: z.uuid().optional().describe('Email id as returned by POST /v1/send'),
    messageId: z.string().min(1).max(998).optional().describe('Message-ID header of the email, `<emailId@sender-domain>`'),
    recipient: z.email().optional().describe('Used only when neither id is given: the latest email sent to this address'),
    bounceType: z.enum(['hard', 'soft']).optional().describe('Bounces only; default hard. Hard: unsubscribe and suppress the address'),
    timestamp: z.iso.datetime({ offset: true }).optional().describe('When it happened (ISO 8601); default now'),
    diagnostic: z.string().max(1000).optional().describe('SMTP diagnostic of a bounce, kept in the event'),
  })
  .superRefine((n, ctx) => {
    if (!n.emailId && !n.messageId && !n.recipient) {
      ctx.addIssue({ code: 'custom', path: ['emailId'], message: 'One of emailId, messageId or recipient is required' });
    }
    if (n.bounceType && n.type !== 'bounced') {
      ctx.addIssue({ code: 'custom', path: ['bounceType'], message: 'Only for type "bounced"' });
    }
  });

const sesRecipient = z.looseObject({ emailAddress: z.string(), diagnosticCode: z.string().optional() });

/** The parts of an SES notification that are read; the rest is accepted as it comes. */
const sesFields = {
  mail: z
    .looseObject({
      messageId: z.string().optional(),
      destination: z.array(z.string()).optional(),
      headers: z.array(z.looseObject({ name: z.string(), value: z.string() })).optional(),
      commonHeaders: z.looseObject({ messageId: z.string().optional() }).optional(),
    })
    .optional(),
  bounce: z
    .looseObject({
      bounceType: z.string().describe('Permanent (hard), Transient or Undetermined (soft)'),
      bouncedRecipients: z.array(sesRecipient).optional(),
      timestamp: z.string().optional(),
    })
    .optional(),
  complaint: z.looseObject({ complainedRecipients: z.array(sesRecipient).optional(), timestamp: z.string().optional() }).optional(),
  delivery: z.looseObject({ recipients: z.array(z.string()).optional(), timestamp: z.string().optional() }).optional(),
};
/** As SES posts to SNS topics (notification settings of an identity). */
const sesNotification = z.looseObject({
  notificationType: z.string().describe('Bounce, Complaint or Delivery; others are ignored'),
  ...sesFields,
});
/** As configuration-set event publishing writes it. */
const sesEvent = z.looseObject({
  eventType: z.string().describe('Bounce, Complaint or Delivery; others (Send, Open, Click, ...) are ignored'),
  ...sesFields,
});
const sesAny = z.union([sesNotification, sesEvent]);

const snsEnvelope = z.looseObject({
  Type: z.enum(['Notification', 'SubscriptionConfirmation', 'UnsubscribeConfirmation']),
  MessageId: z.string().optional(),
  TopicArn: z.string().optional(),
  Message: z.string().describe('For Type Notification: the SES notification as a JSON string'),
  SubscribeURL: z.string().optional(),
  Timestamp: z.string().optional(),
});

type Issue = { path: PropertyKey[]; message: string };

/** Which branch the caller meant, so a failed body is explained by that branch's issues only. */
function intendedBranch(input: unknown): number {
  if (Array.isArray(input)) return 1;
  if (input && typeof input === 'object') {
    if ('Type' in input) return 2;
    if ('notificationType' in input) return 3;
    if ('eventType' in input) return 4;
  }
  return 0;
}

export const notifyBody = z
  .union(
    [
      tidingsNotification,
      z.array(tidingsNotification).min(1).max(MAX_NOTIFICATIONS),
      snsEnvelope,
      sesNotification,
      sesEvent,
    ],
    {
      error: (iss) => {
        if (iss.code !== 'invalid_union' || !('errors' in iss)) return undefined;
        const issues = (iss.errors as Issue[][])[intendedBranch(iss.input)] ?? [];
        const text = issues.map((i) => `${i.path.map(String).join('.') || '(body)'}: ${i.message}`).join('; ');
        return text ? `Not a valid notification: ${text}` : 'Not a valid notification';
      },
    },
  )
  .describe(
    'A notification of ours `{type, emailId | messageId | recipient, bounceType?, timestamp?, diagnostic?}` or an array of ' +
      `up to ${MAX_NOTIFICATIONS}; or an Amazon SNS envelope whose Message is an SES notification; or an SES notification. ` +
      'Authenticate with `Authorization: Bearer <NOTIFY_SECRET>` (or HTTP Basic with NOTIFY_SECRET as the password, ' +
      'for SNS subscription URLs `https://tidings:<NOTIFY_SECRET>@host/webhooks/notify`). SNS posts text/plain; it is accepted.',
  );

export const notifyResponse = z.object({
  processed: z.number().int().describe('Notifications applied to an email of ours (repeats included: they are idempotent)'),
  ignored: z.number().int().describe('Notifications about no email of ours, or of a kind not tracked (SES Open, Send, ...)'),
});

export type NotifyBody = z.output<typeof notifyBody>;
type SesNotification = z.output<typeof sesAny>;

export interface NormalizedNotifications {
  notifications: DeliveryNotification[];
  /** Items understood but not about delivery (SES Send/Open/Click/DeliveryDelay, SNS confirmations). */
  ignored: number;
  /** An SNS SubscriptionConfirmation, for the operator to confirm (this service makes no outgoing call). */
  subscription?: { topicArn?: string; subscribeUrl?: string };
}

const date = (s: string | undefined) => {
  if (!s) return undefined;
  const d = new Date(s);
  return Number.isNaN(d.getTime()) ? undefined : d;
};

function fromSes(n: SesNotification): DeliveryNotification | undefined {
  const kind = 'notificationType' in n ? n.notificationType : n.eventType;
  const mail = n.mail;
  const messageIds = [
    mail?.commonHeaders?.messageId,
    ...(mail?.headers ?? []).filter((h) => h.name.toLowerCase() === 'message-id').map((h) => h.value),
    mail?.messageId,
  ].filter((v): v is string => typeof v === 'string' && v.length > 0);
  const destination = mail?.destination ?? [];
  if (kind === 'Delivery') {
    return { type: 'delivered', messageIds, recipients: n.delivery?.recipients ?? destination, timestamp: date(n.delivery?.timestamp) };
  }
  if (kind === 'Bounce' && n.bounce) {
    const recipients = n.bounce.bouncedRecipients ?? [];
    const diagnostic = recipients.find((r) => r.diagnosticCode)?.diagnosticCode;
    return {
      type: 'bounced',
      messageIds,
      recipients: recipients.length ? recipients.map((r) => r.emailAddress) : destination,
      // Transient and Undetermined: not proof that the address is dead.
      bounceType: n.bounce.bounceType === 'Permanent' ? 'hard' : 'soft',
      timestamp: date(n.bounce.timestamp),
      ...(diagnostic ? { diagnostic: diagnostic.slice(0, 1000) } : {}),
    };
  }
  if (kind === 'Complaint') {
    const recipients = n.complaint?.complainedRecipients ?? [];
    return {
      type: 'complained',
      messageIds,
      recipients: recipients.length ? recipients.map((r) => r.emailAddress) : destination,
      timestamp: date(n.complaint?.timestamp),
    };
  }
  return undefined;
}

/**
 * One list of notifications, whichever shape the (validated) body had. Throws a ZodError for an
 * SNS envelope whose Message is not an SES notification.
 */
export function normalizeNotifications(body: NotifyBody): NormalizedNotifications {
  if (Array.isArray(body)) return { notifications: body.map(fromTidings), ignored: 0 };
  // The branches again, in the union's order: loose objects do not narrow by `in`.
  const own = tidingsNotification.safeParse(body);
  if (own.success) return { notifications: [fromTidings(own.data)], ignored: 0 };
  const sns = snsEnvelope.safeParse(body);
  let ses: SesNotification;
  if (sns.success) {
    const envelope = sns.data;
    if (envelope.Type !== 'Notification') {
      const subscription = envelope.Type === 'SubscriptionConfirmation' ? { topicArn: envelope.TopicArn, subscribeUrl: envelope.SubscribeURL } : undefined;
      return { notifications: [], ignored: 0, ...(subscription ? { subscription } : {}) };
    }
    let message: unknown;
    try {
      message = JSON.parse(envelope.Message);
    } catch {
      message = undefined;
    }
    const parsed = sesAny.safeParse(message);
    if (!parsed.success) throw new z.ZodError(parsed.error.issues.map((i) => ({ ...i, path: ['Message', ...i.path] })));
    ses = parsed.data;
  } else {
    ses = sesAny.parse(body);
  }
  const n = fromSes(ses);
  return n ? { notifications: [n], ignored: 0 } : { notifications: [], ignored: 1 };
}

function fromTidings(n: z.output<typeof tidingsNotification>): DeliveryNotification {
  return {
    type: n.type,
    emailId: n.emailId,
    messageIds: n.messageId ? [n.messageId] : [],
    recipients: n.recipient ? [n.recipient] : [],
    bounceType: n.type === 'bounced' ? (n.bounceType ?? 'hard') : undefined,
    timestamp: date(n.timestamp),
    ...(n.diagnostic ? { diagnostic: n.diagnostic } : {}),
  };
}

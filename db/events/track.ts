import type { EntityManager } from '@mikro-orm/postgresql';
import { planDataPatch } from '../contacts/data';
import { upsertContact } from '../contacts/contacts';
import type { JsonValue } from '../entities/contact';
import { recordEvent, recordSubscriptionChange } from './events';

export interface TrackRequest {
  email: string;
  event: string;
  data?: Record<string, unknown>;
  subscribed?: boolean;
}

export interface TrackedEvent {
  contact: string;
  event: string;
  timestamp: string;
  /** Event data including one-shot values: what a triggered workflow gets as its context. */
  context: Record<string, JsonValue>;
}

/**
 * Upserts the contact (a new one is subscribed unless `subscribed: false` is sent) and stores the
 * event with its data. One-shot `{value, persistent:false}` values are not stored anywhere; they
 * only reach the returned context.
 */
export async function trackEvent(em: EntityManager, projectId: string, req: TrackRequest): Promise<TrackedEvent> {
  const up = await upsertContact(em, projectId, { email: req.email, subscribed: req.subscribed, data: req.data }, {
    subscribedWhenNew: true,
  });
  await recordSubscriptionChange(em, projectId, up.contact.id, up.previousSubscribed, up.contact.subscribed);
  const stored = planDataPatch(req.data).set;
  const event = await recordEvent(em, projectId, up.contact.id, req.event, stored);
  return { contact: up.contact.id, event: event.id, timestamp: event.createdAt, context: { ...stored, ...up.transient } };
}

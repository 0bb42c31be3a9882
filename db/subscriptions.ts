import type { EntityManager } from '@mikro-orm/postgresql';
import { recordSubscriptionChange } from './events';
import { queryOne } from './sql';

export interface SubscriptionState {
  contactId: string;
  email: string;
  subscribed: boolean;
}

export async function getSubscription(em: EntityManager, contactId: string): Promise<SubscriptionState | undefined> {
  const row = await queryOne<{ id: string; email: string; subscribed: boolean }>(
    em,
    'select id, email, subscribed from contacts where id = ?',
    [contactId],
  );
  return row && { contactId: row.id, email: row.email, subscribed: row.subscribed };
}

/** Sets the contact's subscription from one of its links, with the contact.* event when it changed. */
export async function setSubscription(em: EntityManager, contactId: string, subscribed: boolean): Promise<SubscriptionState | undefined> {
  return em.transactional(async (tx) => {
    const row = await queryOne<{ project_id: string; email: string; previous: boolean }>(
      tx,
      `update contacts c set subscribed = ?, updated_at = now()
       from (select id, subscribed as previous from contacts where id = ? for update) old
       where c.id = old.id returning c.project_id, c.email, old.previous`,
      [subscribed, contactId],
    );
    if (!row) return undefined;
    await recordSubscriptionChange(tx, row.project_id, contactId, row.previous, subscribed);
    return { contactId, email: row.email, subscribed };
  });
}

import type { EntityManager } from '@mikro-orm/postgresql';
import { recordSubscriptionChange } from '../events/events';
import { queryOne } from '../sql';

export interface SubscriptionState {
  contactId: string;
  email: string;
  subscribed: boolean;
  /** The pages name the project the contact belongs to. */
  projectName: string;
}

export async function getSubscription(em: EntityManager, contactId: string): Promise<SubscriptionState | undefined> {
  const row = await queryOne<{ id: string; email: string; subscribed: boolean; project_name: string }>(
    em,
    'select c.id, c.email, c.subscribed, p.name as project_name from contacts c join projects p on p.id = c.project_id where c.id = ?',
    [contactId],
  );
  return row && { contactId: row.id, email: row.email, subscribed: row.subscribed, projectName: row.project_name };
}

/** Sets the contact's subscription from one of its links, with the contact.* event when it changed. */
export async function setSubscription(em: EntityManager, contactId: string, subscribed: boolean): Promise<SubscriptionState | undefined> {
  return em.transactional(async (tx) => {
    const row = await queryOne<{ project_id: string; email: string; previous: boolean; project_name: string }>(
      tx,
      `update contacts c set subscribed = ?, updated_at = now()
       from (select id, subscribed as previous from contacts where id = ? for update) old, projects p
       where c.id = old.id and p.id = c.project_id returning c.project_id, c.email, old.previous, p.name as project_name`,
      [subscribed, contactId],
    );
    if (!row) return undefined;
    await recordSubscriptionChange(tx, row.project_id, contactId, row.previous, subscribed);
    return { contactId, email: row.email, subscribed, projectName: row.project_name };
  });
}

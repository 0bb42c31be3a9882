import { Context } from '@temporalio/activity';
import type { Config } from '../../config';
import type { Orm } from '../../db/orm';
import { type OutboxListener, triggersKey } from '../wakeups';
import { claimTriggers, deleteTriggers, type TriggerRow } from '../../db/events/trigger-outbox';
import { TemporalGateway } from '../client';
import { deliverTrackedEvent, journeyLookups } from './dispatch';
import { StartPacing } from './start-pacing';

export interface DispatchRoundInput {
  queue: string;
  /** The round takes no new rows after this long; the workflow then starts the next round. */
  maxSeconds: number;
}

const BATCH = 200;
/**
 * Contacts whose events are delivered at once while the worker keeps up (./start-pacing.ts); one
 * contact's events go in order. Each holds a pooled connection while it claims an entry, a pool
 * the worker's other activities share.
 */
const PARALLEL_CONTACTS = 8;
const IDLE_WAIT_MS = 1000;
/** A dispatcher that dies holds its rows this long; then they are claimed again. */
const LEASE_SECONDS = 30;
export function createTriggerDispatcherActivities({ orm, config, listener }: { orm: Orm; config: Config; listener: OutboxListener }) {
  return {
    /**
     * One round of the trigger dispatcher of a task queue: claims tracked events from the outbox
     * (db/events/trigger-outbox.ts) in batches, and for each one signals the executions it names and
     * starts the journeys it triggers (temporal/triggers/dispatch.ts deliverTrackedEvent), many contacts at
     * once while the worker keeps up (./start-pacing.ts) and each contact's events in order; a row is
     * deleted once all of that succeeded.
     * A row that failed (Temporal unreachable) stays and is tried again when its lease runs out.
     * Idle, it sleeps until a writer's wake-up (temporal/wakeups.ts).
     */
    async dispatchTriggers(input: DispatchRoundInput): Promise<{ dispatched: number; failed: number }> {
      const ctx = Context.current();
      const em = orm.em.fork();
      // Journeys start on this worker's own queue: eagerly (the first workflow task comes back with the start).
      const temporal = new TemporalGateway(ctx.client, ctx.info.taskQueue, config, true);
      const key = triggersKey(input.queue);
      const deadline = Date.now() + input.maxSeconds * 1000;
      let dispatched = 0;
      let failed = 0;
      const pacing = new StartPacing();
      const beat = setInterval(() => ctx.heartbeat(), 1000);
      try {
        while (!ctx.cancellationSignal.aborted && Date.now() < deadline) {
          const seen = listener.generation(key);
          const rows = await claimTriggers(em, input.queue, BATCH, LEASE_SECONDS);
          if (rows.length === 0) {
            await listener.wait(key, seen, Math.min(IDLE_WAIT_MS, deadline - Date.now()), ctx.cancellationSignal);
            continue;
          }
          const done: string[] = [];
          const deps = { em, temporal, config, lookups: journeyLookups(em) };
          const byContact = new Map<string, TriggerRow[]>();
          for (const row of rows) byContact.set(row.contactId, [...(byContact.get(row.contactId) ?? []), row]);
          const contacts = [...byContact.values()];
          const lane = async (index: number) => {
            while (contacts.length > 0 && pacing.admits(index)) {
              const events = contacts.shift()!;
              for (const row of events) {
                try {
                  pacing.observe(await deliverTrackedEvent(deps, row, row.signalExecutions, row));
                  done.push(row.id);
                } catch (err) {
                  // The contact's later events wait for this one's retry: their order matters to WAIT_FOR_EVENT.
                  failed += events.length - events.indexOf(row);
                  ctx.log.warn('Delivering a tracked event failed; it is retried', { eventId: row.eventId, error: String(err) });
                  break;
                }
              }
            }
          };
          await Promise.all(Array.from({ length: Math.min(PARALLEL_CONTACTS, contacts.length) }, (_, index) => lane(index)));
          await deleteTriggers(em, done);
          dispatched += done.length;
        }
      } finally {
        clearInterval(beat);
      }
      return { dispatched, failed };
    },
  };
}

export type TriggerDispatcherActivities = ReturnType<typeof createTriggerDispatcherActivities>;

import type { EntityManager } from '@mikro-orm/postgresql';
import type { Orm } from '../orm';
import { OUTBOX_CHANNEL } from './delivery-queue';
import { query } from '../sql';

/** This process's own engines, woken directly (db/messages/outbox-listener.ts). */
export interface LocalEngines {
  wake(key: string): void;
}

/**
 * At most one NOTIFY per key in this many milliseconds. Under `/v1/send` load every request's
 * commit asked for one, about one round trip per request (1,854 for 9,000 emails): each a write to
 * PostgreSQL's socket that wakes a backend, and a notification read back by every listening
 * process. Engines that are sending claim again after each round without one; the spacing only
 * delays an idle engine of another process, by this much at most.
 */
export const NOTIFY_SPACING_MS = 20;

/**
 * Wakes the engines that drain the outbox ("emails:<queue>" for the delivery engine,
 * "triggers:<queue>" for the trigger dispatcher) after the request's commit, from outside its
 * transaction. A NOTIFY inside the transaction would take PostgreSQL's single notification lock
 * at commit and hold it through the commit's WAL flush, so every sending request committed one
 * at a time behind it (Lock:object waits on COMMIT under bench/send.ts load). Out here a wake-up
 * writes no WAL.
 *
 * The engines of this process (API and worker in one, as `tidings start` runs them) are woken
 * at once, in memory. Other processes' engines get a NOTIFY: the first at once, then at most one
 * per NOTIFY_SPACING_MS per key while wake-ups keep coming, the last one after the last wake-up.
 * One lost with a dying process costs the engine's idle wait (about a second): the committed
 * rows are the promise, the wake-up only makes it quick.
 */
export class EngineWakeups {
  private readonly pending = new Map<string, 'in-flight' | 'again'>();
  private readonly lastSent = new Map<string, number>();
  /** One manager for every NOTIFY (a fork per NOTIFY was 0.6 % of the API's CPU samples under /v1/send load). */
  private readonly em: EntityManager;

  constructor(
    orm: Orm,
    private readonly onError: (err: unknown) => void,
    private readonly local?: LocalEngines,
  ) {
    this.em = orm.em.fork();
  }

  emails(queue: string): void {
    this.wake(`emails:${queue}`);
  }

  triggers(queue: string): void {
    this.wake(`triggers:${queue}`);
  }

  private wake(key: string): void {
    this.local?.wake(key);
    if (this.pending.has(key)) {
      this.pending.set(key, 'again');
      return;
    }
    this.pending.set(key, 'in-flight');
    void this.send(key);
  }

  private async send(key: string): Promise<void> {
    for (;;) {
      const wait = (this.lastSent.get(key) ?? 0) + NOTIFY_SPACING_MS - Date.now();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      // Wake-ups that came during the wait go with this NOTIFY; those during its round trip, with the next.
      this.pending.set(key, 'in-flight');
      this.lastSent.set(key, Date.now());
      try {
        await query(this.em, 'select pg_notify(?, ?)', [OUTBOX_CHANNEL, key]);
      } catch (err) {
        this.onError(err);
      }
      if (this.pending.get(key) !== 'again') break;
    }
    this.pending.delete(key);
  }
}

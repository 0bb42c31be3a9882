import type { Orm } from '../orm';
import { OUTBOX_CHANNEL } from './delivery-queue';
import { query } from '../sql';

/**
 * Wakes the engines that drain the outbox ("emails:<queue>" for the delivery engine,
 * "triggers:<queue>" for the trigger dispatcher) after the request's commit, from outside its
 * transaction. A NOTIFY inside the transaction would take PostgreSQL's single notification lock
 * at commit and hold it through the commit's WAL flush, so every sending request committed one
 * at a time behind it (Lock:object waits on COMMIT under bench/send.ts load). Out here a wake-up
 * writes no WAL, and wake-ups are coalesced: one in flight per key, one more if another came
 * meanwhile. One lost with a dying process costs the engine's idle wait (about a second): the
 * committed rows are the promise, the wake-up only makes it quick.
 */
export class EngineWakeups {
  private readonly pending = new Map<string, 'in-flight' | 'again'>();

  constructor(
    private readonly orm: Orm,
    private readonly onError: (err: unknown) => void,
  ) {}

  emails(queue: string): void {
    this.wake(`emails:${queue}`);
  }

  triggers(queue: string): void {
    this.wake(`triggers:${queue}`);
  }

  private wake(key: string): void {
    if (this.pending.has(key)) {
      this.pending.set(key, 'again');
      return;
    }
    this.pending.set(key, 'in-flight');
    void this.send(key);
  }

  private async send(key: string): Promise<void> {
    for (;;) {
      try {
        await query(this.orm.em.fork(), 'select pg_notify(?, ?)', [OUTBOX_CHANNEL, key]);
      } catch (err) {
        this.onError(err);
      }
      if (this.pending.get(key) !== 'again') break;
      this.pending.set(key, 'in-flight');
    }
    this.pending.delete(key);
  }
}

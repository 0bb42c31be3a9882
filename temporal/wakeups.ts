import type { EntityManager } from '@mikro-orm/postgresql';
import { Client } from 'pg';
import { systemTimer, type Timer } from '../db/clock';
import type { Orm } from '../db/orm';
import { query } from '../db/sql';

/**
 * How engines learn that there is work, whichever processes they run in (docs/delivery.md): a
 * writer commits its rows, then calls EngineWakeups, which sends a NOTIFY on one channel; every
 * worker process LISTENs on it (OutboxListener) and wakes the engines waiting on the key. Waiting
 * is bounded all the same, so an engine looks on its own about once a second: a lost wake-up costs
 * that long, never an email. Keys: "emails:<queue>" (the delivery engine), "triggers:<queue>"
 * (the trigger dispatcher).
 */
export const OUTBOX_CHANNEL = 'tidings_outbox';

export const emailsKey = (queue: string) => `emails:${queue}`;
export const triggersKey = (queue: string) => `triggers:${queue}`;

/**
 * At most one NOTIFY per key in this many milliseconds. Under `/v1/send` load every request's
 * commit asks for one; each is a write to PostgreSQL's socket that wakes a backend, and a
 * notification read back by every listening process. An engine that found its queue drained
 * claims again on the next wake-up (temporal/delivery/round.ts), so under load each claim takes
 * what was committed in this time, and an email waits for its wake-up by this much at most.
 */
export const NOTIFY_SPACING_MS = 20;

/**
 * Wakes the engines after the writer's commit, from outside its transaction: a NOTIFY inside one
 * takes PostgreSQL's single notification lock at commit and holds it through the commit's WAL
 * flush, so concurrent writers would commit one at a time behind it. The first wake-up of a key
 * goes at once, then at most one per NOTIFY_SPACING_MS while they keep coming, the last one after
 * the last wake-up.
 */
export class EngineWakeups {
  private readonly pending = new Map<string, 'in-flight' | 'again'>();
  private readonly lastSent = new Map<string, number>();
  /** One manager for every NOTIFY: raw statements only take a pooled connection through it. */
  private readonly em: EntityManager;

  constructor(
    orm: Orm,
    private readonly onError: (err: unknown) => void,
    private readonly timer: Timer = systemTimer,
  ) {
    this.em = orm.em.fork();
  }

  emails(queue: string): void {
    this.wake(emailsKey(queue));
  }

  triggers(queue: string): void {
    this.wake(triggersKey(queue));
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
      const last = this.lastSent.get(key);
      const wait = last === undefined ? 0 : last + NOTIFY_SPACING_MS - this.timer.now();
      if (wait > 0) await this.timer.wait(wait);
      // Wake-ups that came during the wait go with this NOTIFY; those during its round trip, with the next.
      this.pending.set(key, 'in-flight');
      this.lastSent.set(key, this.timer.now());
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

/**
 * One LISTEN connection per worker process, shared by its engines: a notification for a key
 * ("emails:<queue>", "triggers:<queue>") wakes whoever waits on it within milliseconds. Waiting
 * is bounded all the same (a lease that expires, a retry that comes due, a notification lost
 * while the connection was down all need a look without one), and a broken connection is
 * reopened on the next wait.
 */
export class OutboxListener {
  private client: Client | undefined;
  private connecting: Promise<void> | undefined;
  private readonly generations = new Map<string, number>();
  private readonly waiters = new Map<string, Set<() => void>>();

  constructor(private readonly databaseUrl: string) {}

  /** A counter that moves on every notification for `key`: read it before looking for work. */
  generation(key: string): number {
    return this.generations.get(key) ?? 0;
  }

  /**
   * Resolves on the first notification for `key` after `since` (at once if one came meanwhile),
   * after `timeoutMs`, or when `signal` aborts.
   */
  async wait(key: string, since: number, timeoutMs: number, signal?: AbortSignal): Promise<void> {
    await this.connect().catch(() => undefined);
    if (this.generation(key) !== since || signal?.aborted) return;
    await new Promise<void>((resolve) => {
      const set = this.waiters.get(key) ?? new Set();
      this.waiters.set(key, set);
      const done = () => {
        clearTimeout(timer);
        set.delete(done);
        signal?.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      signal?.addEventListener('abort', done);
      set.add(done);
    });
  }

  async close(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => undefined);
  }

  private connect(): Promise<void> {
    if (this.client) return Promise.resolve();
    this.connecting ??= (async () => {
      const client = new Client({ connectionString: this.databaseUrl, connectionTimeoutMillis: 5000 });
      client.on('notification', (n) => n.payload && this.wake(n.payload));
      // A dropped connection: forget it (the next wait reconnects) and wake everyone to look.
      client.on('error', () => {
        if (this.client === client) this.client = undefined;
        void client.end().catch(() => undefined);
        for (const key of this.waiters.keys()) this.wake(key);
      });
      await client.connect();
      await client.query(`listen ${OUTBOX_CHANNEL}`);
      this.client = client;
    })().finally(() => (this.connecting = undefined));
    return this.connecting;
  }

  private wake(key: string): void {
    this.generations.set(key, this.generation(key) + 1);
    for (const done of [...(this.waiters.get(key) ?? [])]) done();
  }
}

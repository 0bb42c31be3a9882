import { Client } from 'pg';
import { OUTBOX_CHANNEL } from './delivery-queue';

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
  wait(key: string, since: number, timeoutMs: number, signal?: AbortSignal): Promise<void> {
    return this.waitAny({ [key]: since }, timeoutMs, signal);
  }

  /** As wait, on the first notification for any of the keys after its generation in `since`. */
  async waitAny(since: Record<string, number>, timeoutMs: number, signal?: AbortSignal): Promise<void> {
    await this.connect().catch(() => undefined);
    const keys = Object.keys(since);
    if (keys.some((key) => this.generation(key) !== since[key]) || signal?.aborted) return;
    await new Promise<void>((resolve) => {
      const sets = keys.map((key) => {
        const set = this.waiters.get(key) ?? new Set();
        this.waiters.set(key, set);
        return set;
      });
      const done = () => {
        clearTimeout(timer);
        for (const set of sets) set.delete(done);
        signal?.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      signal?.addEventListener('abort', done);
      for (const set of sets) set.add(done);
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

  /** Wakes this process's waiters on `key`, as a notification for it does. */
  wake(key: string): void {
    this.generations.set(key, this.generation(key) + 1);
    for (const done of [...(this.waiters.get(key) ?? [])]) done();
  }

  /** Wakes the longest waiter on `key` only: for work one waiter takes (an email handed off, DeliveryHandoff). */
  wakeOne(key: string): void {
    this.generations.set(key, this.generation(key) + 1);
    const first = this.waiters.get(key)?.values().next();
    if (first && !first.done) first.value();
  }
}

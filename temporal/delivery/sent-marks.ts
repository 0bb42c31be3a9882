import { setTimeout as sleep } from 'node:timers/promises';
import type { EntityManager } from '@mikro-orm/postgresql';
import { Coalescer } from '../../db/coalescer';
import { markEmailsSent, type SentMark } from '../../db/messages/delivery-queue';

/**
 * Writes SENT marks as soon as the relay accepts: one statement for whatever accumulated while the
 * previous write ran, so under load the marks batch themselves and when idle each goes at once.
 * A write that fails (a connection cut under it) is tried again for up to `giveUpAfterMs`, while
 * the emails' leases still keep every other engine off them; only marks that could not be written
 * within that time are SMTP's at-least-once gap, like those of a worker that dies: those emails go again.
 */
export class SentMarks<M> {
  private pending: M[] = [];
  private writing: M[] = [];
  private running: Promise<void> | undefined;
  failure: unknown;
  written = 0;

  constructor(
    private readonly write: (marks: M[]) => Promise<void>,
    private readonly giveUpAfterMs = 2000,
  ) {}

  add(mark: M): void {
    this.pending.push(mark);
    this.kick();
  }

  /** Marks accepted by the relay and not yet written: their emails' leases must be kept. */
  unwritten(): M[] {
    return [...this.writing, ...this.pending];
  }

  private kick(): void {
    if (this.running || this.failure) return;
    this.running = this.loop().finally(() => {
      this.running = undefined;
      if (this.pending.length) this.kick();
    });
  }

  private async loop(): Promise<void> {
    while (this.pending.length && !this.failure) {
      this.writing = this.pending.splice(0);
      let failingSince: number | undefined;
      for (let attempt = 1; ; attempt++) {
        try {
          await this.write(this.writing);
          this.written += this.writing.length;
          this.writing = [];
          break;
        } catch (err) {
          failingSince ??= Date.now();
          if (Date.now() - failingSince >= this.giveUpAfterMs) {
            this.failure = err;
            return;
          }
          await new Promise((r) => setTimeout(r, Math.min(100 * attempt, 1000)));
        }
      }
    }
  }

  /** Resolves once every mark added so far is written; throws if writing them failed for good. */
  async drain(): Promise<void> {
    for (;;) {
      if (this.running) await this.running;
      else if (this.pending.length && !this.failure) this.kick();
      else break;
    }
    if (this.failure) throw this.failure;
  }
}

/**
 * The SENT marks of every round in one worker process (one per engine it runs), in shared
 * statements (db/coalescer.ts): a statement's fixed cost (the round trip, the commit's WAL flush)
 * was most of its cost when each round wrote a handful. One is in flight at a time; what arrives
 * meanwhile, and during the linger after it, goes in the next. A failed statement fails every
 * round's marks in it, and each round writes them again (SentMarks).
 */
export class MarkStatements {
  private readonly marks: Coalescer<SentMark[], undefined>;

  constructor(em: EntityManager, lingerMs = 0) {
    this.marks = new Coalescer(
      async (batches) => {
        await markEmailsSent(em, batches.flat());
        return batches.map(() => undefined);
      },
      lingerMs > 0 ? { linger: () => sleep(lingerMs) } : {},
    );
  }

  async write(marks: SentMark[]): Promise<void> {
    if (marks.length) await this.marks.run(marks);
  }
}

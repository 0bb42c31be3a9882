/**
 * Writes SENT marks as soon as the relay accepts: one statement for whatever accumulated while the
 * previous write ran, so under load the marks batch themselves and when idle each goes at once.
 * The marks not yet written when a worker dies are SMTP's at-least-once gap: those emails go again.
 */
export class SentMarks<M> {
  private pending: M[] = [];
  private running: Promise<void> | undefined;
  failure: unknown;
  written = 0;

  constructor(private readonly write: (marks: M[]) => Promise<void>) {}

  add(mark: M): void {
    this.pending.push(mark);
    this.kick();
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
      const marks = this.pending.splice(0);
      for (let attempt = 1; ; attempt++) {
        try {
          await this.write(marks);
          this.written += marks.length;
          break;
        } catch (err) {
          if (attempt >= 5) {
            this.failure = err;
            return;
          }
          await new Promise((r) => setTimeout(r, 200 * attempt));
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


/**
 * Turns concurrent calls into batches: each `run(item)` waits for the batch it joins, and a batch
 * is one call of `runBatch` (one statement, one round trip to PostgreSQL) for all the items that
 * arrived while the batch before it was in flight. One batch is in flight at a time. With nothing
 * in flight a call starts its batch at the end of the current event-loop turn, so an idle service
 * adds no wait; under load the batches grow by themselves, and the statement's fixed cost (the
 * round trip, parse, bind, executor start, the commit) is paid once per batch instead of once per
 * request. Two to four batches in flight made smaller ones, and cost the API and PostgreSQL more
 * CPU per request for no more throughput (docs/performance.md).
 *
 * A caller may add a `linger`: after each batch the next waits for it (a few milliseconds) before it
 * starts, unless a full batch already waits, so that more calls join it (group commit). A call on
 * an idle coalescer still starts at once; one that comes during the linger waits out the rest.
 *
 * `runBatch` answers each item in order: a value, or an Error for that item alone. When it throws,
 * every item of the batch gets that error (the database is unreachable, say).
 */
export interface CoalescerOptions {
  /** The most items in one batch; more wait for the next. */
  maxBatch?: number;
  /** What the next batch waits for after each batch, a few milliseconds (group commit). */
  linger?: () => Promise<void>;
}

export class Coalescer<I, O> {
  private queue: { item: I; resolve: (value: O) => void; reject: (err: unknown) => void }[] = [];
  private inFlight = false;
  private scheduled = false;

  private readonly maxBatch: number;
  private readonly linger: (() => Promise<void>) | undefined;

  constructor(
    private readonly runBatch: (items: I[]) => Promise<(O | Error)[]>,
    options: CoalescerOptions = {},
  ) {
    this.maxBatch = options.maxBatch ?? 64;
    this.linger = options.linger;
  }

  run(item: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.queue.push({ item, resolve, reject });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled || this.queue.length === 0 || this.inFlight) return;
    this.scheduled = true;
    // After the requests already read in this turn of the event loop have joined.
    setImmediate(() => {
      this.scheduled = false;
      this.flush();
    });
  }

  private flush(): void {
    if (this.queue.length === 0 || this.inFlight) return;
    const batch = this.queue.splice(0, this.maxBatch);
    this.inFlight = true;
    this.runBatch(batch.map((b) => b.item))
      .then(
        (results) => {
          if (results.length !== batch.length) throw new Error(`Coalescer: ${results.length} results for ${batch.length} items`);
          batch.forEach((b, i) => {
            const result = results[i]!;
            if (result instanceof Error) b.reject(result);
            else b.resolve(result);
          });
        },
        (err: unknown) => batch.forEach((b) => b.reject(err)),
      )
      .catch((err: unknown) => batch.forEach((b) => b.reject(err)))
      .finally(async () => {
        if (this.linger && this.queue.length < this.maxBatch) await this.linger().catch(() => undefined);
        this.inFlight = false;
        this.schedule();
      });
  }
}

import { type EventLoopUtilization, performance } from 'node:perf_hooks';

/** Requests within this long of each other are one burst. */
const BURST_GAP_MS = 50;
/**
 * A burst that keeps the event loop busier than this has the process's time. Low, because the
 * API also waits on PostgreSQL on the same cores: at 0.5 a journey still started now and then
 * during a burst (630 tracks/s), at 0.3 none did (828/s).
 */
const SATURATED_ELU = 0.3;
/** How often a waiting task looks again: often enough to go on soon after a burst, seldom enough to cost nothing. */
const POLL_MS = 20;
/** The event loop's utilization is judged over at least this long. */
const ELU_WINDOW_MS = 100;
/**
 * A burst's first window is judged early, over this long, once several requests are in flight: a
 * burst of 1,000 tracks took under a second, and the journeys the trigger dispatcher started in
 * its first 100 ms took CPU from all of it (bench/workflows.ts: 944–1,030 → 1,049–1,219 tracks/s
 * in three alternating pairs). A lone request is never judged this early: one at a time, the
 * work behind it goes at once.
 */
const FIRST_GLANCE_MS = 20;

/**
 * The API's requests come first when the API and the worker share a process (`tidings start`
 * with both roles): background work that may start a moment later (the trigger dispatcher
 * starting journeys) waits while a burst of requests keeps the event loop busy, for a bounded
 * time. A steady trickle of requests leaves the loop mostly idle and holds nothing back.
 * A worker in a process of its own gets no Foreground, and never waits.
 *
 * Why: 1,000 tracked events that each start a journey were answered at 124–178/s, p99 306–343 ms,
 * on 2 cores, because every journey started during the burst took ~40 ms of CPU from it; waiting
 * for the burst to pass, 838–954/s, p99 57–101 ms, and the journeys finished no later
 * (bench/workflows.ts).
 */
export class Foreground {
  private inFlight = 0;
  private lastActiveAt = -Infinity;
  private windowStart = performance.eventLoopUtilization();
  private utilization = 0;
  private saturated = false;
  /** The burst's first full window has been judged. */
  private judged = false;
  /** Numbers the bursts: a request after a quiet gap starts the next one. */
  private bursts = 0;

  /** Counts a request as in flight until the returned function is called (once is enough, more are ignored). */
  begin(): () => void {
    const now = performance.now();
    if (this.inFlight === 0 && now - this.lastActiveAt >= BURST_GAP_MS) {
      this.bursts += 1;
      this.saturated = false;
      // Judged on its own time: averaged with the idle seconds before it, a burst read as saturated a window late.
      this.windowStart = performance.eventLoopUtilization();
      this.utilization = 0;
      this.judged = false;
    }
    this.inFlight += 1;
    this.lastActiveAt = now;
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      this.inFlight -= 1;
      this.lastActiveAt = performance.now();
    };
  }

  /**
   * A burst of requests is under way that saturated the event loop: it stays busy until the burst
   * ends, not only while the last window's utilization is high (one idle moment would let a
   * journey start, whose work then competes with the rest of the burst).
   */
  busy(): boolean {
    const bursting = this.inFlight > 0 || performance.now() - this.lastActiveAt < BURST_GAP_MS;
    if (!bursting) this.saturated = false;
    else if (this.loopUtilization() > SATURATED_ELU) this.saturated = true;
    return this.saturated;
  }

  /** The burst under way, or the last one: a number that changes when a new burst begins. */
  get burst(): number {
    return this.bursts;
  }

  /** Resolves once the API is not busy, after `maxWaitMs` at most (background work is delayed, never starved), or when `signal` aborts. */
  async quiet(maxWaitMs: number, signal?: AbortSignal): Promise<void> {
    const deadline = performance.now() + maxWaitMs;
    while (this.busy() && performance.now() < deadline && !signal?.aborted) {
      await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    }
  }

  private loopUtilization(): number {
    const since: EventLoopUtilization = performance.eventLoopUtilization(this.windowStart);
    const elapsed = since.idle + since.active;
    if (elapsed >= ELU_WINDOW_MS) {
      this.utilization = since.utilization;
      this.windowStart = performance.eventLoopUtilization();
      this.judged = true;
    } else if (!this.judged && elapsed >= FIRST_GLANCE_MS && this.inFlight > 1) {
      return since.utilization;
    }
    return this.utilization;
  }
}

/**
 * Lets a burst of requests go first for at most `budgetMs` of it: `turn()` waits while the API is
 * busy, until the burst has held this work back for the budget; from then on it runs alongside
 * the burst until the burst ends. The next burst gets a budget of its own only once the work
 * caught up with what was held back (`drained()`): bursts with short gaps between them (a client
 * that pauses now and then) cannot hold it back burst after burst. Started at most that late,
 * never starved: work held back is only reordered, so it finishes about as soon as it would have,
 * while the requests of the burst are answered sooner.
 *
 * Why, for the delivery engine: on 2 cores, a burst of 4,000 `/v1/send` was answered at
 * 383–409/s with every email sent as it was accepted; with the engine's lanes waiting for up to
 * 5 s of the burst, 559–587/s, and the last email reached the relay no later (bench/send.ts).
 */
export class BurstYield {
  /** The last burst seen, and since when it holds this work back (-Infinity: it does not). */
  private held: { burst: number; since: number } | undefined;
  /** Nothing held back is left undone. */
  private caughtUp = true;
  /** One wait shared by every caller: dozens of lanes need not poll the loop each. */
  private waiting: Promise<void> | undefined;

  constructor(
    private readonly foreground: Foreground,
    private readonly budgetMs: number,
  ) {}

  /** Resolves at once unless a burst is under way whose budget is not spent; `signal` ends the wait early. */
  async turn(signal?: AbortSignal): Promise<void> {
    if (!this.foreground.busy()) return;
    const now = performance.now();
    const burst = this.foreground.burst;
    if (this.held?.burst !== burst) {
      this.held = { burst, since: this.caughtUp ? now : -Infinity };
      this.caughtUp = false;
    }
    const left = this.held.since + this.budgetMs - now;
    if (left <= 0 || signal?.aborted) return;
    this.waiting ??= this.foreground.quiet(left).finally(() => (this.waiting = undefined));
    if (!signal) return this.waiting;
    let onAbort!: () => void;
    const aborted = new Promise<void>((resolve) => signal.addEventListener('abort', (onAbort = () => resolve()), { once: true }));
    try {
      await Promise.race([this.waiting, aborted]);
    } finally {
      signal.removeEventListener('abort', onAbort);
    }
  }

  /** The work has nothing left to do (what was held back is done): the next burst may hold it back again. */
  drained(): void {
    this.caughtUp = true;
  }
}

import type { Log } from './services';

/** Thrown between start-up steps when a stop was requested meanwhile. */
class Interrupted extends Error {}

/**
 * A process of the service from start-up to exit: what it started, stopped in reverse order, and
 * the requests to stop. SIGINT and SIGTERM are handled from the very start until the process exits:
 * a SIGTERM while PostgreSQL or Temporal is still starting must stop what is already up, and a
 * repeated signal (a second Ctrl-C, or a copy relayed by a parent) must not take Node's default
 * action and exit at once, leaving the detached Temporal dev server running.
 */
export class Lifecycle {
  private readonly stops: (() => Promise<void>)[] = [];
  private reason: string | undefined;
  private wake: (reason: string) => void = () => undefined;
  /** Resolves with the reason (`SIGTERM`, …) at the first request to stop. */
  readonly stopRequested = new Promise<string>((resolve) => (this.wake = resolve));

  constructor(private readonly log: Log) {
    const onSignal = (signal: NodeJS.Signals) =>
      this.reason ? log(`${signal} received again; still shutting down`) : this.requestStop(signal, `${signal} received, shutting down`);
    // Never removed: a relayed copy of the signal can land after everything has stopped, and without
    // a handler it would kill the process (exit 143) before the CLI exits with 0.
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
  }

  /** A request to stop from elsewhere than a signal (one of the supervised processes exited). */
  requestStop(reason: string, message: string): void {
    if (this.reason) return;
    this.reason = reason;
    this.log(message);
    this.wake(reason);
  }

  /** Called between start-up steps: the rest of the start-up is skipped once a stop was requested. */
  checkpoint(): void {
    if (this.reason) throw new Interrupted();
  }

  /** `stop` runs at the end, before what was started earlier. */
  onStop(stop: () => Promise<void>): void {
    this.stops.push(stop);
  }

  async stopAll(): Promise<void> {
    for (const stop of this.stops.splice(0).reverse()) await stop().catch((err) => this.log(`shutdown: ${(err as Error).message}`));
  }

  /**
   * Runs the start-up; true once it is done. On a failure or a stop request it stops what was
   * started and returns false, or throws the start-up error.
   */
  async startUp(steps: () => Promise<void>): Promise<boolean> {
    try {
      await steps();
      return true;
    } catch (err) {
      await this.stopAll();
      if (err instanceof Interrupted) return false;
      // A group-wide signal also reaches what is starting: PostgreSQL, or the Temporal dev server in
      // the instant between its spawn and it leaving our process group. Its failure is then the stop
      // that was asked for, not a start-up error.
      if (!this.reason) throw err;
      this.log(`Start-up cut short by ${this.reason}: ${(err as Error).message.split('\n')[0]}`);
      return false;
    }
  }
}

import type { Log } from './services';

/** Thrown between startup steps when a stop signal arrived meanwhile. */
export class Interrupted extends Error {}

export interface StopSignals {
  /** Resolves with the reason (`SIGTERM`, …) at the first stop request. */
  requested: Promise<string>;
  /** The first stop request so far, if any. */
  reason(): string | undefined;
  /** Throws Interrupted once a stop was requested: called between start-up steps. */
  checkpoint(): void;
  /** A stop request from elsewhere than a signal (a role's process exited). */
  request(reason: string, message: string): void;
}

/**
 * SIGINT and SIGTERM, handled from the very start and until everything is stopped: a SIGTERM while
 * PostgreSQL or Temporal is still starting must stop what is already up, and a repeated signal (a
 * second Ctrl-C, or a copy relayed by a parent) must not take Node's default action and exit at
 * once, leaving the detached Temporal dev server running.
 */
export function watchStopSignals(log: Log): StopSignals {
  let first: string | undefined;
  let wake: (reason: string) => void = () => undefined;
  const requested = new Promise<string>((resolve) => (wake = resolve));
  const request = (reason: string, message: string) => {
    if (first) return;
    first = reason;
    log(message);
    wake(reason);
  };
  const onSignal = (signal: NodeJS.Signals) =>
    first ? log(`${signal} received again; still shutting down`) : request(signal, `${signal} received, shutting down`);
  // Never removed: a relayed copy of the signal can land after everything has stopped, and without
  // a handler it would kill the process (exit 143) before the CLI exits with 0.
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  return {
    requested,
    reason: () => first,
    checkpoint: () => {
      if (first) throw new Interrupted();
    },
    request,
  };
}

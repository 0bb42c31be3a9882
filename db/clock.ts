/**
 * What time it is, for rules that count within a window of time (the API's rate limit, sign-in and
 * account-mail attempts). The service passes the system clock; a test passes one it moves, so a
 * window's end is a step of the test rather than a wait.
 */
export type Clock = () => Date;

export const systemClock: Clock = () => new Date();

/**
 * What time it is in milliseconds and a way to wait, for a rule that spaces work out in time (the
 * engines' wake-ups, temporal/wakeups.ts). A test passes one whose waits end when the test moves
 * it, so the rule is checked step by step instead of against the wall clock.
 */
export interface Timer {
  now(): number;
  wait(ms: number): Promise<void>;
}

export const systemTimer: Timer = {
  now: () => Date.now(),
  wait: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
};

/** Keeps the event loop busy for `ms`, as a burst of requests does (foreground.ts judges bursts by the loop's utilization). */
export function spin(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // busy
  }
}

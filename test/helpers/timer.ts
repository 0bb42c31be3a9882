import type { Timer } from '../../db/clock';

/**
 * A Timer the test moves: time stands still until `advance`, and a wait ends when time reaches
 * its end. `parked` resolves once the code under test waits on it, a positive signal that it
 * has gone as far as it can at this time.
 */
export class ManualTimer implements Timer {
  private waits: { until: number; resolve: () => void }[] = [];
  private onPark: (() => void) | undefined;

  constructor(private time = 1_000_000) {}

  now(): number {
    return this.time;
  }

  wait(ms: number): Promise<void> {
    return new Promise((resolve) => {
      this.waits.push({ until: this.time + ms, resolve });
      this.onPark?.();
    });
  }

  /** How many waits have not ended. */
  get waiting(): number {
    return this.waits.length;
  }

  /** Resolves when something waits on this timer (at once if something already does). */
  parked(): Promise<void> {
    if (this.waits.length > 0) return Promise.resolve();
    return new Promise((resolve) => {
      this.onPark = () => {
        this.onPark = undefined;
        resolve();
      };
    });
  }

  advance(ms: number): void {
    this.time += ms;
    const due = this.waits.filter((w) => w.until <= this.time);
    this.waits = this.waits.filter((w) => w.until > this.time);
    for (const w of due) w.resolve();
  }
}

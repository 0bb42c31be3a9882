/**
 * How many of the trigger dispatcher's lanes start journeys. Every lane goes on while the worker
 * takes each journey as it starts (eagerly: the start's reply hands the first workflow task to a
 * free slot of this worker). A start that finds no free slot leaves its task in Temporal's queue,
 * and more lanes would only lengthen that queue: each waiting start costs the server CPU now and
 * delays every journey behind it. So after such a start one lane goes on alone, until a start is
 * eager again (docs/performance.md, "Journeys start as fast as the worker runs them").
 */
export class StartPacing {
  /** A server that never starts eagerly (it can be switched off) says nothing about the worker's slots. */
  private eagerSeen = false;
  private queued = false;

  /** Whether lane `index` (from 0) takes another contact's events now. */
  admits(index: number): boolean {
    return index === 0 || !this.queued;
  }

  /** What one delivered event's starts did: how many the worker took at once, and how many wait in the queue. */
  observe({ eager, queued }: { eager: number; queued: number }): void {
    if (eager + queued === 0) return;
    if (eager > 0) this.eagerSeen = true;
    this.queued = this.eagerSeen && queued > 0;
  }
}

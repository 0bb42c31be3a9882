import type { EmailForDelivery } from './emails';

/** The wake-up key of a queue's handed-off emails (OutboxListener), apart from the NOTIFY key, so a lane woken by one looks in memory, not in the table. */
export const handoffKey = (queue: string) => `handoff:${queue}`;

interface Round {
  capacity: number;
  /** Wakes one of the round's idle lanes. */
  wake: () => void;
}

interface QueueState {
  /** The open rounds of this process. */
  rounds: Map<symbol, Round>;
  buffer: EmailForDelivery[];
  /** Reserved and not yet delivered or cancelled: written, or being written, already claimed. */
  reserved: number;
}

/** A place in a local round's buffer, reserved before the email is written (claimed) and filled after. */
export interface Reservation {
  /** The lease the written row takes: the round renews it while it holds the email. */
  leaseSeconds: number;
  /** The email was written, claimed: false if no round of its queue takes work any more (the caller gives the claim back). */
  deliver(email: EmailForDelivery): boolean;
  /** Nothing was written. */
  cancel(): void;
}

/**
 * The API hands the emails it writes to the delivery engine of its own process, already claimed
 * (docs/performance.md, twelfth session). When `tidings start` runs the API and the worker in one
 * process and a round of the queue's engine is taking work here, `/v1/send` writes its email as
 * SENDING, leased to the engine (attempts 1), and puts it in this buffer; a lane of the round takes
 * it from memory. Otherwise the email was written QUEUED and an engine claims it from the table:
 * one UPDATE through every index of `emails` and a share of a claim statement per email, which the
 * hand-off saves.
 *
 * Nothing is lost with the process: a handed-off row is leased like a claimed one, and when the
 * lease runs out (DELIVERY_LEASE_SECONDS) any engine claims it again. While the process lives, a
 * round renews the leases of what it holds and what waits here; the last round of a queue to close
 * takes the buffer's rest with it and gives those claims back (QUEUED), as it does its own unsent
 * claims.
 */
export class DeliveryHandoff {
  private readonly queues = new Map<string, QueueState>();

  constructor(private readonly leaseSeconds: number) {}

  /**
   * A round of `queue` takes handed-off emails until the returned function is called: at most
   * `capacity` of them waiting at once (with the other open rounds' capacities); `wake` wakes one
   * of its idle lanes. That function returns what nobody took, when this was the queue's last open
   * round: the caller gives those claims back.
   */
  open(queue: string, capacity: number, wake: () => void): () => EmailForDelivery[] {
    const state = this.state(queue);
    const round = Symbol(queue);
    state.rounds.set(round, { capacity, wake });
    return () => {
      if (!state.rounds.delete(round) || state.rounds.size > 0) return [];
      return state.buffer.splice(0);
    };
  }

  /** A place for one email of `queue`, if a round of it takes work here and has room. */
  reserve(queue: string): Reservation | undefined {
    const state = this.queues.get(queue);
    if (!state || state.rounds.size === 0) return undefined;
    let capacity = 0;
    for (const round of state.rounds.values()) capacity += round.capacity;
    if (state.buffer.length + state.reserved >= capacity) return undefined;
    state.reserved += 1;
    let settled = false;
    const settle = () => {
      if (settled) throw new Error('DeliveryHandoff: a reservation is settled once');
      settled = true;
      state.reserved -= 1;
    };
    return {
      leaseSeconds: this.leaseSeconds,
      deliver: (email) => {
        settle();
        const round = state.rounds.values().next();
        if (round.done) return false;
        state.buffer.push(email);
        // One lane takes it; the rounds of a process wait on one listener, so one wake-up reaches the idle lane of either.
        round.value.wake();
        return true;
      },
      cancel: settle,
    };
  }

  /** The next handed-off email of `queue`, oldest first. */
  take(queue: string): EmailForDelivery | undefined {
    return this.queues.get(queue)?.buffer.shift();
  }

  /** The ids waiting in the buffer: the rounds renew their leases with their own. */
  waiting(queue: string): string[] {
    return this.queues.get(queue)?.buffer.map((e) => e.email.id) ?? [];
  }

  private state(queue: string): QueueState {
    let state = this.queues.get(queue);
    if (!state) this.queues.set(queue, (state = { rounds: new Map(), buffer: [], reserved: 0 }));
    return state;
  }
}

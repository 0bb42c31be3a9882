import type { EmailForDelivery } from './emails';
import type { PreparedEmail } from './prepare';
import { ProjectTurns } from './project-turns';

/** The wake-up key of a queue's handed-off emails (OutboxListener), apart from the NOTIFY key, so a lane woken by one looks in memory, not in the table. */
export const handoffKey = (queue: string) => `handoff:${queue}`;

interface Round {
  capacity: number;
  /** Wakes one of the round's idle lanes. */
  wake: () => void;
}

interface Waiting {
  email: EmailForDelivery;
  chars: number;
}

interface QueueState {
  /** The open rounds of this process. */
  rounds: Map<symbol, Round>;
  /** Handed-off emails, taken project by project in turn. */
  buffer: ProjectTurns<Waiting>;
  /** Reserved and not yet delivered or cancelled: written, or being written, already claimed. */
  reserved: number;
  /** The characters of subject and body of what waits in the buffer or is reserved. */
  chars: number;
}

/**
 * Characters of subject and body one queue's hand-off may hold in a process (32–64 MiB), however
 * many emails its rounds would take: a round that lets a burst of requests go first takes
 * thousands (temporal/delivery/activities.ts), and their bodies are in memory until sent.
 */
export const HANDOFF_MAX_CHARS = 32 * 1024 * 1024;

/** What an email waiting in the hand-off holds in memory, most of it. */
const charsOf = (subject: string, body: string) => subject.length + body.length;

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
 * The API hands the emails it writes to the delivery engine of its own process, already claimed.
 * When `tidings start` runs the API and the worker in one process and a round of the queue's engine
 * is taking work here, `/v1/send` writes its emails as SENDING, leased to the engine (attempts 1),
 * and puts them in this buffer (Handover, below); a lane of the round takes each from memory. A
 * journey's SEND_EMAIL step, which runs in a worker, does the same with its email. Otherwise an
 * email is written QUEUED and an engine claims it from the table: one UPDATE through every index of
 * `emails` and a share of a claim statement per email, which the hand-off saves.
 *
 * Nothing is lost with the process: a handed-off row is leased like a claimed one, and when the
 * lease runs out (DELIVERY_LEASE_SECONDS) any engine claims it again. While the process lives, a
 * round renews the leases of what it holds and what waits here; the last round of a queue to close
 * takes the buffer's rest with it and gives those claims back (QUEUED), as it does its own unsent
 * claims.
 */
export class DeliveryHandoff {
  private readonly queues = new Map<string, QueueState>();
  /** Projects with a send throttle of their own, as the engine last read them (setThrottled). */
  private throttled: ReadonlySet<string> = new Set();

  constructor(
    private readonly leaseSeconds: number,
    private readonly maxChars = HANDOFF_MAX_CHARS,
  ) {}

  /**
   * A round of `queue` takes handed-off emails until the returned function is called: at most
   * `capacity` of them waiting at once (with the other open rounds' capacities, and within
   * HANDOFF_MAX_CHARS); `wake` wakes one of its idle lanes. That function returns what nobody took,
   * when this was the queue's last open round: the caller gives those claims back.
   */
  open(queue: string, capacity: number, wake: () => void): () => EmailForDelivery[] {
    const state = this.state(queue);
    const round = Symbol(queue);
    state.rounds.set(round, { capacity, wake });
    return () => {
      if (!state.rounds.delete(round) || state.rounds.size > 0) return [];
      const rest = state.buffer.drain();
      for (const waiting of rest) state.chars -= waiting.chars;
      return rest.map((waiting) => waiting.email);
    };
  }

  /** A place for one email of `queue` (its subject and body), if a round of it takes work here and has room. */
  reserve(queue: string, subject: string, body: string): Reservation | undefined {
    const state = this.queues.get(queue);
    if (!state || state.rounds.size === 0) return undefined;
    let capacity = 0;
    for (const round of state.rounds.values()) capacity += round.capacity;
    const chars = charsOf(subject, body);
    if (state.buffer.length + state.reserved >= capacity || state.chars + chars > this.maxChars) return undefined;
    state.reserved += 1;
    state.chars += chars;
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
        if (round.done) {
          state.chars -= chars;
          return false;
        }
        state.buffer.push({ email, chars });
        // One lane takes it; the rounds of a process wait on one listener, so one wake-up reaches the idle lane of either.
        round.value.wake();
        return true;
      },
      cancel: () => {
        settle();
        state.chars -= chars;
      },
    };
  }

  /** The next handed-off email of `queue`: the oldest of the next project in turn. */
  take(queue: string): EmailForDelivery | undefined {
    const state = this.queues.get(queue);
    const next = state?.buffer.shift();
    if (!next) return undefined;
    state!.chars -= next.chars;
    return next.email;
  }

  /** The ids waiting in the buffer: the rounds renew their leases with their own. */
  waiting(queue: string): string[] {
    return this.queues.get(queue)?.buffer.items().map((waiting) => waiting.email.email.id) ?? [];
  }

  /**
   * The projects whose emails are not handed off: a throttled project's emails are written QUEUED,
   * where the engine's claim keeps to the project's rate (db/messages/delivery-queue.ts).
   */
  setThrottled(projectIds: ReadonlySet<string>): void {
    this.throttled = projectIds;
  }

  throttles(projectId: string): boolean {
    return this.throttled.has(projectId);
  }

  private state(queue: string): QueueState {
    let state = this.queues.get(queue);
    if (!state) this.queues.set(queue, (state = { rounds: new Map(), buffer: new ProjectTurns<Waiting>((waiting) => waiting.email.projectId), reserved: 0, chars: 0 }));
    return state;
  }
}

/**
 * The emails of one write that go to the engine of this process if they can: each is reserved a
 * place before the write (and then written claimed), recorded as written in the transaction, and
 * handed over after the commit. The write of /v1/send's every path (SendBatches, queueSend) and
 * of a journey's SEND_EMAIL step (queueJourneyEmail, in the worker, whose engine takes them in any
 * deployment).
 */
export class Handover {
  private readonly reservations = new Map<string, Reservation>();
  private readonly written: EmailForDelivery[] = [];
  /** Some email of the write was written QUEUED: an engine has to be woken for it. */
  private queuedAny = false;

  constructor(
    private readonly handoff: DeliveryHandoff | undefined,
    private readonly queue: string,
  ) {}

  /** Before the write: a place for the email, if there is one, and then it is written claimed. */
  reserve(email: PreparedEmail): void {
    // The engine reads attachments with the row it claims; they are not in memory here.
    if (email.plan.attachmentSetId) return;
    // A throttled project's emails wait in the table, where the claim keeps to its rate.
    if (this.handoff?.throttles(email.plan.projectId)) return;
    const reservation = this.handoff?.reserve(this.queue, email.subject, email.body);
    if (!reservation) return;
    email.leaseSeconds = reservation.leaseSeconds;
    this.reservations.set(email.id, reservation);
  }

  /**
   * The write of `email` went into the transaction. `suppressed`: the recipient is on the
   * suppression list, as the write found it (WrittenEmail.suppressed).
   */
  wrote(email: PreparedEmail, suppressed: boolean): void {
    if (!this.reservations.has(email.id)) {
      this.queuedAny = true;
      return;
    }
    this.written.push(deliverable(email, suppressed));
  }

  /** The write did not commit. */
  cancel(): void {
    for (const reservation of this.reservations.values()) reservation.cancel();
    this.reservations.clear();
    this.written.splice(0);
  }

  /**
   * After the commit: every email written claimed goes to a round. `givenBack`: those no round of
   * the queue took any more, which the caller gives back (releaseClaims) before it wakes an engine;
   * `wake`: whether an engine must be woken (some email is QUEUED, or given back).
   */
  deliver(): { givenBack: string[]; wake: boolean } {
    const givenBack: string[] = [];
    for (const email of this.written.splice(0)) {
      if (!this.reservations.get(email.email.id)!.deliver(email)) givenBack.push(email.email.id);
      this.reservations.delete(email.email.id);
    }
    // Reserved and not written (the write left them out): nothing to hand over.
    for (const reservation of this.reservations.values()) reservation.cancel();
    this.reservations.clear();
    return { givenBack, wake: this.queuedAny || givenBack.length > 0 };
  }
}

/** The email as the engine's claim would have read it (toDeliverable). */
function deliverable(e: PreparedEmail, suppressed: boolean): EmailForDelivery {
  return {
    projectId: e.plan.projectId,
    status: 'SENDING',
    suppressed,
    // A disabled project's writes were refused before this one (api/middleware/auth.ts).
    projectDisabled: false,
    dkim: e.plan.dkim,
    email: {
      id: e.id,
      toEmail: e.toEmail,
      toName: e.toName,
      fromEmail: e.plan.from.email,
      fromName: e.plan.from.name,
      replyTo: e.plan.replyTo,
      subject: e.subject,
      body: e.body,
      headers: e.headers,
      attachments: [],
    },
  };
}

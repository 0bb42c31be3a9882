import type { Config } from '../../config';

/**
 * Everything that tunes the delivery engine, read once from the configuration. A user is told
 * about four settings (docs/configuration.md): DELIVERY_ENGINES, DELIVERY_CONCURRENCY,
 * SEND_THROTTLE_PER_SECOND and SEND_RETRY_FOR_SECONDS. The lease and the retry ceiling can be
 * set too, so tests run in seconds what takes minutes in production; the rest are fixed here
 * (the breaker's probe is the engine workflow's, temporal/delivery/workflow.ts).
 */
export interface DeliveryTuning {
  /** Engine workflows per task queue (DELIVERY_ENGINES). */
  engines: number;
  /** Emails one engine has in flight at the relay (DELIVERY_CONCURRENCY). */
  concurrency: number;
  /** Emails one claim takes: enough that the lanes never wait for the next claim. */
  claimBatch: number;
  /** How long a claim holds once its worker is gone, before another engine sends the email (DELIVERY_LEASE_SECONDS). */
  leaseSeconds: number;
  /** How long one round (one activity) takes new emails; the workflow then starts the next. */
  roundSeconds: number;
  /** How long an idle engine waits for a wake-up before it looks in the table anyway. */
  idleWaitMs: number;
  /** How often, at most, a round looks for expired leases (a dead worker's emails) when its queue runs short. */
  expiredCheckMs: number;
  /** An email that got a 4xx reaches its retry workflow within about this long: the round ends for it. */
  retryAfterMs: number;
  /** The least an idle lane waits for a throttled project's next slot, so a clock's rounding never spins it. */
  throttleMinWaitMs: number;
  /**
   * After a statement of SENT marks, how long the next waits for more (group commit): a larger
   * statement costs PostgreSQL less per mark, and only the emails' status waits for it.
   */
  markLingerMs: number;
  /** Longest wait between attempts of an email in its retry workflow, and between probes (SEND_RETRY_MAX_INTERVAL_SECONDS). */
  retryMaxIntervalSeconds: number;
}

export function deliveryTuning(config: Pick<Config, 'delivery' | 'sendRetryMaxIntervalSeconds'>): DeliveryTuning {
  const { engines, concurrency, leaseSeconds } = config.delivery;
  return {
    engines,
    concurrency,
    claimBatch: concurrency * 4,
    leaseSeconds,
    roundSeconds: 60,
    idleWaitMs: 1000,
    expiredCheckMs: 1000,
    retryAfterMs: 500,
    throttleMinWaitMs: 10,
    markLingerMs: 10,
    retryMaxIntervalSeconds: config.sendRetryMaxIntervalSeconds,
  };
}

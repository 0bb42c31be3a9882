import { setMaxListeners } from 'node:events';
import { Context } from '@temporalio/activity';
import type { Config } from '../../config';
import type { Orm } from '../../db/orm';
import type { Mailer } from '../../mail/transport';
import { retryLeaseSeconds } from '../delivery-options';
import type { OutboxListener } from '../wakeups';
import { DeliveryRound, type DeliveryRoundInput, type DeliveryRoundResult } from './round';
import { MarkStatements } from './sent-marks';
import { deliveryTuning } from './tuning';

export type { DeliveryRoundInput, DeliveryRoundResult, EmailToRetry } from './round';

export function createDeliveryEngineActivities({ orm, mailer, config, listener }: { orm: Orm; mailer: Mailer; config: Config; listener: OutboxListener }) {
  const tuning = deliveryTuning(config);
  // Every round in this process (one per engine it runs) writes its SENT marks in shared statements.
  const marks = new MarkStatements(orm.em.fork(), tuning.markLingerMs);

  return {
    /**
     * One round of the delivery engine of a task queue (temporal/delivery/round.ts): claims due
     * emails, sends them over the worker's pooled mailer, and records each outcome as the relay
     * answers — SENT right after its 250 (batched with whatever else was accepted meanwhile),
     * BOUNCED (hard, the address suppressed) when the relay refuses the recipient for good, FAILED
     * for any other 5xx, passed to a retry workflow on a 4xx. Heartbeats throughout, so a dead
     * worker's round is retried elsewhere within seconds; its claims run out after
     * `DELIVERY_LEASE_SECONDS` and are claimed again.
     *
     * The duplicate window is SMTP's own: an email the relay accepted whose SENT was not yet
     * written when the worker died is sent again by the engine that claims it next.
     */
    async deliverQueuedEmails(input: DeliveryRoundInput): Promise<DeliveryRoundResult> {
      const ctx = Context.current();
      // Every idle lane waits on the cancellation signal with its own listener.
      setMaxListeners(tuning.concurrency + 10, ctx.cancellationSignal);
      const beat = setInterval(() => ctx.heartbeat(), 1000);
      try {
        const deps = { em: orm.em.fork(), marks, mailer, listener, tuning, retryLeaseSeconds: retryLeaseSeconds(config) };
        return await new DeliveryRound(deps, input, ctx.cancellationSignal).run();
      } finally {
        clearInterval(beat);
      }
    },
  };
}

export type DeliveryEngineActivities = ReturnType<typeof createDeliveryEngineActivities>;

import { ApplicationFailure } from '@temporalio/activity';
import type { Config } from '../../config';
import { OVER_LIMIT_ERROR } from '../../db/billing/allowance';
import { getContact, updateContact } from '../../db/contacts/contacts';
import type { JsonValue } from '../../db/entities/contact';
import { finishExecution, recordStepFinished, recordStepStarted, recordStepTransition, type StepSuccessor, stepTransition } from '../../db/journeys/executions';
import type { Orm } from '../../db/orm';
import { planEmails, prepareEmail, writeEmails } from '../../db/messages/prepare';
import { linkSigningSecret } from '../../db/projects/secrets';
import { transaction } from '../../db/sql';
import { getTemplate } from '../../db/templates/templates';
import type { StepConfigs } from '../../db/journeys/steps';
import { permanent } from '../failures';
import { sendEmailOutput } from './steps/types';
import type { EngineWakeups } from '../wakeups';

export function createJourneyActivities({ orm, config, wakeups }: { orm: Orm; config: Config; wakeups: EngineWakeups }) {
  let linkSecret: Promise<string> | undefined;
  const secret = () => (linkSecret ??= linkSigningSecret(orm.em.fork(), config.jwtSecret));

  return {
    recordStepStarted: (input: Parameters<typeof recordStepStarted>[1]) => recordStepStarted(orm.em.fork(), input),
    recordStepFinished: (input: Parameters<typeof recordStepFinished>[1]) => recordStepFinished(orm.em.fork(), input),
    finishExecution: (input: Parameters<typeof finishExecution>[1]) => finishExecution(orm.em.fork(), input),
    recordStepTransition: (input: Parameters<typeof recordStepTransition>[1]) => recordStepTransition(orm.em.fork(), input),

    /**
     * Renders the template for the contact and writes the email row once per (execution, step),
     * for the delivery engine of the worker's task queue to send (the journey does not wait for it).
     * Over the project's monthly workflow cap the row is written FAILED (OVER_LIMIT_ERROR) and the
     * step completes as skipped: nothing is delivered, and nothing retries. With `successor`, the
     * step's end and what follows are recorded too, in the email's transaction; a retry after the
     * commit finds the row and the transition already there and changes nothing.
     */
    async queueJourneyEmail(input: {
      executionId: string;
      seq: number;
      projectId: string;
      contactId: string;
      templateId: string;
      recipient: StepConfigs['SEND_EMAIL']['recipient'];
      context: Record<string, JsonValue>;
      successor?: StepSuccessor;
    }): Promise<{ emailId?: string; skipped?: string }> {
      const em = orm.em.fork();
      const transitionAfter = (queued: { emailId?: string; skipped?: string }) =>
        input.successor && {
          finished: {
            executionId: input.executionId,
            seq: input.seq,
            status: 'COMPLETED' as const,
            branch: null,
            output: sendEmailOutput(queued),
            context: input.context,
          },
          next: input.successor,
        };
      const skip = async (skipped: string) => {
        const transition = transitionAfter({ skipped });
        if (transition) await recordStepTransition(em, transition);
        return { skipped };
      };
      const template = await permanent(getTemplate(em, input.projectId, input.templateId));
      const contact = await getContact(em, input.projectId, input.contactId).catch(() => undefined);
      if (!contact) return skip('contact_deleted');
      const marketing = template.type === 'MARKETING';
      if (marketing && !contact.subscribed && input.recipient.type === 'CONTACT') return skip('unsubscribed');
      if (!template.from) throw ApplicationFailure.nonRetryable(`Template ${template.id} has no sender`, 'TemplateHasNoSender');
      const plan = await permanent(
        planEmails(
          em,
          {
            projectId: input.projectId,
            source: 'workflow',
            templateId: template.id,
            from: { email: template.from, name: template.fromName },
            replyTo: template.replyTo,
            subject: template.subject,
            body: template.body,
            marketing,
            queue: config.temporal.taskQueue,
          },
          { senders: config, links: { publicUrl: config.publicUrl, linkSecret: await secret() } },
        ),
      );
      // A retry renders with a new id but gets the row (and the body rendered with its id) that
      // the first attempt wrote.
      const email = prepareEmail(plan, contact, {
        extra: input.context,
        toEmail: input.recipient.type === 'CUSTOM' ? input.recipient.customEmail : contact.email,
        sourceKey: `journey:${input.executionId}:${input.seq}`,
      });
      // Over the cap the row is written FAILED; an earlier attempt's row keeps its answer.
      const queued = await transaction(em, async (tx) => {
        const [written] = await writeEmails(tx, [email], 'fail');
        const queued = written!.overLimit ? { skipped: OVER_LIMIT_ERROR } : { emailId: written!.id };
        const transition = transitionAfter(queued);
        if (transition) await stepTransition(tx, transition);
        return queued;
      });
      if (queued.emailId) wakeups.emails(config.temporal.taskQueue);
      return queued;
    },

    async updateJourneyContact(input: {
      projectId: string;
      contactId: string;
      updates?: Record<string, unknown>;
      subscribed?: boolean;
    }): Promise<void> {
      // Its subscription event starts no journey: the loop rule (db/record-events.ts).
      await permanent(
        updateContact(orm.em.fork(), input.projectId, input.contactId, { data: input.updates, subscribed: input.subscribed }, { byJourney: true }),
      );
    },
  };
}

export type JourneyActivities = ReturnType<typeof createJourneyActivities>;

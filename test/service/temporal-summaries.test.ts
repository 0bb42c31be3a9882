import { defaultPayloadConverter } from '@temporalio/common';
import type { ProjectWithKeys } from '../../db/projects/projects';
import { workflowIds } from '../../temporal/ids';
import { bearer, type TestEnv } from '../helpers/env';
import { buildJourney, track, waitForExecution } from '../helpers/journeys';
import { type SendingEnv, startSendingEnv } from '../helpers/sending';

/**
 * What an operator sees in the Temporal UI: each execution the API starts carries a one-line
 * summary, and a journey's activities and timers name the step they run for.
 */
const DOMAIN = 'summaries.test';

let sending: SendingEnv;
let env: TestEnv;
let project: ProjectWithKeys;

beforeAll(async () => {
  sending = await startSendingEnv({ JOURNEY_TIME_SCALE: String(1 / 1000) });
  ({ env } = sending);
  project = await env.project('summaries');
});
afterAll(() => sending.close());

const handle = (workflowId: string) => env.temporal.client.workflow.getHandle(workflowId);
const decode = (payload: Parameters<typeof defaultPayloadConverter.fromPayload>[0] | null | undefined) =>
  payload ? defaultPayloadConverter.fromPayload<string>(payload) : undefined;

test('a journey execution is summarized by workflow name and contact; its activities and timers by step', async () => {
  const domain = await sending.verifiedDomain(project, DOMAIN);
  const template = await env
    .http()
    .post('/templates')
    .set(bearer(project.secretKey))
    .send({ name: 'hello', subject: 'Hello', body: '<p>Hi</p>', from: `hello@${DOMAIN}`, type: 'TRANSACTIONAL' });
  expect(template.status).toBe(201);
  const templateId = template.body.id as string;
  const wf = await buildJourney(env, project, {
    eventName: 'summarized',
    steps: [
      { key: 'mail', type: 'SEND_EMAIL', config: { templateId } },
      { key: 'pause', type: 'DELAY', config: { amount: 2, unit: 'minutes' } },
      { key: 'update', type: 'UPDATE_CONTACT', config: { updates: { plan: 'gold' } } },
    ],
    transitions: [
      ['trigger', 'mail'],
      ['mail', 'pause'],
      ['pause', 'update'],
    ],
  });
  const tracked = await track(env, project, 'ada@summaries.test', 'summarized', { plan: 'pro' });
  const run = await waitForExecution(env, project, wf.id, tracked.contact, ['COMPLETED']);
  const journey = handle(workflowIds.journey(run.id));

  const description = await journey.describe();
  expect(await description.staticSummary()).toBe(`journey wf summarized · contact ada@summaries.test`);

  const { events } = await journey.fetchHistory();
  // The trigger dispatcher starts journeys on its own worker's queue eagerly: the first workflow
  // task came back with the start instead of through a poll.
  expect(events![0]!.workflowExecutionStartedEventAttributes?.eagerExecutionAccepted).toBe(true);
  // The email goes to the delivery engine: the journey schedules no activity of its own for it.
  expect(events!.filter((e) => e.activityTaskScheduledEventAttributes)).toEqual([]);
  // Local activities (queueing the email, updating the contact) are markers in the history.
  const markers = events!.filter((e) => e.markerRecordedEventAttributes).map((e) => decode(e.userMetadata?.summary));
  expect(markers).toEqual(
    expect.arrayContaining([
      `SEND_EMAIL step ${wf.stepIds.mail}: template ${templateId}`,
      `UPDATE_CONTACT step ${wf.stepIds.update}: plan`,
    ]),
  );
  const timers = events!.filter((e) => e.timerStartedEventAttributes);
  expect(timers.map((e) => decode(e.userMetadata?.summary))).toEqual([`DELAY step ${wf.stepIds.pause}: 2 minutes`]);
  // The first step showed from the start (its search attributes came with it) and the walk in its
  // input applied the journey patches without patched() (whose markers upsert TemporalChangeVersion):
  // the workflow upserts at the next two steps and at its end only, each a visibility write in Temporal.
  const shown = events![0]!.workflowExecutionStartedEventAttributes?.searchAttributes?.indexedFields ?? {};
  expect(decode(shown.CurrentStep)).toBe('SEND_EMAIL');
  expect(events!.filter((e) => e.upsertWorkflowSearchAttributesEventAttributes)).toHaveLength(3);

  // The other executions the API starts get a line of their own; the domain's was started by POST /domains.
  const verification = await handle(workflowIds.domainVerification(domain.id)).describe();
  expect(await verification.staticSummary()).toBe(`domain verification ${domain.id}`);
});

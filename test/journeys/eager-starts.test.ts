import { Client } from '@temporalio/client';
import type { ProjectWithKeys } from '../../db/projects/projects';
import { TemporalGateway } from '../../temporal/client';
import { startExecution } from '../../temporal/triggers/dispatch';
import { bearer, startTestEnv, type TestEnv } from '../helpers/env';
import { buildJourney } from '../helpers/journeys';

/**
 * What a journey's start tells the trigger dispatcher's pacing (temporal/triggers/start-pacing.ts):
 * a start through the worker's own connection hands the first workflow task to the idle worker
 * (eager), one through another connection leaves it in Temporal's queue.
 */

let env: TestEnv;
let project: ProjectWithKeys;
let onWorker: TemporalGateway;

beforeAll(async () => {
  env = await startTestEnv();
  project = await env.project('eager starts');
  const handle = await env.startWorker();
  // The dispatcher's own handle: an activity's client shares the worker's connection (temporal/triggers/activities.ts).
  const client = new Client({ connection: handle.worker.connection!, namespace: env.deps.config.temporal.namespace });
  onWorker = new TemporalGateway(client, env.taskQueue, env.deps.config, true);
}, 60_000);

afterAll(() => env?.close());

test("a start on the worker's connection is taken by the worker at once; one from elsewhere waits in the queue", async () => {
  const wf = await buildJourney(env, project, {
    eventName: 'eager-a',
    steps: [{ key: 'wait', type: 'WAIT_FOR_EVENT', config: { eventName: 'never' } }],
    transitions: [['trigger', 'wait']],
    enable: false,
  });
  const start = async (temporal: TemporalGateway, email: string) => {
    const res = await env.http().post('/contacts').set(bearer(project.secretKey)).send({ email });
    expect([200, 201]).toContain(res.status);
    const input = { projectId: project.id, journeyId: wf.id, contactId: res.body.id as string, allowReentry: false, context: {} };
    return startExecution({ em: env.orm.em.fork(), temporal, config: env.deps.config }, input);
  };

  expect(await start(onWorker, 'eager-a@example.org')).toEqual({ id: expect.stringMatching(/^exe_/), eager: true });
  expect(await start(env.temporal, 'eager-b@example.org')).toEqual({ id: expect.stringMatching(/^exe_/), eager: false });
});

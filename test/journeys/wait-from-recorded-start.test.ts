import { randomUUID } from 'node:crypto';
import { NativeConnection, Worker } from '@temporalio/worker';
import { Client } from '@temporalio/client';
import type { ProjectWithKeys } from '../../db/projects/projects';
import { mailerFromConfig } from '../../mail/mailer';
import { createActivities } from '../../temporal/activities';
import { ensureEngines } from '../../temporal/engines';
import { EngineWakeups, OutboxListener } from '../../temporal/wakeups';
import { startTestEnv, type TestEnv } from '../helpers/env';
import { buildJourney, track, waitForExecution } from '../helpers/journeys';
import { waitUntil } from '../helpers/wait';

/**
 * A WAIT_FOR_EVENT step waits from the moment its start is recorded in Postgres: from then on the
 * execution shows WAITING for the event, and the dispatcher signals the event to it. Here the
 * event is tracked, and its signal is in the execution's history, while the local activity that
 * records the step's start has not returned yet, the widest that gap gets: the wait still takes it.
 * (When the wait counted from its handler's own start, the execution waited past such an event,
 * as two of 20 executions did under load with API and worker apart.)
 */

jest.setTimeout(120_000);

let env: TestEnv;
let project: ProjectWithKeys;
let worker: Worker;
let running: Promise<void>;
let listener: OutboxListener;
let mailer: ReturnType<typeof mailerFromConfig>;
/** What the wrapped recordStepTransition does once the real one has committed. */
let afterRecorded: (executionId: string, nextStepId: string | undefined) => Promise<void> = async () => undefined;

beforeAll(async () => {
  // A DELAY minute lasts 60 ms.
  env = await startTestEnv({ JOURNEY_TIME_SCALE: '0.001' });
  project = await env.project('wait from recorded start');
  const config = env.deps.config;
  listener = new OutboxListener(env.orm.config.get('clientUrl')!);
  const wakeups = new EngineWakeups(env.orm, () => undefined);
  mailer = mailerFromConfig(config);
  const activities = createActivities({ orm: env.orm, dns: env.deps.dns, mailer, config, listener, wakeups });
  const connection = await NativeConnection.connect({ address: config.temporal.address! });
  worker = await Worker.create({
    connection,
    namespace: config.temporal.namespace,
    taskQueue: env.taskQueue,
    workflowBundle: { codePath: process.env.TEST_WORKFLOW_BUNDLE! },
    activities: {
      ...activities,
      async recordStepTransition(input: Parameters<typeof activities.recordStepTransition>[0]) {
        await activities.recordStepTransition(input);
        await afterRecorded(input.finished.executionId, 'start' in input.next ? input.next.start.stepId : undefined);
      },
    },
  });
  running = worker.run();
  await ensureEngines(new Client({ connection, namespace: config.temporal.namespace }), env.taskQueue, config);
});

afterAll(async () => {
  worker?.shutdown();
  await running;
  await listener?.close();
  mailer?.close();
  await env?.close();
});

test('an event tracked as soon as the execution shows WAITING for it ends the wait, even before the step’s handler runs', async () => {
  const event = `go-${randomUUID().slice(0, 8)}`;
  const wf = await buildJourney(env, project, {
    eventName: 'wfrs-start',
    steps: [
      { key: 'pause', type: 'DELAY', config: { amount: 1, unit: 'minutes' } },
      // 1,000 s, 1 s at this time scale: a wait that misses the event ends on its timeout.
      { key: 'wait', type: 'WAIT_FOR_EVENT', config: { eventName: event, timeout: 1000 } },
      { key: 'got', type: 'EXIT', config: { reason: 'got the event' } },
      { key: 'late', type: 'EXIT', config: { reason: 'timed out' } },
    ],
    transitions: [
      ['trigger', 'pause'],
      ['pause', 'wait'],
      ['wait', 'got', 'event'],
      ['wait', 'late', 'timeout'],
    ],
  });
  const email = `wfrs-${randomUUID().slice(0, 8)}@example.org`;
  afterRecorded = async (executionId, nextStepId) => {
    if (nextStepId !== wf.stepIds.wait) return;
    afterRecorded = async () => undefined;
    // The row says WAITING for the event now: track it, and hold the local activity until its signal is in the history.
    await track(env, project, email, event);
    const handle = env.temporal.client.workflow.getHandle(`journey:${executionId}`);
    await waitUntil(async () => (await handle.fetchHistory()).events?.some((e) => e.workflowExecutionSignaledEventAttributes), {
      timeoutMs: 20_000,
      what: `the ${event} signal in the execution's history`,
    });
  };
  const t = await track(env, project, email, 'wfrs-start');
  const done = await waitForExecution(env, project, wf.id, t.contact, ['EXITED', 'COMPLETED', 'FAILED']);
  expect(done.exitReason).toBe('got the event');
});

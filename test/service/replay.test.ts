import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { Worker } from '@temporalio/worker';

/**
 * Every recorded history in test/fixtures replays under the current workflow code. An execution in
 * flight when workers are upgraded (a journey waiting for days, a scheduled campaign, a send
 * retrying while the relay is down) goes on from where it was instead of failing with a
 * non-determinism error. A change to the commands a workflow issues therefore goes behind
 * `patched()` (temporal/patches.ts) and keeps these passing.
 *
 * Each fixture is the history of one run: one per workflow type; a journey through every step type
 * from before the delivery engine (it delivered its emails itself), `journey-engine-send` from
 * after, `journey-step-transitions` from after a step's end and the next one's start became one
 * local activity, `journey-first-step-claimed` from after the dispatcher recorded the first
 * step's start with its claim, and `journey-send-records-transition` from after SEND_EMAIL queued
 * its email and recorded its transition in one local activity, and `journey-walk-2` from after a
 * journey took its patches from its input (JOURNEY_WALK) and its first step's search attributes
 * from its start; `send-emails-remote-record` from before SENT was recorded by a local activity; the
 * delivery engine with a retry workflow started, the delivery engine's breaker (a relay that could
 * not be reached: a trip, failed probes, a successful probe, full rounds again), and the trigger
 * dispatcher, a few rounds each; prepareFieldSlots with a second segment's signal arriving during
 * its first round (so it ran two).
 */

const dir = path.join(__dirname, '..', 'fixtures');
const fixtures = readdirSync(dir).filter((f) => f.endsWith('.history.json'));

test('there is a history for every workflow the worker runs', () => {
  const types = new Set(
    fixtures.map((f) => {
      const history = JSON.parse(readFileSync(path.join(dir, f), 'utf8')) as {
        events: { workflowExecutionStartedEventAttributes?: { workflowType: { name: string } } }[];
      };
      return history.events[0]!.workflowExecutionStartedEventAttributes!.workflowType.name;
    }),
  );
  // The bundle entry exports exactly the workflow functions.
  const exported = [...readFileSync(path.join(__dirname, '..', '..', 'temporal', 'workflows.ts'), 'utf8').matchAll(/export \{ (\w+)(?:, (\w+))?/g)]
    .flatMap((m) => [m[1], m[2]])
    .filter((name): name is string => !!name && !/^[A-Z]|Input$/.test(name) && name !== 'type');
  expect([...types].sort()).toEqual([...exported].sort());
});

/** Workflow ids of the recorded runs, where the code derives something from its own id (a child's id). */
const RECORDED_IDS: Record<string, string> = {
  'segment-compute.history.json': 'segment-compute:seg_01a2164749ed0e7cbb87ba681adc089d',
};

test.each(fixtures)('%s replays under the current code', async (file) => {
  await Worker.runReplayHistory(
    { workflowBundle: { codePath: process.env.TEST_WORKFLOW_BUNDLE! } },
    JSON.parse(readFileSync(path.join(dir, file), 'utf8')),
    RECORDED_IDS[file],
  );
});

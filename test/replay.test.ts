import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Worker } from '@temporalio/worker';

/**
 * Histories recorded by earlier versions of the workflow code must replay under the current code:
 * an execution in flight during an upgrade (a send retrying while the relay is down) goes on from
 * where it was instead of failing with a non-determinism error. Each fixture is the `temporal
 * workflow show --output json` of a run made with the code it names.
 */

const fixture = (name: string): unknown => JSON.parse(readFileSync(path.join(__dirname, 'fixtures', name), 'utf8'));

test('sendEmails as it was before SENT was recorded by a local activity', async () => {
  await Worker.runReplayHistory(
    { workflowBundle: { codePath: process.env.TEST_WORKFLOW_BUNDLE! } },
    fixture('send-emails-remote-record.history.json'),
  );
});

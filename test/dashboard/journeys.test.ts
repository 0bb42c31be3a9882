import type { Locator, Page } from 'playwright-core';
import type { ProjectWithKeys } from '../../db/projects/projects';
import { addTestMember, createTestUser, type TestUser } from '../helpers/accounts';
import { type Dashboard, LAPTOP, overflowing, PHONE, screenshot, seriousViolations, startDashboard } from '../helpers/dashboard';
import { bearer } from '../helpers/env';
import { buildJourney } from '../helpers/journeys';
import { waitUntil } from '../helpers/wait';

/**
 * The journeys list and the visual editor in Chromium: a journey built by dragging steps from the
 * palette and connecting handles with the mouse, configured in the side panel, refused then
 * enabled, started by a tracked event, and its execution's path drawn on the graph.
 * One journey minute lasts 60 ms here (JOURNEY_TIME_SCALE), so a one-minute delay passes at once.
 */

let dash: Dashboard;

beforeAll(async () => {
  dash = await startDashboard({ JOURNEY_TIME_SCALE: '0.001', TEMPORAL_UI_URL: 'http://127.0.0.1:8233' });
});

afterAll(async () => {
  await dash?.close();
});

async function owner(name: string): Promise<{ user: TestUser; project: ProjectWithKeys }> {
  const user = await createTestUser(dash.env);
  const project = await dash.env.project(name);
  await addTestMember(dash.env, project.id, user.id, 'OWNER');
  return { user, project };
}

const node = (page: Page, text: string | RegExp) => page.locator('.react-flow__node', { hasText: text });
const nodeId = async (page: Page, text: string | RegExp) => (await node(page, text).getAttribute('data-id'))!;


/** What a screen reader hears for each connection on the graph. */
const edgeLabels = (page: Page) => page.locator('.react-flow__edge').evaluateAll((els) => els.map((e) => e.getAttribute('aria-label') ?? ''));

async function center(locator: Locator): Promise<{ x: number; y: number }> {
  const box = (await locator.boundingBox())!;
  return { x: box.x + box.width / 2, y: box.y + box.height / 2 };
}

/** Drags from a step's source handle to another step's input with the mouse, as a user connects them. */
async function connect(page: Page, from: string, handle: string, to: string): Promise<void> {
  const edges = await page.locator('.react-flow__edge').count();
  // The mouse acts within the window: bring the whole canvas into view first.
  await page.locator('.journey-canvas').scrollIntoViewIfNeeded();
  const start = await center(page.locator(`.react-flow__node[data-id="${from}"] .react-flow__handle[data-handleid="${handle}"]`));
  const end = await center(page.locator(`.react-flow__node[data-id="${to}"] .react-flow__handle[data-handleid="in"]`));
  await page.mouse.move(start.x, start.y);
  await page.mouse.down();
  await page.mouse.move((start.x + end.x) / 2, (start.y + end.y) / 2, { steps: 5 });
  await page.mouse.move(end.x, end.y, { steps: 5 });
  await page.mouse.up();
  await waitUntil(async () => (await page.locator('.react-flow__edge').count()) === edges + 1, { what: `the connection ${from} ${handle} → ${to}` });
}

/** Drags a palette item onto the canvas, `dy` pixels below and `dx` right of the trigger's centre. */
async function drop(page: Page, label: string, dx: number, dy: number): Promise<string> {
  const pane = page.locator('.react-flow__pane');
  const paneBox = (await pane.boundingBox())!;
  const trigger = await center(node(page, 'Trigger'));
  const before = await page.locator('.react-flow__node').count();
  await page.getByRole('button', { name: new RegExp(`^${label}`) }).dragTo(pane, {
    targetPosition: { x: trigger.x - paneBox.x + dx, y: trigger.y - paneBox.y + dy },
  });
  await waitUntil(async () => (await page.locator('.react-flow__node').count()) === before + 1, { what: `the ${label} step on the graph` });
  // The new step is selected, so the side panel shows its form.
  await page.getByRole('heading', { name: new RegExp(`^${label} step`) }).waitFor();
  return (await page.locator('.react-flow__node.selected').getAttribute('data-id'))!;
}

test('builds a journey by dragging and connecting steps, enables it, and draws the path a tracked event took', async () => {
  const { user, project } = await owner('Journey builders');
  const page = await dash.signedIn(user, LAPTOP);

  await page.goto(`/app/p/${project.id}/journeys`);
  await page.getByRole('heading', { name: 'Journeys', level: 1 }).waitFor();
  await page.getByText('No journeys yet').waitFor();
  expect(await seriousViolations(page)).toEqual([]);

  await page.getByRole('button', { name: 'New journey' }).click();
  await page.getByLabel('Name').fill('Welcome series');
  await page.getByLabel('Trigger event').fill('signed-up');
  await page.getByRole('button', { name: 'Create and open the editor' }).click();
  await page.getByRole('heading', { name: 'Welcome series', level: 1 }).waitFor();
  const journeyId = page.url().split('/').pop()!;
  await node(page, 'Trigger').waitFor();
  await node(page, 'When "signed-up" is recorded').waitFor();

  const delay = await drop(page, 'Delay', 0, 120);
  // The side panel configures the selected step.
  await page.getByLabel('Wait', { exact: true }).fill('1');
  await page.getByLabel('Unit').selectOption('minutes');
  await page.getByRole('button', { name: 'Save step' }).click();
  await page.getByRole('status').filter({ hasText: 'Saved.' }).waitFor();
  await node(page, 'Wait 1 minute').waitFor();

  const condition = await drop(page, 'Condition', 0, 240);
  await page.getByLabel('Field').selectOption({ label: 'Email' });
  await page.getByLabel('Operator').selectOption({ label: 'contains' });
  await page.getByLabel('Value').fill('@example.com');
  await page.getByRole('button', { name: 'Save step' }).click();
  await page.getByRole('status').filter({ hasText: 'Saved.' }).waitFor();
  await node(page, 'If contact.email contains @example.com').waitFor();

  const update = await drop(page, 'Update contact', -130, 380);
  await page.getByLabel('Data to set').fill('{"stage": "welcomed"}');
  await page.getByRole('button', { name: 'Save step' }).click();
  await page.getByRole('status').filter({ hasText: 'Saved.' }).waitFor();
  await node(page, 'Set stage').waitFor();

  const exit = await drop(page, 'Exit', 130, 380);

  const trigger = await nodeId(page, 'Trigger');
  await connect(page, trigger, 'next', delay);
  await connect(page, delay, 'next', condition);
  await connect(page, condition, 'yes', update);
  expect((await edgeLabels(page)).sort()).toEqual([
    'Connection from Condition to Update contact (yes)',
    'Connection from Delay to Condition',
    'Connection from Trigger to Delay',
  ]);

  // Enabling checks the graph: the condition's missing "no" branch is drawn on it and said in words.
  await page.getByRole('button', { name: 'Enable' }).click();
  await page.getByRole('alert').filter({ hasText: 'cannot be enabled' }).waitFor();
  await page.locator(`.react-flow__node[data-id="${condition}"] .step-node.has-problem`).waitFor();
  expect(await page.locator(`.react-flow__node[data-id="${condition}"]`).getAttribute('aria-label')).toContain('missing: "no"');
  await page.locator(`.react-flow__node[data-id="${exit}"] .step-node.has-problem`, { hasText: 'is not reachable from the trigger' }).waitFor();
  await page.locator(`.react-flow__node[data-id="${condition}"]`).click();
  await page.getByRole('heading', { name: /^Condition step/ }).waitFor();
  expect(await seriousViolations(page)).toEqual([]);
  await screenshot(page, 'journeys-editor-problems');

  await connect(page, condition, 'no', exit);
  await page.getByRole('button', { name: 'Enable' }).click();
  await page.getByRole('button', { name: 'Disable' }).waitFor();
  await page.locator('.page-header .badge', { hasText: 'Enabled' }).waitFor();
  expect(await page.locator('.step-node.has-problem').count()).toBe(0);

  const saved = await dash.env.http().get(`/workflows/${journeyId}`).set(bearer(project.secretKey));
  expect(saved.body.enabled).toBe(true);
  const byId = new Map((saved.body.steps as Array<{ id: string; type: string; config: unknown }>).map((s) => [s.id, s]));
  expect(byId.get(delay)).toMatchObject({ type: 'DELAY', config: { amount: 1, unit: 'minutes' } });
  expect(byId.get(condition)).toMatchObject({ type: 'CONDITION', config: { field: 'contact.email', operator: 'contains', value: '@example.com' } });
  expect(byId.get(update)).toMatchObject({ type: 'UPDATE_CONTACT', config: { updates: { stage: 'welcomed' } } });
  expect(byId.get(exit)).toMatchObject({ type: 'EXIT' });
  expect(
    (saved.body.transitions as Array<{ fromStepId: string; toStepId: string; branch: string | null }>)
      .map((t) => [t.fromStepId, t.toStepId, t.branch])
      .sort(),
  ).toEqual(
    [
      [trigger, delay, null],
      [delay, condition, null],
      [condition, update, 'yes'],
      [condition, exit, 'no'],
    ].sort(),
  );

  // A tracked event starts it; the execution's path is drawn once it is chosen.
  const tracked = await dash.env.http().post('/v1/track').set(bearer(project.secretKey)).send({ email: 'ada@example.com', event: 'signed-up' });
  expect(tracked.status).toBe(200);
  await page.getByRole('tab', { name: 'Executions' }).click();
  const item = page.getByRole('list', { name: 'Executions' }).getByRole('button').first();
  await waitUntil(async () => {
    if (await item.isVisible()) return true;
    await page.getByRole('button', { name: 'Refresh' }).click();
    return false;
  }, { intervalMs: 500, what: 'the execution in the list' });
  await item.click();
  const detail = page.getByRole('region', { name: 'Selected execution' });
  await detail.getByText('completed', { exact: true }).first().waitFor();
  await detail.getByRole('link', { name: 'ada@example.com' }).waitFor();
  expect(await detail.getByRole('link', { name: 'Open in Temporal Web UI' }).getAttribute('href')).toMatch(/^http:\/\/127\.0\.0\.1:8233\//);

  for (const id of [trigger, delay, condition, update]) await page.locator(`.react-flow__node[data-id="${id}"] .step-node.run-visited`).waitFor();
  await page.locator(`.react-flow__node[data-id="${exit}"] .step-node.run-unvisited`).waitFor();
  expect(await page.locator('.react-flow__edge.is-taken').count()).toBe(3);
  expect(await page.locator('.react-flow__edge.is-taken').evaluateAll((els) => els.map((e) => e.getAttribute('aria-label')))).toEqual(
    expect.arrayContaining([expect.stringContaining('(yes), taken')]),
  );
  expect(await seriousViolations(page)).toEqual([]);

  const contact = await dash.env.http().get(`/contacts/${tracked.body.data.contact}`).set(bearer(project.secretKey));
  expect(contact.body.data).toMatchObject({ stage: 'welcomed' });

  // Dragged positions stay in this browser: after a reload the steps are where they were put.
  const before = await page.locator(`.react-flow__node[data-id="${exit}"]`).getAttribute('style');
  await page.reload();
  await node(page, 'Trigger').waitFor();
  expect(await page.locator(`.react-flow__node[data-id="${exit}"]`).getAttribute('style')).toContain(before!.match(/translate\([^)]*\)/)![0]);

  // The list shows it enabled, with its execution.
  await page.getByRole('link', { name: 'All journeys' }).click();
  const row = page.getByRole('row', { name: /Welcome series/ });
  await row.getByText('Enabled').waitFor();
  await row.getByRole('cell', { name: '1', exact: true }).waitFor();
});

test('deletes steps (spliced when they have one successor) and connections from the keyboard', async () => {
  const { user, project } = await owner('Journey editors');
  const built = await buildJourney(dash.env, project, {
    eventName: 'trial-started',
    steps: [
      { key: 'delay', type: 'DELAY', config: { amount: 2, unit: 'days' } },
      { key: 'hook', type: 'WEBHOOK', config: { url: 'https://example.com/hook' } },
      { key: 'exit', type: 'EXIT', config: { reason: 'done' } },
    ],
    transitions: [
      ['trigger', 'delay'],
      ['delay', 'hook'],
      ['hook', 'exit'],
    ],
    enable: false,
  });
  const page = await dash.signedIn(user, LAPTOP);
  await page.goto(`/app/p/${project.id}/journeys/${built.id}`);
  await node(page, 'POST https://example.com/hook').waitFor();
  expect(await page.locator('.react-flow__edge').count()).toBe(3);

  // Focus the delay with the keyboard, select it, delete it: its predecessor now leads to its successor.
  await page.locator(`.react-flow__node[data-id="${built.stepIds.delay}"]`).focus();
  await page.keyboard.press('Enter');
  await page.getByRole('heading', { name: /^Delay step/ }).waitFor();
  await page.keyboard.press('Delete');
  await waitUntil(async () => (await page.locator('.react-flow__node').count()) === 3, { what: 'the delay gone' });
  await waitUntil(async () => (await page.locator('.react-flow__edge').count()) === 2, { what: 'the trigger reconnected' });
  const journey = await dash.env.http().get(`/workflows/${built.id}`).set(bearer(project.secretKey));
  expect(journey.body.transitions.map((t: { fromStepId: string; toStepId: string }) => [t.fromStepId, t.toStepId]).sort()).toEqual(
    [
      [built.stepIds.trigger, built.stepIds.hook],
      [built.stepIds.hook, built.stepIds.exit],
    ].sort(),
  );

  // A connection is removed from the selected step's panel.
  await page.locator(`.react-flow__node[data-id="${built.stepIds.hook}"]`).click();
  await page.getByRole('button', { name: /Remove the connection to Exit/ }).click();
  await waitUntil(async () => (await page.locator('.react-flow__edge').count()) === 1, { what: 'the connection removed' });
  // …and added back with the keyboard-usable form.
  const exitOption = await page.getByLabel('Connect to', { exact: true }).locator('option', { hasText: 'Exit' }).getAttribute('value');
  await page.getByLabel('Connect to', { exact: true }).selectOption(exitOption!);
  await page.getByRole('button', { name: 'Connect', exact: true }).click();
  await waitUntil(async () => (await page.locator('.react-flow__edge').count()) === 2, { what: 'the connection back' });

  // The "Add step" palette works without a mouse: the new step goes below the selected one.
  await page.getByRole('button', { name: /^Wait for event/ }).focus();
  await page.keyboard.press('Enter');
  await page.getByRole('heading', { name: /^Wait for event step/ }).waitFor();
  await node(page, 'Until "email.opened", at most 3 days').waitFor();
});

test.each([LAPTOP, PHONE])('the list, the editor with a step selected and an execution path, usable at %i px', async (width) => {
  const { user, project } = await owner(`Journeys at ${width}`);
  const template = await dash.env
    .http()
    .post('/templates')
    .set(bearer(project.secretKey))
    .send({ name: 'Welcome', subject: 'Hello', body: '<p>Hello {{email}}</p>' });
  expect(template.status).toBe(201);
  const built = await buildJourney(dash.env, project, {
    eventName: 'signed-up',
    steps: [
      { key: 'wait', type: 'WAIT_FOR_EVENT', config: { eventName: 'profile-completed', timeout: 86400 } },
      { key: 'cond', type: 'CONDITION', config: { field: 'contact.subscribed', operator: 'equals', value: true } },
      { key: 'send', type: 'SEND_EMAIL', config: { templateId: template.body.id } },
      { key: 'update', type: 'UPDATE_CONTACT', config: { subscribed: false } },
      { key: 'hook', type: 'WEBHOOK', config: { url: 'https://example.com/hook', method: 'PUT' } },
      { key: 'exit', type: 'EXIT', config: {} },
    ],
    transitions: [
      ['trigger', 'wait'],
      ['wait', 'cond', 'event'],
      ['wait', 'exit', 'timeout'],
      ['cond', 'update', 'yes'],
      ['cond', 'send', 'no'],
      ['update', 'hook'],
    ],
  });
  const tracked = await dash.env.http().post('/v1/track').set(bearer(project.secretKey)).send({ email: 'grace@example.com', event: 'signed-up' });
  expect(tracked.status).toBe(200);

  const page = await dash.signedIn(user, width);
  await page.goto(`/app/p/${project.id}/journeys`);
  await page.getByRole('row', { name: /wf signed-up/ }).waitFor();
  expect(await seriousViolations(page)).toEqual([]);
  expect(await overflowing(page)).toEqual([]);
  await screenshot(page, 'journeys-list');

  await page.getByRole('link', { name: 'wf signed-up' }).click();
  // Each of the seven step types is drawn with its one-line summary.
  for (const summary of [
    'When "signed-up" is recorded',
    'Until "profile-completed", at most 1 day',
    'If contact.subscribed = true',
    'Welcome',
    'Unsubscribe',
    'PUT https://example.com/hook',
    'End the journey',
  ]) {
    await node(page, summary).waitFor();
  }
  const branches = (await edgeLabels(page)).map((label) => label.match(/\((\w+)\)$/)?.[1]).filter(Boolean);
  expect(branches.sort()).toEqual(['event', 'no', 'timeout', 'yes']);
  await node(page, 'Welcome').click();
  await page.getByRole('heading', { name: 'Send email step' }).waitFor();
  expect(await page.getByLabel('Template').inputValue()).toBe(template.body.id);
  expect(await seriousViolations(page)).toEqual([]);
  expect(await overflowing(page)).toEqual([]);
  await screenshot(page, 'journeys-editor');

  // The execution waits for profile-completed: the trigger and the wait are drawn, the wait as current.
  await page.getByRole('tab', { name: 'Executions' }).click();
  await page.getByLabel('Status').selectOption('WAITING');
  await page.getByRole('list', { name: 'Executions' }).getByRole('button').first().click();
  await page.locator(`.react-flow__node[data-id="${built.stepIds.wait}"] .step-node.run-current`).waitFor();
  await page.locator(`.react-flow__node[data-id="${built.stepIds.trigger}"] .step-node.run-visited`).waitFor();
  expect(await page.locator('.react-flow__edge.is-taken').count()).toBe(1);
  await page.getByRole('region', { name: 'Selected execution' }).getByText('profile-completed').waitFor();
  expect(await seriousViolations(page)).toEqual([]);
  expect(await overflowing(page)).toEqual([]);
  await screenshot(page, 'journeys-execution');
});

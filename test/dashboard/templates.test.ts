import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Page } from 'playwright-core';
import type { ProjectWithKeys } from '../../db/projects/projects';
import { listOutbox, outboxDir } from '../../mail/outbox';
import { addTestMember, createTestUser, type TestUser } from '../helpers/accounts';
import { type Dashboard, LAPTOP, overflowing, PHONE, screenshot, seriousViolations, startDashboard } from '../helpers/dashboard';
import { bearer } from '../helpers/env';
import { buildJourney } from '../helpers/journeys';
import { waitUntil } from '../helpers/wait';

/**
 * The template pages in Chromium against the real service, in outbox mode (a registered domain may
 * send; mail is written to DATA_DIR/outbox): a template written in the code editor, previewed by
 * the service for a chosen contact, saved (a sender off the project's domains refused first),
 * test-sent to the outbox; then duplicated and deleted from the list, its use shown first.
 */

const DOMAIN = 'dash-templates.test';

let dash: Dashboard;
let dataDir: string;
let user: TestUser;
let project: ProjectWithKeys;
/** The template the first test writes, for the phone-width test. */
let writtenId: string;

const auth = () => bearer(project.secretKey);

const previewBody = (page: Page) => page.frameLocator('iframe[title="Email preview"]').locator('body');

beforeAll(async () => {
  dataDir = mkdtempSync(path.join(os.tmpdir(), 'tidings-dash-templates-'));
  dash = await startDashboard({ DATA_DIR: dataDir });
  user = await createTestUser(dash.env);
  project = await dash.env.project('Dashboard templates');
  await addTestMember(dash.env, project.id, user.id, 'OWNER');
  expect((await dash.env.http().post('/domains').set(auth()).send({ domain: DOMAIN })).status).toBe(201);
  for (const [email, data] of [
    ['ada@example.org', { name: 'Ada', plan: 'pro' }],
    ['bob@example.org', { plan: 'free' }],
  ] as const) {
    expect((await dash.env.http().post('/contacts').set(auth()).send({ email, data })).status).toBe(201);
  }
});

afterAll(async () => {
  await dash?.close();
});

test('writes a template in the editor, previews it for a chosen contact, saves it and test-sends it', async () => {
  const page = await dash.signedIn(user, LAPTOP);
  await page.goto(`/app/p/${project.id}/templates`);
  await page.getByRole('heading', { name: 'Templates', level: 1 }).waitFor();
  await page.getByText('No templates yet.').waitFor();
  expect(await seriousViolations(page)).toEqual([]);

  await page.getByRole('link', { name: 'New template' }).click();
  await page.getByRole('heading', { name: 'New template', level: 1 }).waitFor();
  await page.getByLabel('Name', { exact: true }).fill('Welcome');
  await page.getByLabel('Subject').fill('Hi {{name ?? "friend"}}');

  // The body in CodeMirror: a labelled text box; Tab leaves it for the next control instead of indenting.
  const body = page.getByRole('textbox', { name: 'Body (HTML)' });
  await body.waitFor();
  await body.click();
  await page.keyboard.press('ControlOrMeta+a');
  await page.keyboard.insertText('<h1>Your plan: {{plan}}</h1>\n<p>Team: {{team ?? "none"}}</p>');
  await page.keyboard.press('Tab');
  expect(await page.evaluate('document.activeElement.closest(".cm-editor") === null')).toBe(true);
  expect(await body.textContent()).not.toContain('\t');

  // Rendered by the service while typing: first for the stand-in contact, then for Ada.
  await previewBody(page).getByText('Your plan:').waitFor();
  expect(await page.getByTestId('preview-subject').textContent()).toBe('Hi friend');
  await page.getByLabel('Preview as contact').fill('ada@');
  await page.getByRole('button', { name: 'Choose ada@example.org' }).click();
  await page.getByText('Rendered for ada@example.org').waitFor();
  await previewBody(page).getByText('Your plan: pro').waitFor();
  await waitUntil(async () => (await page.getByTestId('preview-subject').textContent()) === 'Hi Ada', { what: 'the subject rendered for Ada' });
  const variables = page.getByRole('list', { name: 'Variables the template uses' });
  await variables.getByText('missing').waitFor();
  expect((await variables.locator('li').allTextContents()).map((t) => t.trim())).toEqual(['name has a value', 'plan has a value', 'team missing']);
  // The preview runs nothing: a sandbox without scripts.
  expect(await page.locator('iframe[title="Email preview"]').getAttribute('sandbox')).toBe('');
  expect(await seriousViolations(page)).toEqual([]);

  // A sender off the project's domains is refused by the service, shown at the field.
  await page.getByLabel('From address').fill('hello@elsewhere.test');
  await page.getByRole('button', { name: 'Create template' }).click();
  await page.getByText('The domain elsewhere.test is not registered in this project').first().waitFor();
  await page.getByLabel('From address').fill(`hello@${DOMAIN}`);
  await page.getByRole('button', { name: 'Create template' }).click();
  await page.waitForURL(/\/templates\/tpl_[0-9a-f]+$/);
  writtenId = page.url().split('/').pop()!;
  await page.getByRole('heading', { name: 'Welcome', level: 1 }).waitFor();

  // An edit saved with PATCH.
  await page.getByLabel('Subject').fill('Hello {{name ?? "friend"}}');
  await page.getByText('Unsaved changes').waitFor();
  await page.getByRole('button', { name: 'Save', exact: true }).click();
  await page.getByText('Saved', { exact: true }).waitFor();
  const saved = await dash.env.http().get(`/templates/${writtenId}`).set(auth());
  expect(saved.body).toMatchObject({ name: 'Welcome', subject: 'Hello {{name ?? "friend"}}', from: `hello@${DOMAIN}`, type: 'TRANSACTIONAL' });
  expect(saved.body.body).toBe('<h1>Your plan: {{plan}}</h1>\n<p>Team: {{team ?? "none"}}</p>');
  // The preview follows the edit (for the stand-in again: the page of the created template starts afresh).
  await waitUntil(async () => (await page.getByTestId('preview-subject').textContent()) === 'Hello friend', { what: 'the edited subject previewed' });
  await screenshot(page, 'templates-editor');

  // The test copy goes through the send path to the outbox, rendered for the address's contact.
  const sendTo = page.getByLabel('Send to');
  expect(await sendTo.inputValue()).toBe(user.email);
  await sendTo.fill('ada@example.org');
  await page.getByRole('button', { name: 'Send test' }).click();
  await page.getByText('Queued to ada@example.org.').waitFor();
  const sent = await waitUntil(async () => (await listOutbox(outboxDir(dataDir))).find((m) => m.subject === 'Hello Ada'), { what: 'the test copy in the outbox' });
  expect(sent).toMatchObject({ to: 'ada@example.org', from: `hello@${DOMAIN}` });
});

test('duplicates and deletes templates from the list, showing where one is used first', async () => {
  const created = await dash.env.http().post('/templates').set(auth()).send({ name: 'Receipt', subject: 'Your receipt', body: '<p>Thanks</p>' });
  expect(created.status).toBe(201);
  const journey = await buildJourney(dash.env, project, {
    eventName: 'order.paid',
    steps: [{ key: 'send', type: 'SEND_EMAIL', config: { templateId: created.body.id } }],
    transitions: [['trigger', 'send']],
    enable: false,
  });

  const page = await dash.signedIn(user, LAPTOP);
  await page.goto(`/app/p/${project.id}/templates`);
  await page.getByRole('link', { name: 'Receipt' }).waitFor();
  expect(await seriousViolations(page)).toEqual([]);
  await screenshot(page, 'templates-list');

  await page.getByRole('button', { name: 'Duplicate Receipt' }).click();
  await page.getByRole('status').getByRole('link', { name: 'Receipt (copy)' }).waitFor();
  await page.getByRole('row').filter({ hasText: 'Receipt (copy)' }).waitFor();

  // The original is used by a journey step: the dialog says so before anything is deleted.
  await page.getByRole('button', { name: 'Delete Receipt', exact: true }).click();
  const dialog = page.getByRole('alertdialog');
  await dialog.getByRole('link', { name: `Journey ${journey.id}` }).waitFor();
  expect(await seriousViolations(page)).toEqual([]);
  await dialog.getByRole('button', { name: 'Keep it' }).click();
  await dialog.waitFor({ state: 'hidden' });

  await page.getByRole('button', { name: 'Delete Receipt (copy)' }).click();
  await dialog.getByText('No campaign or journey uses it').waitFor();
  await dialog.getByRole('button', { name: 'Delete', exact: true }).click();
  await dialog.waitFor({ state: 'hidden' });
  await page.getByRole('row').filter({ hasText: 'Receipt (copy)' }).waitFor({ state: 'detached' });
  expect((await dash.env.http().get('/templates').set(auth())).body.data.map((t: { name: string }) => t.name).sort()).toEqual(['Receipt', 'Welcome']);
});

test('the list and the editor at phone width', async () => {
  const page = await dash.signedIn(user, PHONE);
  await page.goto(`/app/p/${project.id}/templates`);
  await page.getByRole('link', { name: 'Welcome' }).waitFor();
  expect(await seriousViolations(page)).toEqual([]);
  expect(await overflowing(page)).toEqual([]);
  await screenshot(page, 'templates-list');

  await page.getByRole('link', { name: 'Welcome' }).click();
  await page.getByRole('heading', { name: 'Welcome', level: 1 }).waitFor();
  await page.getByRole('textbox', { name: 'Body (HTML)' }).waitFor();
  await previewBody(page).getByText('Your plan:').waitFor();
  expect(page.url()).toContain(writtenId);
  expect(await seriousViolations(page)).toEqual([]);
  expect(await overflowing(page)).toEqual([]);
  // The sandboxed preview paints in a full-page screenshot once it has been on screen.
  await page.locator('iframe[title="Email preview"]').scrollIntoViewIfNeeded();
  await screenshot(page, 'templates-editor');
});

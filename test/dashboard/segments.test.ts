import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Page } from 'playwright-core';
import type { ProjectWithKeys } from '../../db/projects/projects';
import { addTestMember, createTestUser, type TestUser } from '../helpers/accounts';
import { type Dashboard, LAPTOP, overflowing, PHONE, screenshot, seriousViolations, startDashboard } from '../helpers/dashboard';
import { bearer } from '../helpers/env';
import { waitUntil } from '../helpers/wait';

/**
 * The segment pages in Chromium against the real service: a dynamic segment built in the condition
 * builder (a live count and sample members while it is edited), saved, listed; a static one filled
 * and emptied by email; a delete the service refuses (a scheduled campaign uses the segment) shown.
 */

let dash: Dashboard;
let user: TestUser;
let project: ProjectWithKeys;
/** The dynamic segment the first test saves, for the phone-width test. */
let builtId: string;

const auth = () => bearer(project.secretKey);
const matchCount = (page: Page) => page.getByTestId('match-count').textContent();
const sample = (page: Page) => page.getByRole('list', { name: 'Sample members' }).locator('a').allTextContents();

async function countIs(page: Page, n: number): Promise<void> {
  await waitUntil(async () => (await matchCount(page).catch(() => null)) === String(n) && !(await page.getByText('(counting…)').count()), {
    what: `a live count of ${n}`,
  });
}

beforeAll(async () => {
  // Outbox mode: the scheduled campaign's sender needs a registered domain only, and nothing is sent.
  dash = await startDashboard({ DATA_DIR: mkdtempSync(path.join(os.tmpdir(), 'tidings-dash-segments-')) });
  user = await createTestUser(dash.env);
  project = await dash.env.project('Dashboard segments');
  await addTestMember(dash.env, project.id, user.id, 'OWNER');
  // One after the other: newest first is the reverse of this order.
  for (const [email, data] of [
    ['ana@example.org', { plan: 'pro', age: 41 }],
    ['ben@example.org', { plan: 'pro', age: 29 }],
    ['cy@example.org', { plan: 'free', age: 35 }],
    ['dee@example.org', { plan: 'pro', age: 52 }],
    ['eve@example.org', { plan: 'free' }],
  ] as const) {
    expect((await dash.env.http().post('/contacts').set(auth()).send({ email, data })).status).toBe(201);
  }
});

afterAll(async () => {
  await dash?.close();
});

test('builds a segment in the condition builder with a live count and sample, saves it and finds it in the list', async () => {
  const page = await dash.signedIn(user, LAPTOP);
  await page.goto(`/app/p/${project.id}/segments`);
  await page.getByRole('heading', { name: 'Segments', level: 1 }).waitFor();
  await page.getByText('No segments yet.').waitFor();
  expect(await seriousViolations(page)).toEqual([]);

  await page.getByRole('link', { name: 'New segment' }).click();
  await page.getByRole('heading', { name: 'New segment', level: 1 }).waitFor();
  await page.getByLabel('Name', { exact: true }).fill('Pro adults or Cy');
  await page.getByText('Finish every filter').waitFor();

  // plan is pro: the count and the newest members follow while typing.
  const field = (group: number, filter: number) => page.getByLabel(`Field (group ${group}, filter ${filter})`, { exact: true });
  await page.locator('option', { hasText: 'plan' }).first().waitFor({ state: 'attached' });
  await field(1, 1).selectOption({ label: 'plan' });
  await page.getByLabel('Value (group 1, filter 1)', { exact: true }).fill('pro');
  await countIs(page, 3);
  expect(await sample(page)).toEqual(['dee@example.org', 'ben@example.org', 'ana@example.org']);

  // … and age above 30, a number field with its own operators.
  await page.getByRole('button', { name: 'Add filter to group 1' }).click();
  await field(1, 2).selectOption({ label: 'age' });
  const operator = page.getByLabel('Operator (group 1, filter 2)', { exact: true });
  expect(await operator.locator('option').allTextContents()).toEqual(['is', 'is not', 'is greater than', 'is at least', 'is less than', 'is at most', 'is set', 'is not set']);
  await operator.selectOption({ label: 'is greater than' });
  await page.getByLabel('Value (group 1, filter 2)', { exact: true }).fill('30');
  await countIs(page, 2);
  expect(await sample(page)).toEqual(['dee@example.org', 'ana@example.org']);

  // OR a second group: the email contains "cy".
  await page.getByRole('button', { name: 'Add group', exact: true }).click();
  await page.getByLabel('Match', { exact: true }).selectOption({ label: 'any of the groups' });
  await field(2, 1).selectOption({ label: 'Email' });
  await page.getByLabel('Operator (group 2, filter 1)', { exact: true }).selectOption({ label: 'contains' });
  await page.getByLabel('Value (group 2, filter 1)', { exact: true }).fill('cy');
  await countIs(page, 3);
  expect(await sample(page)).toEqual(['dee@example.org', 'cy@example.org', 'ana@example.org']);
  expect(await seriousViolations(page)).toEqual([]);
  await screenshot(page, 'segments-segment');

  await page.getByRole('button', { name: 'Create segment' }).click();
  await page.waitForURL(/\/segments\/seg_[0-9a-f]+$/);
  builtId = page.url().split('/').pop()!;
  await page.getByRole('heading', { name: 'Pro adults or Cy', level: 1 }).waitFor();
  const members = page.getByRole('table', { name: 'Members, page 1' });
  await members.getByRole('link', { name: 'cy@example.org' }).waitFor();
  expect(await members.locator('tbody tr').count()).toBe(3);

  const saved = await dash.env.http().get(`/segments/${builtId}`).set(auth());
  expect(saved.body).toMatchObject({
    type: 'DYNAMIC',
    memberCount: 3,
    condition: {
      logic: 'OR',
      groups: [
        {
          filters: [
            { field: 'data.plan', operator: 'equals', value: 'pro' },
            { field: 'data.age', operator: 'greaterThan', value: 30 },
          ],
        },
        { filters: [{ field: 'email', operator: 'contains', value: 'cy' }] },
      ],
    },
  });

  // A change is counted live again and saved with PATCH.
  await page.getByLabel('Value (group 2, filter 1)', { exact: true }).fill('eve');
  await countIs(page, 3);
  await page.getByRole('button', { name: 'Save', exact: true }).click();
  await page.getByText('Saved', { exact: true }).waitFor();
  await members.getByRole('link', { name: 'eve@example.org' }).waitFor();

  await page.getByRole('link', { name: '← All segments' }).click();
  const row = page.getByRole('row').filter({ hasText: 'Pro adults or Cy' });
  await row.waitFor();
  expect(await row.locator('td').nth(2).textContent()).toBe('3');
  expect(await seriousViolations(page)).toEqual([]);
  await screenshot(page, 'segments-list');
});

test('a static segment: created, members added and removed by email', async () => {
  const page = await dash.signedIn(user, LAPTOP);
  await page.goto(`/app/p/${project.id}/segments/new`);
  await page.getByLabel('Name', { exact: true }).fill('Beta testers');
  await page.getByLabel('Static: a list you add contacts to').check();
  await page.getByRole('button', { name: 'Create segment' }).click();
  await page.waitForURL(/\/segments\/seg_[0-9a-f]+$/);
  await page.getByText('No members yet').waitFor();

  await page.getByLabel('Add members by email').fill('ana@example.org, nobody@example.org\nben@example.org');
  await page.getByRole('button', { name: 'Add 3 members' }).click();
  await page.getByText('Added 2. Not contacts (not added): nobody@example.org.').waitFor();
  const members = page.getByRole('table', { name: 'Members, page 1' });
  await members.getByRole('link', { name: 'ana@example.org' }).waitFor();
  expect(await members.locator('tbody tr').count()).toBe(2);
  expect(await seriousViolations(page)).toEqual([]);

  await page.getByRole('button', { name: 'Remove ana@example.org from the segment' }).click();
  await members.getByRole('link', { name: 'ana@example.org' }).waitFor({ state: 'detached' });
  await page.getByText('1 counted').waitFor();
});

test('a delete the service refuses (a scheduled campaign uses the segment) shows its error', async () => {
  expect((await dash.env.http().post('/domains').set(auth()).send({ domain: 'dash-segments.test' })).status).toBe(201);
  const segment = await dash.env.http().post('/segments').set(auth()).send({ name: 'Launch list', condition: { field: 'data.plan', operator: 'exists' } });
  const campaign = await dash.env
    .http()
    .post('/campaigns')
    .set(auth())
    .send({ name: 'Launch', subject: 'Hi', body: '<p>Hi</p>', from: 'news@dash-segments.test', segmentId: segment.body.id });
  expect(campaign.status).toBe(201);
  const scheduled = await dash.env
    .http()
    .post(`/campaigns/${campaign.body.id}/send`)
    .set(auth())
    .send({ scheduledFor: new Date(Date.now() + 86_400_000).toISOString() });
  expect(scheduled.body.status).toBe('SCHEDULED');

  const page = await dash.signedIn(user, LAPTOP);
  await page.goto(`/app/p/${project.id}/segments`);
  await page.getByRole('button', { name: 'Delete Launch list' }).click();
  const dialog = page.getByRole('alertdialog');
  await dialog.getByRole('button', { name: 'Delete', exact: true }).click();
  await dialog.getByRole('alert').getByText('The segment is used by a campaign that is scheduled or sending').waitFor();
  expect(await seriousViolations(page)).toEqual([]);
  await dialog.getByRole('button', { name: 'Keep it' }).click();
  expect((await dash.env.http().get(`/segments/${segment.body.id}`).set(auth())).status).toBe(200);
});

test('the list and the segment page at phone width', async () => {
  const page = await dash.signedIn(user, PHONE);
  await page.goto(`/app/p/${project.id}/segments`);
  await page.getByRole('link', { name: 'Pro adults or Cy' }).waitFor();
  expect(await seriousViolations(page)).toEqual([]);
  expect(await overflowing(page)).toEqual([]);
  await screenshot(page, 'segments-list');

  await page.getByRole('link', { name: 'Pro adults or Cy' }).click();
  await page.waitForURL(`**/segments/${builtId}`);
  await countIs(page, 3);
  await page.getByRole('table', { name: 'Members, page 1' }).waitFor();
  expect(await seriousViolations(page)).toEqual([]);
  expect(await overflowing(page)).toEqual([]);
  await screenshot(page, 'segments-segment');
});

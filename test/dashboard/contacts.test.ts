import type { Page } from 'playwright-core';
import type { ProjectWithKeys } from '../../db/projects/projects';
import { addTestMember, createTestUser, type TestUser } from '../helpers/accounts';
import { type Dashboard, LAPTOP, overflowing, PHONE, screenshot, seriousViolations, startDashboard } from '../helpers/dashboard';
import { bearer } from '../helpers/env';
import { waitUntil } from '../helpers/wait';

/**
 * The contacts pages in Chromium against the real API and worker: CSV import with its progress and
 * row errors, the list (search, subscription filter, paging, segment members), a contact's page
 * (data, subscription, email, events, emails sent, delete) and bulk actions.
 */

let dash: Dashboard;

beforeAll(async () => {
  dash = await startDashboard();
});

afterAll(async () => {
  await dash?.close();
});

interface Owned {
  user: TestUser;
  project: ProjectWithKeys;
  api: ReturnType<typeof apiOf>;
}

function apiOf(project: ProjectWithKeys) {
  const auth = bearer(project.secretKey);
  return {
    addContact: (body: object) => dash.env.http().post('/contacts').set(auth).send(body),
    contact: (id: string) => dash.env.http().get(`/contacts/${id}`).set(auth),
    list: (query: Record<string, string | number> = {}) => dash.env.http().get('/contacts').query(query).set(auth),
    post: (path: string, body: object) => dash.env.http().post(path).set(auth).send(body),
  };
}

async function ownedProject(name: string): Promise<Owned> {
  const user = await createTestUser(dash.env);
  const project = await dash.env.project(name);
  await addTestMember(dash.env, project.id, user.id, 'OWNER');
  return { user, project, api: apiOf(project) };
}

async function addContacts(o: Owned, contacts: Array<{ email: string; subscribed?: boolean; data?: object }>): Promise<Array<{ id: string; email: string }>> {
  const made = [];
  // One after the other, so that "newest first" is the order given here.
  for (const c of contacts) {
    const res = await o.api.addContact(c);
    expect(res.status).toBe(201);
    made.push(res.body as { id: string; email: string });
  }
  return made;
}

const rowsOf = (page: Page) => page.locator('main table tbody tr');
const emailsShown = async (page: Page) => (await page.locator('main table tbody td.email-cell').allTextContents()).map((s) => s.trim());
const pagerText = (page: Page, label = 'Contacts pages') => page.getByRole('navigation', { name: label }).locator('span').textContent();

async function waitForPager(page: Page, text: string, label?: string) {
  await waitUntil(async () => (await pagerText(page, label))?.includes(text), { what: () => `pager showing "${text}"` });
}

describe('CSV import', () => {
  test.each([LAPTOP, PHONE])('uploads a file, the progress bar reaches 100 %% and the bad rows are listed (%i px)', async (width) => {
    const o = await ownedProject('Import');
    await addContacts(o, [{ email: 'existing@import.test', data: { plan: 'free' } }]);
    const good = Array.from({ length: 40 }, (_, i) => `person${i}@import.test,Person ${i},${i}`);
    const csv = [
      'email,name,score',
      ...good.slice(0, 20),
      'not-an-email,Broken,1',
      ',Nobody,2',
      'existing@import.test,Existing,99',
      ...good.slice(20),
      'also bad@import,Spaces,3',
    ].join('\n');
    const page = await dash.signedIn(o.user, width);
    await page.goto(`/app/p/${o.project.id}/contacts/import`);
    await page.getByRole('heading', { level: 1, name: 'Import contacts' }).waitFor();
    expect(await page.getByRole('button', { name: 'Import' }).isDisabled()).toBe(true);

    await page.getByLabel('CSV file', { exact: true }).setInputFiles({ name: 'contacts.csv', mimeType: 'text/csv', buffer: Buffer.from(csv) });
    await page.getByRole('button', { name: 'Import' }).click();
    await page.waitForURL(/\/contacts\/import\?job=job_/);
    const bar = page.getByRole('progressbar');
    await bar.waitFor();
    await page.locator('[role=progressbar][aria-valuenow="100"]').waitFor({ timeout: 30_000 });
    await page.getByRole('heading', { name: 'Import complete' }).waitFor();
    expect(await page.getByText('44 of 44 rows').count()).toBe(1);

    const outcome = (await page.locator('.outcome').innerText()).replace(/\s+/g, ' ');
    expect(outcome).toContain('40 new');
    expect(outcome).toContain('1 updated');
    expect(outcome).toContain('3 skipped');

    const errorsTable = page.getByRole('table', { name: 'Rows not imported' });
    const errorRows = (await errorsTable.locator('tbody tr').allInnerTexts()).map((r) => r.split('\t').map((c) => c.trim()));
    expect(errorRows).toEqual([
      ['22', 'not-an-email', 'Not a valid email'],
      ['23', '(empty)', 'No email'],
      ['45', 'also bad@import', 'Not a valid email'],
    ]);

    // The import really happened: the service has the contacts, with typed data.
    const list = await o.api.list({ search: 'import.test', limit: 1 });
    expect(list.body.total).toBe(41);
    const existing = await o.api.list({ search: 'existing@' });
    expect(existing.body.data[0].data).toEqual({ plan: 'free', name: 'Existing', score: 99 });

    expect(await seriousViolations(page)).toEqual([]);
    expect(await overflowing(page)).toEqual([]);
    await screenshot(page, 'contacts-import');

    // A reload shows the same job, finished.
    await page.reload();
    await page.getByRole('heading', { name: 'Import complete' }).waitFor();

    await page.getByRole('link', { name: 'See the contacts' }).click();
    await page.getByRole('heading', { level: 1, name: 'Contacts' }).waitFor();
    await waitForPager(page, '41 in all');
  });

  test("a file without an email column, and one over 5 MB, show the service's reason", async () => {
    const o = await ownedProject('Bad imports');
    const page = await dash.signedIn(o.user);
    await page.goto(`/app/p/${o.project.id}/contacts/import`);

    await page.getByLabel('CSV file', { exact: true }).setInputFiles({ name: 'names.csv', mimeType: 'text/csv', buffer: Buffer.from('name,city\nAda,London\n') });
    await page.getByRole('button', { name: 'Import' }).click();
    await page.getByRole('heading', { name: 'Import failed' }).waitFor({ timeout: 30_000 });
    expect(await page.getByRole('alert').innerText()).toContain('The header row has no "email" column (columns found: name, city)');

    const big = Buffer.alloc(5 * 1024 * 1024 + 10, 'a');
    big.write('email\n');
    await page.getByLabel('CSV file', { exact: true }).setInputFiles({ name: 'big.csv', mimeType: 'text/csv', buffer: big });
    await page.getByRole('button', { name: 'Import' }).click();
    const alert = page.getByRole('alert').filter({ hasText: 'exceeds the limit' });
    await alert.waitFor();
    expect(await alert.innerText()).toContain('Split the file into parts of at most 5 MB');
    expect(await seriousViolations(page)).toEqual([]);
  });
});

describe('contacts list', () => {
  let o: Owned;
  beforeAll(async () => {
    o = await ownedProject('Paging');
    // 62 contacts, every fifth unsubscribed, each with a plan and a city.
    await addContacts(
      o,
      Array.from({ length: 62 }, (_, i) => ({
        email: `member${String(i).padStart(2, '0')}@paging.test`,
        subscribed: i % 5 !== 0,
        data: { plan: i % 2 ? 'pro' : 'free', city: `City ${i}` },
      })),
    );
  });

  test.each([LAPTOP, PHONE])('pages through, searches and filters by subscription, back to page 1 on each change (%i px)', async (width) => {
    const page = await dash.signedIn(o.user, width);
    await page.goto(`/app/p/${o.project.id}/contacts`);
    await page.getByRole('heading', { level: 1, name: 'Contacts' }).waitFor();
    await waitForPager(page, 'Page 1 · 62 in all');
    expect(await rowsOf(page).count()).toBe(20);
    // Newest first, with the data fields as columns.
    expect((await emailsShown(page))[0]).toBe('member61@paging.test');
    const headers = (await page.locator('main table thead th').allInnerTexts()).map((h) => h.trim());
    expect(headers).toEqual(expect.arrayContaining(['Email', 'Subscription', 'city', 'plan', 'Created']));
    expect(await seriousViolations(page)).toEqual([]);
    expect(await overflowing(page)).toEqual([]);
    await screenshot(page, 'contacts-list');

    const seen = new Set(await emailsShown(page));
    const next = page.getByRole('button', { name: 'Next' });
    for (const n of [2, 3, 4]) {
      await next.click();
      await waitForPager(page, `Page ${n}`);
      await waitUntil(async () => !(await emailsShown(page)).some((e) => seen.has(e)), { what: `page ${n}'s rows` });
      for (const e of await emailsShown(page)) seen.add(e);
    }
    expect(seen.size).toBe(62);
    expect(await rowsOf(page).count()).toBe(2);
    expect(await next.isDisabled()).toBe(true);
    await page.getByRole('button', { name: 'Previous' }).click();
    await waitForPager(page, 'Page 3');

    // A search starts again from page 1.
    await page.getByLabel('Search by email').fill('member1');
    await waitForPager(page, 'Page 1 · 10 in all');
    expect((await emailsShown(page)).sort()).toEqual(Array.from({ length: 10 }, (_, i) => `member1${i}@paging.test`));
    expect(new URL(page.url()).searchParams.get('search')).toBe('member1');

    await page.getByLabel('Subscription').selectOption('false');
    await waitForPager(page, 'Page 1 · 2 in all');
    expect((await emailsShown(page)).sort()).toEqual(['member10@paging.test', 'member15@paging.test']);

    await page.getByLabel('Search by email').fill('');
    await waitForPager(page, 'Page 1 · 13 in all');
    expect(await page.locator('main table tbody .badge', { hasText: /^Subscribed$/ }).count()).toBe(0);

    await page.getByLabel('Search by email').fill('nobody-here');
    await page.getByText('No contact matches these filters.').waitFor();
  });

  test('filters by an ad-hoc condition built on the page, with the subscription filter', async () => {
    const page = await dash.signedIn(o.user);
    await page.goto(`/app/p/${o.project.id}/contacts`);
    await waitForPager(page, '62 in all');
    await page.getByLabel('Show').selectOption({ label: 'Contacts matching a condition…' });
    const builder = page.getByRole('group', { name: 'Contacts matching' });
    const apply = page.getByRole('button', { name: 'Apply condition' });
    expect(await apply.isDisabled()).toBe(true);
    await builder.getByLabel(/^Field/).selectOption('data.plan');
    await builder.getByLabel(/^Operator/).selectOption('equals');
    await builder.getByLabel(/^Value/).fill('pro');
    expect(await seriousViolations(page)).toEqual([]);
    await apply.click();
    await waitForPager(page, 'Page 1 · 31 in all');
    expect(JSON.parse(new URL(page.url()).searchParams.get('condition')!)).toEqual({
      logic: 'AND',
      groups: [{ filters: [{ field: 'data.plan', operator: 'equals', value: 'pro' }] }],
    });
    await page.getByLabel('Subscription').selectOption('false');
    await waitForPager(page, 'Page 1 · 6 in all');
    expect((await emailsShown(page)).sort()).toEqual(['05', 15, 25, 35, 45, 55].map((i) => `member${i}@paging.test`));

    // The condition is in the address: a reload shows the same list.
    await page.reload();
    await waitForPager(page, 'Page 1 · 6 in all');
    await page.getByRole('button', { name: 'Clear condition' }).click();
    await waitForPager(page, 'Page 1 · 13 in all');
  });

  test('lists the members of a segment, page by page', async () => {
    const segment = await o.api.post('/segments', {
      name: 'Pro plan',
      condition: { logic: 'AND', groups: [{ filters: [{ field: 'data.plan', operator: 'equals', value: 'pro' }] }] },
    });
    expect(segment.status).toBe(201);
    const page = await dash.signedIn(o.user);
    await page.goto(`/app/p/${o.project.id}/contacts`);
    await waitForPager(page, '62 in all');
    await page.getByLabel('Show').selectOption({ label: 'Members of Pro plan' });
    await waitForPager(page, 'Page 1 of 2 · 31 in all', 'Segment members pages');
    expect(await page.getByLabel('Search by email').isDisabled()).toBe(true);
    await page.getByRole('button', { name: 'Next' }).click();
    await waitForPager(page, 'Page 2 of 2', 'Segment members pages');
    expect(await rowsOf(page).count()).toBe(11);
    const odd = (await emailsShown(page)).every((e) => Number(/member(\d+)/.exec(e)![1]) % 2 === 1);
    expect(odd).toBe(true);
    expect(await seriousViolations(page)).toEqual([]);
  });
});

describe('bulk actions', () => {
  test('select a page, unsubscribe it: the progress and outcome show and the list refreshes; then delete two after confirming', async () => {
    const o = await ownedProject('Bulk');
    const made = await addContacts(
      o,
      Array.from({ length: 25 }, (_, i) => ({ email: `bulk${String(i).padStart(2, '0')}@bulk.test`, subscribed: i !== 24 })),
    );
    const page = await dash.signedIn(o.user);
    await page.goto(`/app/p/${o.project.id}/contacts`);
    await waitForPager(page, 'Page 1 · 25 in all');

    await page.getByLabel('Select every contact on this page').check();
    const bar = page.getByRole('region', { name: 'Bulk actions' });
    await bar.getByText('20 selected').waitFor();
    expect(await seriousViolations(page)).toEqual([]);
    await bar.getByRole('button', { name: 'Unsubscribe' }).click();

    await page.getByRole('heading', { name: 'Unsubscribed contacts' }).waitFor({ timeout: 30_000 });
    await page.locator('[role=progressbar][aria-valuenow="100"]').waitFor();
    const outcome = (await page.getByRole('region', { name: 'Unsubscribed contacts' }).locator('.outcome').innerText()).replace(/\s+/g, ' ');
    // The newest 20: bulk24 (already unsubscribed) down to bulk05.
    expect(outcome).toContain('19 changed');
    expect(outcome).toContain('1 already unsubscribed');
    expect(outcome).toContain('0 failed');
    await waitUntil(async () => (await page.locator('main table tbody .badge', { hasText: /^Unsubscribed$/ }).count()) === 20, {
      what: 'the list showing the 20 unsubscribed',
    });
    expect((await o.api.list({ subscribed: 'false' })).body.total).toBe(20);
    expect(await page.getByRole('region', { name: 'Bulk actions' }).count()).toBe(0);

    // Two on the next page, deleted after confirming.
    await page.getByRole('button', { name: 'Next' }).click();
    await waitForPager(page, 'Page 2');
    await page.getByLabel('Select bulk00@bulk.test').check();
    await page.getByLabel('Select bulk01@bulk.test').check();
    await bar.getByRole('button', { name: 'Delete…' }).click();
    const dialog = page.getByRole('alertdialog');
    await dialog.getByRole('heading', { name: 'Delete 2 contacts?' }).waitFor();
    expect(await seriousViolations(page)).toEqual([]);
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    expect(await page.getByRole('alertdialog').count()).toBe(0);
    await bar.getByRole('button', { name: 'Delete…' }).click();
    await page.getByRole('alertdialog').getByRole('button', { name: 'Delete contacts' }).click();
    await page.getByRole('heading', { name: 'Deleted contacts' }).waitFor({ timeout: 30_000 });
    const deleted = page.getByRole('region', { name: 'Deleted contacts' }).locator('.outcome');
    expect((await deleted.innerText()).replace(/\s+/g, ' ')).toContain('2 deleted');
    await waitForPager(page, 'Page 1 · 23 in all');
    for (const c of made.slice(0, 2)) expect((await o.api.contact(c.id)).status).toBe(404);
  });
});

describe("a contact's page", () => {
  test.each([LAPTOP, PHONE])('edits data, changes the email, toggles the subscription, tracks an event, lists emails, deletes (%i px)', async (width) => {
    const o = await ownedProject('One contact');
    const [ada] = await addContacts(o, [
      { email: `ada-${width}@contact.test`, data: { plan: 'free', seats: 3, tags: ['a', 'b'], city: 'London' } },
      { email: `taken-${width}@contact.test` },
    ]);
    // An email to the contact, sent in outbox mode from a registered domain.
    const domain = `contact-${width}.test`;
    expect((await o.api.post('/domains', { domain })).status).toBe(201);
    const sent = await o.api.post('/v1/send', { to: ada!.email, from: `hello@${domain}`, subject: 'Welcome aboard', body: '<p>Hi</p>' });
    expect(sent.status).toBe(200);

    const page = await dash.signedIn(o.user, width);
    await page.goto(`/app/p/${o.project.id}/contacts`);
    await page.getByRole('link', { name: ada!.email }).click();
    await page.getByRole('heading', { level: 1, name: ada!.email }).waitFor();
    const emails = page.getByRole('table', { name: 'Emails sent to this contact' });
    await emails.getByText('Welcome aboard').waitFor();
    await waitUntil(async () => !(await emails.locator('tbody tr').innerText()).includes('…'), { what: "the email's opens and clicks" });
    expect(await seriousViolations(page)).toEqual([]);
    expect(await overflowing(page)).toEqual([]);
    await screenshot(page, 'contacts-contact');

    // Data: a bad number is refused before sending; then a change, an addition and a removal in one patch.
    const field = (n: number) => page.getByRole('group', { name: `Field ${n}` });
    const keys = await Promise.all([1, 2, 3, 4].map((n) => field(n).getByLabel('Name').inputValue()));
    expect(keys).toEqual(['city', 'plan', 'tags', 'seats']);
    expect(await page.locator('.data-row').count()).toBe(4);
    await field(2).getByLabel('Value').fill('pro');
    await field(4).getByLabel('Value').fill('many');
    await field(1).getByRole('button', { name: 'Remove city' }).click();
    await page.getByRole('button', { name: 'Add field' }).click();
    await field(4).getByLabel('Name').fill('vip');
    await field(4).getByLabel('Type').selectOption('boolean');
    await page.getByRole('button', { name: 'Save data' }).click();
    await page.getByText('Enter a number, e.g. 42 or 3.5').waitFor();
    expect(await field(3).getByLabel('Value').getAttribute('aria-invalid')).toBe('true');
    expect(await seriousViolations(page)).toEqual([]);
    await field(3).getByLabel('Value').fill('5');
    await page.getByRole('button', { name: 'Save data' }).click();
    await page.getByText('Data saved.').waitFor();
    expect((await o.api.contact(ada!.id)).body.data).toEqual({ plan: 'pro', seats: 5, tags: ['a', 'b'], vip: true });

    // The email: the service's own errors, on the field and as a notice.
    const emailField = page.getByRole('textbox', { name: 'Email', exact: true });
    await emailField.fill('not an email');
    await page.getByRole('button', { name: 'Change email' }).click();
    await waitUntil(async () => (await emailField.getAttribute('aria-invalid')) === 'true', { what: 'the email marked invalid' });
    await emailField.fill(`taken-${width}@contact.test`);
    await page.getByRole('button', { name: 'Change email' }).click();
    await page.getByRole('alert').filter({ hasText: 'Another contact of this project already has that email' }).waitFor();
    expect(await seriousViolations(page)).toEqual([]);

    // Subscription.
    await page.getByRole('button', { name: 'Unsubscribe' }).click();
    await page.getByRole('button', { name: 'Subscribe', exact: true }).waitFor();
    expect((await o.api.contact(ada!.id)).body.subscribed).toBe(false);
    const timeline = page.getByRole('list', { name: 'Events, newest first' });
    await timeline.getByText('contact.unsubscribed').waitFor();

    // A test event, with data merged into the contact's.
    await page.getByText('Track an event for this contact').click();
    await page.getByLabel('Event name').fill('trial.started');
    await page.getByLabel('Event data (JSON, optional)').fill('{"source": "dashboard"}');
    await page.getByRole('button', { name: 'Track event' }).click();
    await timeline.getByText('trial.started').waitFor();
    await page.locator('.data-row input[value="source"]').waitFor();
    expect((await o.api.contact(ada!.id)).body.data).toMatchObject({ source: 'dashboard', vip: true });

    // Delete, after confirming.
    await page.getByRole('button', { name: 'Delete contact…' }).click();
    await page.getByRole('alertdialog').getByRole('button', { name: 'Delete contact' }).click();
    await page.waitForURL(`**/app/p/${o.project.id}/contacts`);
    expect((await o.api.contact(ada!.id)).status).toBe(404);
  });

  test('an unknown contact shows the service error', async () => {
    const o = await ownedProject('Unknown contact');
    const page = await dash.signedIn(o.user);
    await page.goto(`/app/p/${o.project.id}/contacts/cnt_doesnotexist`);
    await page.getByRole('alert').waitFor();
    expect(await page.getByRole('alert').innerText()).toMatch(/not found/i);
    expect(await page.getByRole('heading', { level: 1 }).count()).toBe(1);
  });
});

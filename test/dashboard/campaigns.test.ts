import type { Page } from 'playwright-core';
import type { ProjectWithKeys } from '../../db/projects/projects';
import { setThrottleRate } from '../../db/messages/send-throttle';
import { addTestMember, createTestUser, type TestUser } from '../helpers/accounts';
import { type Dashboard, LAPTOP, overflowing, PHONE, screenshot, seriousViolations, startDashboard } from '../helpers/dashboard';
import { type DnsServer, startDnsServer } from '../helpers/dns';
import { bearer } from '../helpers/env';
import { verifiedDomain } from '../helpers/sending';
import { type SmtpSink, startSmtpSink } from '../helpers/smtp';
import { waitUntil } from '../helpers/wait';

/**
 * The campaign pages in Chromium against the real service: contacts and a segment made through the
 * API, a campaign composed, test-sent and sent in the page to an SMTP sink (the project throttled so
 * the send takes a few seconds and its progress can be watched), then duplicated; another one
 * scheduled and cancelled.
 */

const DOMAIN = 'dash-campaigns.test';
const PRO = 12;
const FREE = 5;

let dns: DnsServer;
let smtp: SmtpSink;
let dash: Dashboard;
let user: TestUser;
let project: ProjectWithKeys;
let segmentId: string;
/** The campaign the first test sends, for the pages of the others. */
let sentId: string;

const auth = () => bearer(project.secretKey);
const recipientsOf = (prefix: string) => smtp.messages.map((m) => m.envelope.to[0] ?? '').filter((to) => to.startsWith(prefix));

/** The campaign's status as the page header shows it. */
const statusBadge = (page: Page, status: string) => page.locator('.page-header .badge').getByText(status, { exact: true });

beforeAll(async () => {
  dns = await startDnsServer();
  smtp = await startSmtpSink();
  dash = await startDashboard({
    DNS_SERVERS: dns.address,
    SMTP_URL: smtp.url,
    DOMAIN_CHECK_INTERVAL_SECONDS: '1',
    SEND_RETRY_MAX_INTERVAL_SECONDS: '1',
  });
  user = await createTestUser(dash.env);
  project = await dash.env.project('Dashboard campaigns');
  await addTestMember(dash.env, project.id, user.id, 'OWNER');
  await verifiedDomain(dash.env, dns, project, DOMAIN);
  for (let i = 0; i < PRO + FREE; i++) {
    const plan = i < PRO ? 'pro' : 'free';
    const res = await dash.env.http().post('/contacts').set(auth()).send({ email: `${plan}-${i}@example.org`, data: { first: `Name${i}`, plan } });
    expect(res.status).toBe(201);
  }
  const segment = await dash.env
    .http()
    .post('/segments')
    .set(auth())
    .send({ name: 'Pro customers', type: 'DYNAMIC', condition: { field: 'data.plan', operator: 'equals', value: 'pro' } });
  expect(segment.status).toBe(201);
  segmentId = segment.body.id;
  // A few emails a second: the send lasts long enough to watch the bar move.
  await setThrottleRate(dash.env.orm.em.fork(), project.id, 3);
}, 120_000);

afterAll(async () => {
  await dash?.close();
  await smtp?.close();
  await dns?.close();
});

test('compose a campaign to a segment, test it, send it: the bar climbs to 100 % and the chart shows the sends', async () => {
  const page = await dash.signedIn(user, LAPTOP);
  await page.goto(`/app/p/${project.id}/campaigns`);
  await page.getByRole('heading', { name: 'Campaigns', level: 1 }).waitFor();
  await page.getByText('No campaigns yet.').waitFor();
  expect(await seriousViolations(page)).toEqual([]);

  await page.getByRole('link', { name: 'New campaign' }).click();
  await page.getByRole('heading', { name: 'New campaign', level: 1 }).waitFor();
  await page.getByLabel('Campaign name').fill('Spring launch');
  await page.getByLabel('Subject').fill('Hello {{first ?? "friend"}}');
  await page.getByLabel('Body (HTML)').fill('<h1>Spring is here</h1><p>Hi {{first ?? "friend"}}, the new plan is out.</p>');
  await page.getByLabel('From address').fill(`news@${DOMAIN}`);
  await page.getByLabel('From name').fill('Acme News');
  // Everyone subscribed first, then the segment: the count follows the choice.
  await page.getByRole('status').filter({ hasText: `${PRO + FREE} recipients if sent now` }).waitFor();
  await page.getByLabel('Send to').selectOption({ label: `Pro customers (segment, ${PRO} members)` });
  await page.getByRole('status').filter({ hasText: `${PRO} recipients if sent now` }).waitFor();
  expect(await seriousViolations(page)).toEqual([]);
  await screenshot(page, 'campaigns-compose');

  // A mistake the service catches: the error shows on the field.
  await page.getByLabel('From address').fill('news@elsewhere.test');
  await page.getByRole('button', { name: 'Create draft' }).click();
  await page.getByRole('alert').filter({ hasText: 'The domain elsewhere.test is not registered in this project' }).waitFor();
  await page.getByLabel('From address').fill(`news@${DOMAIN}`);
  await page.getByRole('button', { name: 'Create draft' }).click();
  await page.waitForURL(/\/campaigns\/cmp_/);
  sentId = /\/campaigns\/(cmp_[^/?#]+)/.exec(page.url())![1]!;
  await page.getByRole('heading', { name: 'Spring launch', level: 1 }).waitFor();
  await statusBadge(page, 'Draft').waitFor();

  // A test copy, rendered with that contact's data.
  await page.getByLabel('Test address').fill('pro-1@example.org');
  await page.getByRole('button', { name: 'Send test' }).click();
  await page.getByText('Test copy on its way to pro-1@example.org.').waitFor();
  await waitUntil(() => recipientsOf('pro-1@').length === 1, { what: 'the test copy' });
  expect(smtp.messages.find((m) => m.envelope.to[0] === 'pro-1@example.org')!.raw.toString('utf8')).toMatch(/^Subject: Hello Name1\r?$/m);
  smtp.clear();

  await page.getByRole('button', { name: 'Send now…' }).click();
  const confirm = page.getByRole('alertdialog', { name: 'Send “Spring launch” now?' });
  await confirm.getByText(`It goes to ${PRO} recipients at once.`, { exact: false }).waitFor();
  await confirm.getByRole('button', { name: 'Send now' }).click();
  // The send controls are gone; focus lands on the progress that replaced them.
  await waitUntil(async () => (await page.evaluate('document.activeElement?.id')) === 'progress-heading', { what: 'focus on the progress' });

  // The bar follows the send: some value between the ends is seen, then 100 %.
  const bar = page.getByRole('progressbar');
  await bar.waitFor();
  const seen = new Set<number>();
  await waitUntil(
    async () => {
      const now = Number(await bar.getAttribute('aria-valuenow'));
      seen.add(now);
      return now === 100;
    },
    { timeoutMs: 30_000, intervalMs: 200, what: 'the progress bar at 100 %' },
  );
  expect([...seen].some((v) => v > 0 && v < 100)).toBe(true);
  await statusBadge(page, 'Sent').waitFor();
  await page.getByRole('progressbar', { name: `Sent ${PRO} of ${PRO}` }).waitFor();
  expect(recipientsOf('pro-').sort()).toEqual(Array.from({ length: PRO }, (_, i) => `pro-${i}@example.org`).sort());
  expect(recipientsOf('free-')).toEqual([]);

  // The chart: bars drawn, and its table (the text alternative) has the sends.
  const chart = page.getByRole('figure', { name: 'Emails of this campaign per hour' });
  await chart.locator('.recharts-bar-rectangle').first().waitFor();
  await chart.getByRole('button', { name: 'Show the numbers as a table' }).click();
  const table = chart.getByRole('table', { name: 'Emails of this campaign per hour' });
  await waitUntil(async () => {
    const sentColumn = await table.locator('tbody tr td:nth-of-type(1)').allTextContents();
    return sentColumn.reduce((sum, n) => sum + Number(n.replace(/\D/g, '')), 0) === PRO;
  }, { what: 'the chart table adding up to the sends' });
  expect(await table.locator('thead th').allTextContents()).toEqual(expect.arrayContaining(['Sent', 'Delivered', 'Opened', 'Clicked', 'Bounced', 'Complained']));
  expect(await seriousViolations(page)).toEqual([]);
  await screenshot(page, 'campaigns-campaign-sent');

  // Back on the list: sent figures.
  await page.getByRole('link', { name: 'All campaigns' }).click();
  const row = page.getByRole('row', { name: /Spring launch/ });
  await row.getByText(`${PRO} of ${PRO}`).waitFor();
  await row.getByText('Pro customers').waitFor();
  expect(await seriousViolations(page)).toEqual([]);
  await screenshot(page, 'campaigns-list');
});

test('duplicate a sent campaign from the list: a new draft with the same message', async () => {
  const page = await dash.signedIn(user, LAPTOP);
  await page.goto(`/app/p/${project.id}/campaigns`);
  await page.getByRole('button', { name: 'Duplicate Spring launch', exact: true }).click();
  await page.getByText('Created the draft “Spring launch (copy)”.').waitFor();
  const copyRow = page.getByRole('row', { name: /Spring launch \(copy\)/ });
  await copyRow.getByText('Draft').waitFor();
  await page.getByRole('link', { name: 'Open it' }).click();
  await page.getByRole('heading', { name: 'Spring launch (copy)', level: 1 }).waitFor();
  expect(await page.getByLabel('Subject').inputValue()).toBe('Hello {{first ?? "friend"}}');
  expect(await page.getByLabel('Send to').inputValue()).toBe(segmentId);

  // Deleting the copy asks first, then it is gone from the list.
  await page.getByRole('button', { name: 'Delete' }).click();
  await page.getByRole('alertdialog').getByRole('button', { name: 'Delete' }).click();
  await page.waitForURL(/\/campaigns$/);
  await page.getByRole('row', { name: /Spring launch/ }).first().waitFor();
  expect(await page.getByRole('row', { name: /Spring launch \(copy\)/ }).count()).toBe(0);
});

test('schedule a campaign in the page, then cancel it: nothing is sent', async () => {
  const created = await dash.env
    .http()
    .post('/campaigns')
    .set(auth())
    .send({ name: 'Summer preview', subject: 'Soon', body: '<p>Soon.</p>', from: `news@${DOMAIN}`, segmentId });
  expect(created.status).toBe(201);
  const page = await dash.signedIn(user, LAPTOP);
  await page.goto(`/app/p/${project.id}/campaigns/${created.body.id}`);
  await page.getByRole('heading', { name: 'Summer preview', level: 1 }).waitFor();

  await page.getByRole('radio', { name: 'At a set time' }).check();
  const at = new Date(Date.now() + 2 * 3600_000);
  const pad = (n: number) => String(n).padStart(2, '0');
  const local = `${at.getFullYear()}-${pad(at.getMonth() + 1)}-${pad(at.getDate())}T${pad(at.getHours())}:${pad(at.getMinutes())}`;
  await page.getByLabel('Send at').fill(local);
  await page.getByRole('button', { name: 'Schedule…' }).click();
  await page.getByRole('alertdialog').getByRole('button', { name: 'Schedule' }).click();
  const schedule = page.getByRole('region', { name: 'Schedule' });
  await schedule.waitFor();
  await statusBadge(page, 'Scheduled').waitFor();
  expect(await seriousViolations(page)).toEqual([]);

  await schedule.getByRole('button', { name: 'Cancel the schedule' }).click();
  await page.getByRole('alertdialog').getByRole('button', { name: 'Cancel the send' }).click();
  await page.getByText('The schedule is cancelled; nothing was sent.').waitFor();
  await statusBadge(page, 'Cancelled').waitFor();
  const after = await dash.env.http().get(`/campaigns/${created.body.id}`).set(auth());
  expect(after.body).toMatchObject({ status: 'CANCELLED', startedAt: null, stats: { sent: 0 } });
  expect(recipientsOf('pro-').length).toBe(PRO);
});

test('the campaign pages at phone width: list, composing, and a sent campaign', async () => {
  const page = await dash.signedIn(user, PHONE);
  await page.goto(`/app/p/${project.id}/campaigns`);
  await page.getByRole('row', { name: /Spring launch/ }).first().waitFor();
  expect(await seriousViolations(page)).toEqual([]);
  expect(await overflowing(page)).toEqual([]);
  await screenshot(page, 'campaigns-list');

  await page.getByRole('link', { name: 'New campaign' }).click();
  await page.getByRole('heading', { name: 'New campaign', level: 1 }).waitFor();
  await page.getByLabel('Campaign name').fill('Phone draft');
  await page.getByRole('status').filter({ hasText: 'recipients if sent now' }).waitFor();
  expect(await seriousViolations(page)).toEqual([]);
  expect(await overflowing(page)).toEqual([]);
  await screenshot(page, 'campaigns-compose');

  await page.goto(`/app/p/${project.id}/campaigns/${sentId}`);
  await page.getByRole('progressbar', { name: `Sent ${PRO} of ${PRO}` }).waitFor();
  await page.getByRole('figure', { name: 'Emails of this campaign per hour' }).locator('.recharts-bar-rectangle').first().waitFor();
  expect(await seriousViolations(page)).toEqual([]);
  expect(await overflowing(page)).toEqual([]);
  await screenshot(page, 'campaigns-campaign-sent');
});

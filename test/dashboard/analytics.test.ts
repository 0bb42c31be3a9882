import type { ProjectWithKeys } from '../../db/projects/projects';
import { queryOne } from '../../db/sql';
import { addTestMember, createTestUser, type TestUser } from '../helpers/accounts';
import { type Dashboard, LAPTOP, overflowing, PHONE, screenshot, seriousViolations, startDashboard } from '../helpers/dashboard';
import { type DnsServer, startDnsServer } from '../helpers/dns';
import { bearer } from '../helpers/env';
import { deliveriesSettled, verifiedDomain } from '../helpers/sending';
import { type SmtpSink, startSmtpSink } from '../helpers/smtp';
import { waitUntil } from '../helpers/wait';

/**
 * The analytics and activity pages in Chromium against the real service: a campaign sent through
 * the API to an SMTP sink today, events tracked, another campaign scheduled; the analytics page
 * must show the day's sends, and the activity feed must take in an event tracked while it is open.
 */

const DOMAIN = 'dash-analytics.test';
const CONTACTS = 7;
const CAMPAIGN = 'Weekly digest';
const SCHEDULED = 'Next week’s digest';

let dns: DnsServer;
let smtp: SmtpSink;
let dash: Dashboard;
let user: TestUser;
let project: ProjectWithKeys;

const auth = () => bearer(project.secretKey);

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
  project = await dash.env.project('Dashboard analytics');
  await addTestMember(dash.env, project.id, user.id, 'OWNER');
  await verifiedDomain(dash.env, dns, project, DOMAIN);
  for (let i = 0; i < CONTACTS; i++) {
    const res = await dash.env.http().post('/contacts').set(auth()).send({ email: `reader-${i}@example.org` });
    expect(res.status).toBe(201);
  }
  for (const email of ['reader-0@example.org', 'reader-1@example.org']) {
    expect((await dash.env.http().post('/v1/track').set(auth()).send({ email, event: 'signed_up' })).status).toBe(200);
  }

  const digest = await dash.env
    .http()
    .post('/campaigns')
    .set(auth())
    .send({ name: CAMPAIGN, subject: 'This week', body: '<p>News.</p>', from: `news@${DOMAIN}` });
  expect(digest.status).toBe(201);
  expect((await dash.env.http().post(`/campaigns/${digest.body.id}/send`).set(auth()).send({})).status).toBe(200);
  await waitUntil(
    async () => (await queryOne<{ status: string }>(dash.env.orm.em.fork(), 'select status from campaigns where id = ?', [digest.body.id]))?.status === 'SENT',
    { timeoutMs: 30_000, what: 'the digest sent' },
  );
  await deliveriesSettled(dash.env, 'campaign_id = ?', [digest.body.id]);
  expect(smtp.messages.length).toBe(CONTACTS);

  const next = await dash.env
    .http()
    .post('/campaigns')
    .set(auth())
    .send({ name: SCHEDULED, subject: 'Next week', body: '<p>Soon.</p>', from: `news@${DOMAIN}` });
  const at = new Date(Date.now() + 7 * 86_400_000).toISOString();
  expect((await dash.env.http().post(`/campaigns/${next.body.id}/send`).set(auth()).send({ scheduledFor: at })).status).toBe(200);
}, 120_000);

afterAll(async () => {
  await dash?.close();
  await smtp?.close();
  await dns?.close();
});

test.each([LAPTOP, PHONE])("the analytics page shows the day's sends: totals, chart, top campaigns and events (%i px)", async (width) => {
  const page = await dash.signedIn(user, width);
  await page.goto(`/app/p/${project.id}/analytics`);
  await page.getByRole('heading', { name: 'Analytics', level: 1 }).waitFor();
  await page.getByLabel('Period').selectOption({ label: 'Last 24 hours' });
  await page.getByRole('heading', { name: 'Last 24 hours' }).waitFor();
  await page.locator('[data-metric="sends"]').filter({ hasText: String(CONTACTS) }).waitFor();

  const chart = page.getByRole('figure', { name: 'Emails per hour, last 24 hours' });
  await chart.locator('.recharts-line-curve').first().waitFor();
  // The text alternative holds the same numbers: this hour's row has the sends.
  const table = chart.getByRole('table', { name: 'Emails per hour, last 24 hours', includeHidden: true });
  const sentColumn = await table.locator('tbody tr td:nth-of-type(1)').allTextContents();
  expect(sentColumn).toHaveLength(24);
  expect(sentColumn.reduce((sum, n) => sum + Number(n.replace(/\D/g, '')), 0)).toBe(CONTACTS);
  // Axes are labelled.
  await chart.getByText('Emails', { exact: true }).first().waitFor();
  await chart.getByText(/^Hour \(/).first().waitFor();

  const campaigns = page.getByRole('region', { name: 'Top campaigns' });
  await campaigns.getByRole('row', { name: new RegExp(`${CAMPAIGN} ${CONTACTS}`) }).waitFor();
  const events = page.getByRole('region', { name: 'Top events' });
  await events.getByRole('row', { name: `email.sent ${CONTACTS}` }).waitFor();
  await events.getByRole('row', { name: 'signed_up 2' }).waitFor();
  await events.getByLabel('Events').selectOption('tracked');
  await waitUntil(async () => (await events.getByRole('row', { name: /email\.sent/ }).count()) === 0, { what: 'emitted events filtered out' });

  expect(await seriousViolations(page)).toEqual([]);
  expect(await overflowing(page)).toEqual([]);
  await screenshot(page, 'analytics');
});

test.each([LAPTOP, PHONE])('the activity feed takes in a new event live and says so; upcoming sends are listed (%i px)', async (width) => {
  const page = await dash.signedIn(user, width);
  await page.goto(`/app/p/${project.id}/activity`);
  await page.getByRole('heading', { name: 'Activity', level: 1 }).waitFor();
  const feed = page.getByRole('list', { name: 'Activity, newest first' });
  await feed.getByRole('link', { name: CAMPAIGN }).waitFor();
  await feed.getByText('Event “signed_up”').first().waitFor();
  const upcoming = page.getByRole('region', { name: 'Coming up' });
  await upcoming.getByRole('link', { name: SCHEDULED }).waitFor();
  // Let the live poll take its first look before anything happens.
  await page.waitForTimeout(1500);

  const event = `upgraded_${width}`;
  const tracked = await dash.env.http().post('/v1/track').set(auth()).send({ email: 'reader-3@example.org', event, data: { plan: 'pro' } });
  expect(tracked.status).toBe(200);
  const item = feed.getByRole('listitem').filter({ hasText: `Event “${event}”` });
  await item.waitFor({ timeout: 20_000 });
  await item.getByRole('link', { name: 'reader-3@example.org' }).waitFor();
  await item.getByText('plan: pro').waitFor();
  // It came in on top, and the polite live region said so.
  expect(await feed.getByRole('listitem').first().textContent()).toContain(`Event “${event}”`);
  await page.getByRole('status').filter({ hasText: '1 new' }).waitFor();
  expect(await seriousViolations(page)).toEqual([]);
  expect(await overflowing(page)).toEqual([]);
  await screenshot(page, 'activity');

  // Filtered to tracked events: the campaign's activity leaves the list.
  await page.getByLabel('Show').selectOption({ label: 'Events tracked by your app' });
  await waitUntil(async () => (await feed.getByRole('link', { name: CAMPAIGN }).count()) === 0, { what: 'campaign activity filtered out' });
  await feed.getByText(`Event “${event}”`).waitFor();
});

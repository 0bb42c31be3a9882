import { type Dashboard, LAPTOP, seriousViolations, startDashboard } from '../helpers/dashboard';
import { startDnsServer, type DnsServer } from '../helpers/dns';
import { startSmtpSink, type SmtpSink } from '../helpers/smtp';
import { waitUntil } from '../helpers/wait';

/**
 * A new user's first day, every step through the pages with nothing set up behind them: sign up,
 * create a project, add and verify a domain, import contacts from a CSV, write a template and see the
 * service's preview, build a segment and see its count, send a campaign to it and watch the progress
 * bar reach 100 % and the chart show the sends. Real relay (an SMTP sink) and real DNS (a loopback
 * server the test publishes the domain's records in).
 */

const DOMAIN = 'first-day.test';
const PRO = 6;
const FREE = 4;

let dash: Dashboard;
let dns: DnsServer;
let smtp: SmtpSink;

beforeAll(async () => {
  dns = await startDnsServer();
  smtp = await startSmtpSink();
  dash = await startDashboard({ DNS_SERVERS: dns.address, SMTP_URL: smtp.url, DOMAIN_CHECK_INTERVAL_SECONDS: '1' });
});

afterAll(async () => {
  await dash?.close();
  await smtp?.close();
  await dns?.close();
});

test('sign up → domain → CSV import → template with preview → segment with count → campaign sent to 100 % with its chart', async () => {
  const page = await (await dash.context(LAPTOP)).newPage();
  const email = `owner-${Date.now()}@first-day.example`;

  // Sign up and create a project.
  await page.goto('/app/');
  await page.getByRole('link', { name: 'Create an account' }).click();
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill('a long enough password');
  await page.getByRole('button', { name: 'Create account' }).click();
  await page.waitForURL('**/app/projects/new');
  await page.getByLabel('Project name').fill('Acme');
  await page.getByRole('button', { name: 'Create project' }).click();
  await page.getByRole('heading', { name: 'Acme is ready' }).waitFor();
  await page.getByRole('link', { name: 'Continue to the setup checklist' }).click();
  await page.getByRole('progressbar', { name: '0 of 5 steps done' }).waitFor();
  const projectId = /\/app\/p\/(prj_\w+)\//.exec(page.url())![1]!;
  const app = (path: string) => `/app/p/${projectId}/${path}`;

  // A domain: its records published, then "Check now" verifies it.
  await page.getByRole('link', { name: 'Go to Domains' }).click();
  await page.getByLabel('Domain', { exact: true }).fill(DOMAIN);
  await page.getByRole('button', { name: 'Add domain' }).click();
  const records = page.getByRole('list', { name: `DNS records for ${DOMAIN}` }).getByRole('listitem');
  await records.first().waitFor();
  // What the user would copy into their DNS: each record's type, name and value as the page shows them.
  for (const row of await records.all()) {
    const type = await row.locator('.dns-type strong').innerText();
    const [name, value] = await row.locator('code').allInnerTexts();
    if (type === 'TXT') dns.set(name!, 'TXT', [value!]);
  }
  await page.getByRole('button', { name: 'Check now' }).click();
  await page.getByText('The DKIM record was found: the domain is verified.').waitFor({ timeout: 20_000 });

  // Contacts from a CSV, the progress bar to 100 %.
  await page.goto(app('contacts/import'));
  const rows = Array.from({ length: PRO + FREE }, (_, i) => `person${i}@example.org,Person ${i},${i < PRO ? 'pro' : 'free'},true`);
  await page
    .getByLabel('CSV file', { exact: true })
    .setInputFiles({ name: 'people.csv', mimeType: 'text/csv', buffer: Buffer.from(['email,name,plan,subscribed', ...rows].join('\n')) });
  await page.getByRole('button', { name: 'Import' }).click();
  await page.locator('[role=progressbar][aria-valuenow="100"]').waitFor({ timeout: 30_000 });
  await page.getByRole('heading', { name: 'Import complete' }).waitFor();

  // A template, previewed by the service for one of the imported contacts.
  await page.goto(app('templates/new'));
  await page.getByLabel('Name', { exact: true }).fill('Launch');
  await page.getByLabel('Subject').fill('News for {{name}}');
  const body = page.getByRole('textbox', { name: 'Body (HTML)' });
  await body.click();
  await page.keyboard.press('ControlOrMeta+a');
  await page.keyboard.insertText('<p>Hello {{name}}, you are on {{plan}}.</p>');
  await page.getByLabel('Preview as contact').fill('person1@');
  await page.getByRole('button', { name: 'Choose person1@example.org' }).click();
  await page.frameLocator('iframe[title="Email preview"]').getByText('Hello Person 1, you are on pro.').waitFor();
  await page.getByLabel('From address').fill(`news@${DOMAIN}`);
  await page.getByRole('button', { name: 'Create template' }).click();
  await page.waitForURL(/\/templates\/tpl_/);

  // A segment built in the condition builder, its count live.
  await page.goto(app('segments/new'));
  await page.getByLabel('Name', { exact: true }).fill('Pro plans');
  await page.locator('option', { hasText: 'plan' }).first().waitFor({ state: 'attached' });
  await page.getByLabel('Field (group 1, filter 1)', { exact: true }).selectOption({ label: 'plan' });
  await page.getByLabel('Value (group 1, filter 1)', { exact: true }).fill('pro');
  await waitUntil(async () => (await page.getByTestId('match-count').textContent().catch(() => null)) === String(PRO), { what: `a live count of ${PRO}` });
  await page.getByRole('button', { name: 'Create segment' }).click();
  await page.waitForURL(/\/segments\/seg_/);

  // The campaign: the template, the segment, sent; the bar reaches 100 % and the chart shows the sends.
  await page.goto(app('campaigns/new'));
  await page.getByLabel('Campaign name').fill('Launch day');
  await page.getByLabel('Start from a template').selectOption({ label: 'Launch' });
  await page.getByRole('button', { name: 'Use template' }).click();
  await waitUntil(async () => (await page.getByLabel('Subject').inputValue()) === 'News for {{name}}', { what: "the template's subject in the form" });
  expect(await page.getByLabel('From address').inputValue()).toBe(`news@${DOMAIN}`);
  await page.getByLabel('Send to').selectOption({ label: `Pro plans (segment, ${PRO} members)` });
  await page.getByRole('status').filter({ hasText: `${PRO} recipients if sent now` }).waitFor();
  await page.getByRole('button', { name: 'Create draft' }).click();
  await page.waitForURL(/\/campaigns\/cmp_/);
  await page.getByRole('button', { name: 'Send now…' }).click();
  await page.getByRole('alertdialog').getByRole('button', { name: 'Send now' }).click();
  await page.getByRole('progressbar', { name: `Sent ${PRO} of ${PRO}` }).waitFor({ timeout: 30_000 });
  const chart = page.getByRole('figure', { name: 'Emails of this campaign per hour' });
  await chart.locator('.recharts-bar-rectangle').first().waitFor();
  expect(await seriousViolations(page)).toEqual([]);
  // The relay also has the account's verification email; the campaign's are the contacts'.
  const campaignMail = () => smtp.messages.filter((m) => m.envelope.to[0]!.startsWith('person'));
  await waitUntil(() => campaignMail().length === PRO, { what: `${PRO} campaign messages at the relay` });
  expect(campaignMail().map((m) => m.envelope.to[0]).sort()).toEqual(Array.from({ length: PRO }, (_, i) => `person${i}@example.org`).sort());
  expect(smtp.messages.find((m) => m.envelope.to[0] === 'person2@example.org')!.raw.toString('utf8')).toMatch(/^Subject: News for Person 2\r?$/m);

  // The checklist has caught up: domain, template, contacts and a first email done.
  await page.goto(app('setup'));
  await page.getByRole('progressbar', { name: '4 of 5 steps done' }).waitFor();
});

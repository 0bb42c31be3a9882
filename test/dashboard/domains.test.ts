import type { Page } from 'playwright-core';
import type { ProjectWithKeys } from '../../db/projects/projects';
import { addTestMember, createTestUser, type TestUser } from '../helpers/accounts';
import { type Dashboard, LAPTOP, overflowing, PHONE, screenshot, seriousViolations, startDashboard } from '../helpers/dashboard';
import { type DnsServer, startDnsServer } from '../helpers/dns';
import { bearer } from '../helpers/env';
import type { Domain } from '../helpers/sending';
import { waitUntil } from '../helpers/wait';

/**
 * The domains page in Chromium against the real API and worker, whose resolver asks a real DNS
 * server on loopback (DNS_SERVERS) that the test fills with the records the page shows.
 */

let dash: Dashboard;
let dns: DnsServer;

beforeAll(async () => {
  dns = await startDnsServer();
  // Background checks every 2 s: the page's polling must show their outcome without a click.
  dash = await startDashboard({ DNS_SERVERS: dns.address, DOMAIN_CHECK_INTERVAL_SECONDS: '2' });
});

afterAll(async () => {
  await dash?.close();
  await dns?.close();
});

async function member(role: 'OWNER' | 'MEMBER', name: string): Promise<{ user: TestUser; project: ProjectWithKeys }> {
  const user = await createTestUser(dash.env);
  const project = await dash.env.project(name);
  await addTestMember(dash.env, project.id, user.id, role);
  return { user, project };
}

const listed = async (project: ProjectWithKeys) => {
  const res = await dash.env.http().get(`/domains/project/${project.id}`).set(bearer(project.secretKey));
  expect(res.status).toBe(200);
  return res.body as Domain[];
};

const publish = (d: Pick<Domain, 'records'>) => {
  for (const r of d.records) {
    if (r.type === 'MX') {
      const [priority, exchange] = r.value.split(' ');
      dns.set(r.name, 'MX', [{ priority: Number(priority), exchange: exchange! }]);
    } else {
      dns.set(r.name, 'TXT', [r.value]);
    }
  }
};

const card = (page: Page, domain: string) => page.getByRole('region', { name: domain, exact: true });

test.each([LAPTOP, PHONE])('adds a domain, shows its records, checks now and sees it verified, then removes it (%i px)', async (width) => {
  const { user, project } = await member('OWNER', 'Domains');
  const name = `mail-${width}.dash.test`;
  const page = await dash.signedIn(user, width);
  await page.goto(`/app/p/${project.id}/domains`);
  await page.getByRole('heading', { level: 1, name: 'Domains' }).waitFor();
  await page.getByText('No domain yet.').waitFor();

  // A bad name is refused with the service's message on the field.
  const field = page.getByLabel('Domain', { exact: true });
  await field.fill('not a domain');
  await page.getByRole('button', { name: 'Add domain' }).click();
  await page.getByText('Must be a domain name such as mail.example.com').waitFor();
  expect(await field.getAttribute('aria-invalid')).toBe('true');

  await field.fill(name.toUpperCase());
  await page.getByRole('button', { name: 'Add domain' }).click();
  const domain = card(page, name);
  await domain.waitFor();
  expect(await field.inputValue()).toBe('');
  const [added] = await listed(project);
  expect(added!.domain).toBe(name);

  // Every record the service gave, with its name and value and copy buttons.
  const rows = domain.getByRole('list', { name: `DNS records for ${name}` }).getByRole('listitem');
  expect(await rows.count()).toBe(added!.records.length);
  for (const [i, r] of added!.records.entries()) {
    const text = await rows.nth(i).innerText();
    expect(text).toContain(r.type);
    expect(text).toContain(r.name);
    expect(text).toContain(r.value);
  }
  expect(await domain.getByRole('button', { name: 'Copy value' }).count()).toBe(added!.records.length);
  expect(await domain.getByRole('button', { name: 'Copy name' }).count()).toBe(added!.records.length);
  expect(await domain.getByRole('status').first().innerText()).toBe('Pending verification');

  // Nothing published yet: "Check now" says so, record by record.
  await domain.getByRole('button', { name: 'Check now' }).click();
  await domain.getByText('The DKIM record was not found yet.').waitFor();
  expect(await rows.first().innerText()).toContain('Not found');

  // Published: "Check now" verifies it.
  publish(added!);
  await domain.getByRole('button', { name: 'Check now' }).click();
  await domain.getByText('The DKIM record was found: the domain is verified.').waitFor();
  expect(await domain.getByRole('status').first().innerText()).toBe('Verified');
  expect(await rows.first().innerText()).toContain('Found');
  expect((await listed(project))[0]!.status).toBe('verified');
  expect(await seriousViolations(page)).toEqual([]);
  expect(await overflowing(page)).toEqual([]);
  await screenshot(page, 'domains');

  // Remove, after confirming. The question opens on the safe answer; Escape closes it and gives the
  // focus back to the button that asked.
  const removeButton = domain.getByRole('button', { name: 'Remove…' });
  await removeButton.click();
  const dialog = page.getByRole('alertdialog', { name: `Remove ${name}?` });
  await dialog.waitFor();
  const focused = () => page.evaluate('document.activeElement?.textContent');
  await waitUntil(async () => (await focused()) === 'Cancel', { what: 'the focus on Cancel' });
  await page.keyboard.press('Escape');
  await dialog.waitFor({ state: 'hidden' });
  await waitUntil(async () => (await focused()) === 'Remove…', { what: 'the focus back on Remove…' });
  expect(await listed(project)).toHaveLength(1);
  await removeButton.click();
  expect(await seriousViolations(page)).toEqual([]);
  await screenshot(page, 'domains-remove-confirm');
  await dialog.getByRole('button', { name: 'Remove domain' }).click();
  await page.getByText('No domain yet.').waitFor();
  expect(await listed(project)).toEqual([]);
});

test('a pending domain turns verified on the page by itself once the background check finds its records', async () => {
  const { user, project } = await member('OWNER', 'Background check');
  const res = await dash.env.http().post('/domains').set(bearer(project.secretKey)).send({ domain: 'background.dash.test' });
  expect(res.status).toBe(201);
  const page = await dash.signedIn(user);
  await page.goto(`/app/p/${project.id}/domains`);
  const domain = card(page, 'background.dash.test');
  await domain.getByText('Pending verification').waitFor();

  publish(res.body as Domain);
  await domain.getByText('Verified', { exact: true }).waitFor({ timeout: 20_000 });
  await waitUntil(async () => (await domain.getByRole('listitem').first().innerText()).includes('Found'), { what: 'the DKIM record shown as found' });
});

test('a member sees the domains and their records, without the admin actions', async () => {
  const { user, project } = await member('MEMBER', 'Read only');
  const res = await dash.env.http().post('/domains').set(bearer(project.secretKey)).send({ domain: 'readonly.dash.test' });
  expect(res.status).toBe(201);
  const page = await dash.signedIn(user);
  await page.goto(`/app/p/${project.id}/domains`);
  await card(page, 'readonly.dash.test').waitFor();
  await page.getByText('Adding, checking and removing domains needs the admin role.').waitFor();
  expect(await page.getByRole('button', { name: 'Add domain' }).count()).toBe(0);
  expect(await page.getByRole('button', { name: 'Check now' }).count()).toBe(0);
  expect(await page.getByRole('button', { name: 'Remove…' }).count()).toBe(0);
  expect(await seriousViolations(page)).toEqual([]);
});

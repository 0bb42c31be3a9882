import { mkdtempSync, readdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Page } from 'playwright-core';
import { query } from '../../db/sql';
import { addTestMember, asMember, createTestUser } from '../helpers/accounts';
import { type Dashboard, LAPTOP, overflowing, PHONE, screenshot, seriousViolations, startDashboard } from '../helpers/dashboard';
import { waitUntil } from '../helpers/wait';

/** Settings and the outbox through the browser, on the real service in outbox mode. */
let dash: Dashboard;
let outbox: string;

beforeAll(async () => {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'dashboard-settings-'));
  outbox = path.join(dataDir, 'outbox');
  dash = await startDashboard({ DATA_DIR: dataDir });
});

afterAll(async () => {
  await dash?.close();
});

const status = async (key: string) => (await fetch(`${dash.origin}/contacts`, { headers: { Authorization: `Bearer ${key}` } })).status;

async function expectAccessible(page: Page, name?: string) {
  expect(await seriousViolations(page)).toEqual([]);
  if (name) await screenshot(page, name);
}

async function members(projectId: string, asUser: { cookie: string }) {
  const res = await dash.env.http().get(`/projects/${projectId}/members`).set(asMember(asUser, projectId));
  return res.body as Array<{ email: string; role: string }>;
}

test.each([LAPTOP, PHONE])('an owner rotates the keys (the new ones shown once), adds a member and changes their role (%i px)', async (width) => {
  const owner = await createTestUser(dash.env);
  const project = await dash.env.project(`Settings ${width}`);
  await addTestMember(dash.env, project.id, owner.id, 'OWNER');
  const colleague = await createTestUser(dash.env);
  const page = await dash.signedIn(owner, width);

  await page.goto(`/app/p/${project.id}/settings`);
  await page.getByRole('heading', { name: 'Settings', level: 1 }).waitFor();
  await page.getByRole('table', { name: 'Members of the project' }).getByText(owner.email).waitFor();
  await page.getByRole('heading', { name: 'Sending reputation' }).waitFor();
  await page.getByText('Emails written in').waitFor();
  // The key previews are the beginnings of the working keys.
  const keys = page.locator('#keys');
  const preview = (await keys.locator('dd code').first().textContent())!;
  expect(project.secretKey.startsWith(preview)).toBe(true);
  await expectAccessible(page, 'settings');
  expect(await overflowing(page)).toEqual([]);

  // Rotation asks first, then shows the new keys once; the old ones stop working at once.
  await page.getByRole('button', { name: 'Rotate keys' }).click();
  const dialog = page.getByRole('alertdialog', { name: 'Rotate both keys?' });
  await dialog.waitFor();
  await expectAccessible(page, 'settings-rotate-confirm');
  await dialog.getByRole('button', { name: 'Cancel' }).click();
  await dialog.waitFor({ state: 'hidden' });
  expect(await status(project.secretKey)).toBe(200);

  await page.getByRole('button', { name: 'Rotate keys' }).click();
  await page.getByRole('alertdialog').getByRole('button', { name: 'Rotate the keys' }).click();
  const newSecret = (await page.getByTestId('secret-key').textContent())!;
  expect(newSecret).toMatch(/^sk_/);
  expect(newSecret).not.toBe(project.secretKey);
  expect(await page.getByTestId('public-key').textContent()).toMatch(/^pk_/);
  await expectAccessible(page, 'settings-new-keys');
  expect(await status(project.secretKey)).toBe(401);
  expect(await status(newSecret)).toBe(200);
  await page.reload();
  await page.getByRole('heading', { name: 'API keys' }).waitFor();
  expect(await page.getByTestId('secret-key').count()).toBe(0);
  expect(newSecret.startsWith((await keys.locator('dd code').first().textContent())!)).toBe(true);

  // A member is added by the email of their account, then made an admin.
  await page.getByLabel('Email of their account').fill(colleague.email);
  await page.getByRole('button', { name: 'Add member' }).click();
  await page.getByRole('status').filter({ hasText: `${colleague.email} is now a member` }).waitFor();
  const roleSelect = page.getByLabel(`Role of ${colleague.email}`, { exact: true });
  await roleSelect.selectOption('ADMIN');
  await page.getByRole('button', { name: `Save the role of ${colleague.email}` }).click();
  await waitUntil(async () => (await members(project.id, owner)).find((m) => m.email === colleague.email)?.role === 'ADMIN', { what: 'the new role' });
  await page.getByRole('button', { name: `Save the role of ${colleague.email}` }).and(page.locator(':disabled')).waitFor();
  expect(await roleSelect.inputValue()).toBe('ADMIN');

  // Adding someone without an account: the service's answer.
  await page.getByLabel('Email of their account').fill(`nobody-${width}@nowhere.test`);
  await page.getByRole('button', { name: 'Add member' }).click();
  await page.getByRole('alert').filter({ hasText: 'No account uses the email' }).waitFor();
  await screenshot(page, 'settings-members');
  expect(await overflowing(page)).toEqual([]);
});

test('a MEMBER sees what needs an admin disabled, can still leave; a role lost meanwhile shows the service’s 403', async () => {
  const owner = await createTestUser(dash.env);
  const member = await createTestUser(dash.env);
  const admin = await createTestUser(dash.env);
  const project = await dash.env.project('Settings as member');
  await addTestMember(dash.env, project.id, owner.id, 'OWNER');
  await addTestMember(dash.env, project.id, member.id, 'MEMBER');
  await addTestMember(dash.env, project.id, admin.id, 'ADMIN');

  const page = await dash.signedIn(member);
  await page.goto(`/app/p/${project.id}/settings`);
  await page.getByRole('heading', { name: 'Settings', level: 1 }).waitFor();
  await page.getByLabel(`Role of ${admin.email}`, { exact: true }).waitFor();
  for (const control of [
    page.getByRole('button', { name: 'Rotate keys' }),
    page.getByRole('button', { name: 'Add member' }),
    page.getByLabel('Email of their account'),
    page.getByLabel('Project name'),
    page.getByLabel(`Role of ${admin.email}`, { exact: true }),
    page.getByRole('button', { name: `Remove ${admin.email}` }),
    page.getByRole('button', { name: 'Save caps' }),
  ]) {
    expect(await control.isDisabled()).toBe(true);
  }
  expect(await page.getByRole('button', { name: 'Leave' }).isEnabled()).toBe(true);
  await page.getByText('Only owners and admins can add members or change their roles.').waitFor();
  await expectAccessible(page, 'settings-as-member');

  // An admin whose role is taken away while the page is open: the service refuses, the page says why.
  const adminPage = await dash.signedIn(admin);
  await adminPage.goto(`/app/p/${project.id}/settings`);
  await adminPage.getByRole('button', { name: 'Add member' }).and(adminPage.locator(':enabled')).waitFor();
  await query(dash.env.orm.em.fork(), `update project_members set role = 'MEMBER' where project_id = ? and user_id = ?`, [project.id, admin.id]);
  await adminPage.getByLabel('Email of their account').fill(member.email);
  await adminPage.getByRole('button', { name: 'Add member' }).click();
  await adminPage.getByRole('alert').filter({ hasText: 'This needs the ADMIN role in the project; you are MEMBER' }).waitFor();

  // Leaving asks first, then goes to another project (none here: a new one).
  await page.getByRole('button', { name: 'Leave' }).click();
  await page.getByRole('alertdialog').getByRole('button', { name: 'Leave the project' }).click();
  await page.waitForURL('**/app/projects/new');
});

test('an admin sets monthly caps; consumption shows them', async () => {
  const owner = await createTestUser(dash.env);
  const project = await dash.env.project('Settings caps');
  await addTestMember(dash.env, project.id, owner.id, 'OWNER');
  const page = await dash.signedIn(owner);
  await page.goto(`/app/p/${project.id}/settings#billing`);
  await page.getByRole('spinbutton', { name: 'Transactional (API sends)' }).fill('1000');
  await page.getByRole('spinbutton', { name: 'Campaigns' }).fill('0');
  await page.getByRole('button', { name: 'Save caps' }).click();
  await page.getByRole('status').filter({ hasText: 'Caps saved.' }).waitFor();
  const limits = await dash.env.http().get(`/users/@me/projects/${project.id}/billing-limits`).set('Authorization', `Bearer ${project.secretKey}`);
  expect(limits.body).toEqual({ transactional: 1000, campaign: 0, workflow: null });
  await page.getByRole('progressbar', { name: 'Transactional (API sends): share of the cap used' }).waitFor();

  await page.getByRole('spinbutton', { name: 'Campaigns' }).fill('-5');
  await page.getByRole('button', { name: 'Save caps' }).click();
  await page.getByRole('alert').filter({ hasText: /campaign/ }).waitFor();
});

describe('the outbox page', () => {
  /** A project with a member, that sent one email per subject through the API. */
  async function sendingProject(name: string, domain: string, subjects: string[]) {
    const project = await dash.env.project(name);
    const user = await createTestUser(dash.env);
    await addTestMember(dash.env, project.id, user.id, 'MEMBER');
    const key = { Authorization: `Bearer ${project.secretKey}` };
    expect((await dash.env.http().post('/domains').set(key).send({ domain })).status).toBe(201);
    const ids: string[] = [];
    for (const subject of subjects) {
      const sent = await dash.env
        .http()
        .post('/v1/send')
        .set(key)
        .send({ to: `ada@${domain}`, from: `hello@${domain}`, subject, body: `<h1>${subject}</h1><script>parent.document.title = 'owned'</script>` });
      expect(sent.status).toBe(200);
      ids.push(sent.body.data.emails[0].email as string);
    }
    await waitUntil(() => ids.every((id) => readdirSync(outbox).some((f) => f.includes(id))), { what: `${name}'s mail in the outbox` });
    return { project, user };
  }

  test.each([LAPTOP, PHONE])("lists the project's own mail only, newest first, and opens a message sandboxed (%i px)", async (width) => {
    const mine = await sendingProject(`Outbox mine ${width}`, `mine-${width}.test`, ['Welcome aboard', 'Your receipt']);
    await sendingProject(`Outbox theirs ${width}`, `theirs-${width}.test`, ['Secret of another project']);
    const page = await dash.signedIn(mine.user, width);

    await page.goto(`/app/p/${mine.project.id}/setup`);
    await page.getByRole('navigation', { name: 'Sections' }).getByRole('link', { name: 'Outbox' }).click();
    await page.getByRole('heading', { name: 'Outbox', level: 1 }).waitFor();
    const table = page.getByRole('table', { name: 'Messages in the outbox, newest first' });
    await table.waitFor();
    expect(await table.locator('tbody tr td:first-child').allTextContents()).toEqual(['Your receipt', 'Welcome aboard']);
    expect(await page.getByText('Secret of another project').count()).toBe(0);
    expect(await page.getByText('Confirm your email address').count()).toBe(0);
    await expectAccessible(page, 'outbox-list');
    expect(await overflowing(page)).toEqual([]);

    await table.getByRole('link', { name: 'Welcome aboard' }).click();
    await page.getByRole('heading', { name: 'Welcome aboard', level: 1 }).waitFor();
    const frame = page.locator('iframe.message-frame');
    expect(await frame.getAttribute('sandbox')).toBe('');
    expect(await frame.getAttribute('srcdoc')).toContain('<h1>Welcome aboard</h1>');
    expect(await page.frameLocator('iframe.message-frame').getByRole('heading', { name: 'Welcome aboard' }).isVisible()).toBe(true);
    // The sender's script did not run.
    expect(await page.title()).not.toBe('owned');
    await expectAccessible(page, 'outbox-message');
    await page.getByRole('tab', { name: 'Headers' }).click();
    await page.getByRole('rowheader', { name: 'dkim-signature' }).waitFor();
    expect(await overflowing(page)).toEqual([]);

    await page.getByRole('link', { name: '← Outbox' }).click();
    await table.waitFor();
  });

  test("another project's message opened by its id answers not found", async () => {
    const mine = await sendingProject('Outbox probe mine', 'probe-mine.test', ['Mine']);
    await sendingProject('Outbox probe theirs', 'probe-theirs.test', ['Theirs']);
    const theirs = readdirSync(outbox).find((f) => f.includes('probe-theirs.test'))!.slice(0, -4);
    const page = await dash.signedIn(mine.user);
    await page.goto(`/app/p/${mine.project.id}/outbox?message=${encodeURIComponent(theirs)}`);
    await page.getByRole('alert').filter({ hasText: 'Message not found' }).waitFor();
    expect(await page.getByText('Theirs').count()).toBe(0);
  });
});

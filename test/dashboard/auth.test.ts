import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { simpleParser } from 'mailparser';
import type { Page } from 'playwright-core';
import { addTestMember, createTestUser } from '../helpers/accounts';
import { type Dashboard, LAPTOP, PHONE, screenshot, seriousViolations, startDashboard } from '../helpers/dashboard';
import { waitUntil } from '../helpers/wait';

/**
 * The signed-out pages through the browser, on the real service in outbox mode: account mail is
 * read from the outbox folder, and its link is opened as the user would.
 */
let dash: Dashboard;
let outbox: string;

beforeAll(async () => {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'dashboard-auth-'));
  outbox = path.join(dataDir, 'outbox');
  // Every sign-up and mail request of this file comes from 127.0.0.1.
  dash = await startDashboard({ DATA_DIR: dataDir, LOGIN_ATTEMPTS_PER_MINUTE: '200' });
});

afterAll(async () => {
  await dash?.close();
});

/** The link of the `nth` account email to `to` (oldest first), as a path on the dashboard's origin. */
async function mailedLink(to: string, nth = 1): Promise<string> {
  const link = await waitUntil(
    async () => {
      const mails = [];
      for (const file of readdirSync(outbox).filter((f) => f.startsWith('_sml_'))) {
        const mail = await simpleParser(readFileSync(path.join(outbox, file)));
        if (mail.to && !Array.isArray(mail.to) && mail.to.value[0]?.address === to) mails.push(mail);
      }
      // Account mail ids sort by creation.
      mails.sort((a, b) => (a.messageId ?? '').localeCompare(b.messageId ?? ''));
      return /https?:\/\/\S+\?token=[\w-]+/.exec(mails[nth - 1]?.text ?? '')?.[0];
    },
    { what: `account email ${nth} to ${to}` },
  );
  const url = new URL(link);
  return url.pathname + url.search;
}

const newEmail = (tag: string) => `${tag}-${Math.random().toString(36).slice(2, 10)}@dashboard.test`;

async function expectAccessible(page: Page, name: string) {
  expect(await seriousViolations(page)).toEqual([]);
  await screenshot(page, name);
}

test.each([LAPTOP, PHONE])(
  'signs up with the form, confirms the address through the mailed link, creates a project (keys shown once) and sees the checklist (%i px)',
  async (width) => {
    const page = await (await dash.context(width)).newPage();
    const email = newEmail('signup');

    await page.goto('/app/signin');
    await page.getByRole('link', { name: 'Create an account' }).click();
    await page.getByRole('heading', { name: 'Create your account' }).waitFor();
    await expectAccessible(page, 'auth-sign-up');

    // The service's validation, in its words, next to the field.
    await page.getByLabel('Email').fill(email);
    await page.getByLabel('Password').fill('short');
    await page.getByRole('button', { name: 'Create account' }).click();
    await page.getByRole('alert').waitFor();
    expect(await page.getByLabel('Password').getAttribute('aria-invalid')).toBe('true');

    await page.getByLabel('Name (optional)').fill('Ada');
    await page.getByLabel('Password').fill('a long enough password');
    await page.getByRole('button', { name: 'Create account' }).click();
    await page.waitForURL('**/app/projects/new');
    await page.getByRole('heading', { name: 'Create a project' }).waitFor();
    await page.getByText(`we sent a link to ${email}`).waitFor();

    // The link in the verification email opens the dashboard, which confirms the address.
    const link = await mailedLink(email);
    expect(link).toMatch(/^\/app\/verify\?token=/);
    await page.goto(link);
    await page.getByRole('heading', { name: 'Email address confirmed' }).waitFor();
    await page.getByRole('status').filter({ hasText: email }).waitFor();
    await expectAccessible(page, 'auth-verified');
    await page.getByRole('link', { name: 'Continue to the dashboard' }).click();

    // No project yet: the new-project page, without the verification notice now.
    await page.getByRole('heading', { name: 'Create a project' }).waitFor();
    expect(await page.getByText('Confirm your email address').count()).toBe(0);
    await expectAccessible(page, 'auth-new-project');
    await page.getByLabel('Project name').fill(`Acme ${width}`);
    await page.getByRole('button', { name: 'Create project' }).click();
    await page.getByRole('heading', { name: `Acme ${width} is ready` }).waitFor();
    const secretKey = await page.getByTestId('secret-key').textContent();
    expect(secretKey).toMatch(/^sk_/);
    expect(await page.getByTestId('public-key').textContent()).toMatch(/^pk_/);
    expect(await page.getByRole('button', { name: 'Copy secret key' }).isVisible()).toBe(true);
    await expectAccessible(page, 'auth-new-project-keys');
    // The key shown is the project's working key.
    const contacts = await fetch(`${dash.origin}/contacts`, { headers: { Authorization: `Bearer ${secretKey}` } });
    expect(contacts.status).toBe(200);

    await page.getByRole('link', { name: 'Continue to the setup checklist' }).click();
    await page.waitForURL(/\/app\/p\/prj_\w+\/setup$/);
    await page.getByRole('heading', { name: 'Get started' }).waitFor();
    await page.getByRole('progressbar', { name: '0 of 5 steps done' }).waitFor();
    expect(await page.locator('.checklist li').count()).toBe(5);
    expect(await page.locator('.checklist .badge').allTextContents()).toEqual(['To do', 'To do', 'To do', 'To do', 'To do']);
    // Each step leads to its page in the project.
    await page.getByRole('link', { name: 'Go to Domains' }).click();
    await page.waitForURL(/\/app\/p\/prj_\w+\/domains$/);
    await page.goBack();
    await page.getByRole('progressbar', { name: '0 of 5 steps done' }).waitFor();
    // Outbox mode: the checklist says a domain can send at once, and the navigation has the outbox.
    await page.getByText('This server runs in outbox mode').waitFor();
    expect(await page.getByRole('navigation', { name: 'Sections' }).getByRole('link', { name: 'Outbox' }).count()).toBe(1);
    await expectAccessible(page, 'setup-checklist');
  },
);

test("the checklist shows a project's progress, each done step marked", async () => {
  const user = await createTestUser(dash.env);
  const project = await dash.env.project('Checklist progress');
  await addTestMember(dash.env, project.id, user.id, 'MEMBER');
  const created = await dash.env.http().post('/contacts').set('Authorization', `Bearer ${project.secretKey}`).send({ email: 'ada@example.com' });
  expect(created.status).toBe(201);

  const page = await dash.signedIn(user);
  await page.goto(`/app/p/${project.id}/setup`);
  await page.getByRole('progressbar', { name: '1 of 5 steps done' }).waitFor();
  const contactsStep = page.locator('.checklist li').filter({ hasText: 'Add contacts' });
  expect(await contactsStep.locator('.badge').textContent()).toBe('Done');
});

test('resets a forgotten password through the mailed link, then signs in with the new one', async () => {
  const user = await createTestUser(dash.env);
  const project = await dash.env.project('Reset flow');
  await addTestMember(dash.env, project.id, user.id, 'OWNER');
  const page = await (await dash.context(PHONE)).newPage();

  await page.goto('/app/signin');
  await page.getByRole('link', { name: 'Forgot your password?' }).click();
  await page.getByRole('heading', { name: 'Reset your password' }).waitFor();
  await page.getByLabel('Email').fill(user.email);
  await page.getByRole('button', { name: 'Email me a link' }).click();
  await page.getByRole('status').filter({ hasText: 'a reset link is on its way' }).waitFor();
  await expectAccessible(page, 'auth-reset-requested');

  const link = await mailedLink(user.email);
  expect(link).toMatch(/^\/app\/reset\?token=/);
  await page.goto(link);
  await page.getByRole('heading', { name: 'Choose a new password' }).waitFor();
  await page.getByLabel('New password', { exact: true }).fill('a brand new password');
  await page.getByLabel('Repeat the new password').fill('a different password');
  await page.getByRole('button', { name: 'Set the new password' }).click();
  await page.getByText('The two passwords differ.').waitFor();
  await page.getByLabel('Repeat the new password').fill('a brand new password');
  await page.getByRole('button', { name: 'Set the new password' }).click();
  await page.getByRole('heading', { name: 'Password changed' }).waitFor();
  await expectAccessible(page, 'auth-reset-done');

  // The link works once.
  await page.goto(link);
  await page.getByLabel('New password', { exact: true }).fill('yet another password');
  await page.getByLabel('Repeat the new password').fill('yet another password');
  await page.getByRole('button', { name: 'Set the new password' }).click();
  await page.getByRole('alert').filter({ hasText: /expired|already used|not valid/i }).waitFor();

  await page.goto('/app/signin');
  await page.getByLabel('Email').fill(user.email);
  await page.getByLabel('Password').fill(user.password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('alert').waitFor();
  await page.getByLabel('Password').fill('a brand new password');
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL(`**/app/p/${project.id}/setup`);
});

test('an unconfirmed user is asked to confirm, can have the link sent again, and a used or wrong link says so', async () => {
  const user = await createTestUser(dash.env, { verified: false });
  const project = await dash.env.project('Unverified');
  await addTestMember(dash.env, project.id, user.id, 'OWNER');
  const page = await dash.signedIn(user);

  await page.goto(`/app/p/${project.id}/setup`);
  const notice = page.getByRole('region', { name: 'Email address not confirmed' });
  await notice.getByText(user.email).waitFor();
  await notice.getByRole('button', { name: 'Send the link again' }).click();
  await notice.getByRole('status').filter({ hasText: `on its way to ${user.email}` }).waitFor();

  const link = await mailedLink(user.email);
  await page.goto(link);
  await page.getByRole('heading', { name: 'Email address confirmed' }).waitFor();
  await page.goto(link);
  await page.getByRole('heading', { name: 'This link does not work' }).waitFor();
  await page.getByRole('alert').waitFor();
  await expectAccessible(page, 'auth-verify-failed');

  await page.goto(`/app/p/${project.id}/setup`);
  await page.getByRole('heading', { name: 'Get started' }).waitFor();
  expect(await page.getByRole('region', { name: 'Email address not confirmed' }).count()).toBe(0);
});

test('with DISABLE_SIGNUPS the sign-up page says so, and the service refuses the form with its own message', async () => {
  const closed = await startDashboard({ DISABLE_SIGNUPS: 'true' });
  try {
    const page = await (await closed.context()).newPage();
    await page.goto('/app/signup');
    await page.getByText('Sign-ups are turned off on this server').waitFor();
    await page.getByLabel('Email').fill(newEmail('closed'));
    await page.getByLabel('Password').fill('a long enough password');
    await page.getByRole('button', { name: 'Create account' }).click();
    await page.getByRole('alert').filter({ hasText: 'Sign-ups are disabled on this deployment' }).waitFor();
    expect(page.url()).toMatch(/\/app\/signup$/);
  } finally {
    await closed.close();
  }
});

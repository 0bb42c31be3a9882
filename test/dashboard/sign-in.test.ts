import { createTestUser, addTestMember } from '../helpers/accounts';
import { type Dashboard, LAPTOP, PHONE, screenshot, seriousViolations, startDashboard } from '../helpers/dashboard';

let dash: Dashboard;

beforeAll(async () => {
  dash = await startDashboard();
});

afterAll(async () => {
  await dash?.close();
});

test.each([LAPTOP, PHONE])('signs in with the form and lands in the first project (%i px)', async (width) => {
  const user = await createTestUser(dash.env);
  const project = await dash.env.project('Acme mail');
  await addTestMember(dash.env, project.id, user.id, 'OWNER');
  const page = await (await dash.context(width)).newPage();

  await page.goto('/app/');
  await page.getByRole('heading', { name: 'Sign in' }).waitFor();
  expect(await seriousViolations(page)).toEqual([]);
  await screenshot(page, 'sign-in');

  await page.getByLabel('Email').fill(user.email);
  await page.getByLabel('Password').fill('wrong password');
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('alert').waitFor();

  await page.getByLabel('Password').fill(user.password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL(`**/app/p/${project.id}/setup`);
  expect(await page.getByRole('combobox', { name: 'Project' }).inputValue()).toBe(project.id);
});

test.each([LAPTOP, PHONE])('the password reset page asks for the email and answers an unknown one as it would a known one (%i px)', async (width) => {
  const page = await (await dash.context(width)).newPage();
  await page.goto('/app/reset');
  await page.getByRole('heading', { name: /reset/i }).waitFor();
  expect(await seriousViolations(page)).toEqual([]);
  await screenshot(page, 'auth-reset');
  await page.getByLabel('Email').fill(`nobody-${width}@example.com`);
  await page.getByRole('button', { name: 'Email me a link' }).click();
  await page.getByRole('status').filter({ hasText: /email/i }).waitFor();
});

import type { Page } from 'playwright-core';
import type { ProjectWithKeys } from '../../db/projects/projects';
import { addTestMember, createTestUser, type TestUser } from '../helpers/accounts';
import { type Dashboard, LAPTOP, PHONE, screenshot, seriousViolations, startDashboard } from '../helpers/dashboard';
import { type DnsServer, startDnsServer } from '../helpers/dns';
import { bearer } from '../helpers/env';
import { type BuiltJourney, buildJourney } from '../helpers/journeys';
import { verifiedDomain } from '../helpers/sending';
import { type SmtpSink, startSmtpSink } from '../helpers/smtp';

/**
 * A test run from the journey editor: the real Temporal execution of a disabled journey for a
 * chosen contact, an hour's delay passed in a second (3600×), a WAIT_FOR_EVENT released by an event
 * simulated from the menu, then a SEND_EMAIL that really sends; each step lights up on the graph.
 */
// Its own name: a domain belongs to one project, and the API's test-run tests register one too.
const DOMAIN = 'dash-test-runs.test';

let dash: Dashboard;
let dns: DnsServer;
let smtp: SmtpSink;
let user: TestUser;
let project: ProjectWithKeys;
let journey: BuiltJourney;

beforeAll(async () => {
  dns = await startDnsServer();
  smtp = await startSmtpSink();
  dash = await startDashboard({ DNS_SERVERS: dns.address, SMTP_URL: smtp.url, DOMAIN_CHECK_INTERVAL_SECONDS: '1' });
  user = await createTestUser(dash.env);
  project = await dash.env.project('Test runs');
  await addTestMember(dash.env, project.id, user.id, 'OWNER');
  await verifiedDomain(dash.env, dns, project, DOMAIN);
  const auth = bearer(project.secretKey);

  const template = await dash.env.http().post('/templates').set(auth).send({
    name: 'Thanks for coming',
    subject: 'Thanks for coming, {{email}}',
    body: '<p>Here are the slides.</p>',
    from: `team@${DOMAIN}`,
  });
  expect(template.status).toBe(201);
  journey = await buildJourney(dash.env, project, {
    eventName: 'demo-booked',
    steps: [
      { key: 'delay', type: 'DELAY', config: { amount: 1, unit: 'hours' } },
      { key: 'wait', type: 'WAIT_FOR_EVENT', config: { eventName: 'demo-attended', timeout: 7 * 86400 } },
      { key: 'send', type: 'SEND_EMAIL', config: { templateId: template.body.id } },
      { key: 'exit', type: 'EXIT', config: { reason: 'no show' } },
    ],
    transitions: [
      ['trigger', 'delay'],
      ['delay', 'wait'],
      ['wait', 'send', 'event'],
      ['wait', 'exit', 'timeout'],
    ],
    // A test run needs a valid graph, not an enabled journey.
    enable: false,
  });
});

afterAll(async () => {
  await dash?.close();
  await smtp?.close();
  await dns?.close();
});

const stepNode = (page: Page, key: string) => page.locator(`.react-flow__node[data-id="${journey.stepIds[key]}"] .step-node`);

test.each([LAPTOP, PHONE])('a compressed test run lights up its steps and takes a simulated event (%i px)', async (width) => {
  const email = `visitor-${width}@example.com`;
  const created = await dash.env.http().post('/contacts').set(bearer(project.secretKey)).send({ email });
  expect(created.status).toBe(201);

  const page = await dash.signedIn(user, width);
  await page.goto(`/app/p/${project.id}/journeys/${journey.id}`);
  await stepNode(page, 'send').waitFor();
  await page.getByRole('tab', { name: 'Test run' }).click();

  await page.getByLabel('Find a contact by email').fill(`visitor-${width}`);
  await page.getByRole('button', { name: `Choose ${email}` }).click();
  await page.getByLabel('Time scale').selectOption({ label: '1 hour → 1 second (3600×)' });
  await page.getByRole('button', { name: `Start test run for ${email}` }).click();

  // The hour passes in about a second; then the run waits for demo-attended, drawn as where it is.
  const status = page.getByRole('region', { name: 'Test run' }).getByRole('status');
  await status.filter({ hasText: 'Waiting for demo-attended…' }).waitFor({ timeout: 15_000 });
  await stepNode(page, 'wait').and(page.locator('.run-current')).waitFor();
  await stepNode(page, 'delay').and(page.locator('.run-visited')).waitFor();
  await page.getByRole('region', { name: 'Test run' }).getByText('test run · 3600×').waitFor();
  expect(await page.getByLabel('Event to simulate').inputValue()).toBe('demo-attended');
  expect(await page.getByLabel('Event to simulate').locator('option').allTextContents()).toEqual(expect.arrayContaining(['demo-attended', 'email.opened']));
  expect(await seriousViolations(page)).toEqual([]);
  await screenshot(page, 'journeys-test-run');

  await page.getByRole('button', { name: 'Send event' }).click();
  await page.getByRole('status').filter({ hasText: 'Sent demo-attended to the run.' }).waitFor();
  await status.filter({ hasText: 'Ended: completed.' }).waitFor({ timeout: 15_000 });
  for (const key of ['trigger', 'delay', 'wait', 'send']) await stepNode(page, key).and(page.locator('.run-visited')).waitFor();
  await stepNode(page, 'exit').and(page.locator('.run-unvisited')).waitFor();
  expect(await page.locator('.react-flow__edge.is-taken').count()).toBe(3);
  expect(await seriousViolations(page)).toEqual([]);
  await screenshot(page, 'journeys-test-run-done');

  // The email went out for real, and the run is listed as a test run with its scale.
  const [message] = (await smtp.waitFor(1, 15_000)).filter((m) => m.envelope.to.includes(email));
  expect(message).toBeDefined();
  const runs = await dash.env.http().get(`/workflows/${journey.id}/executions?test=true`).set(bearer(project.secretKey));
  const run = (runs.body.data as Array<{ id: string; contactId: string; test: boolean; timeScale: number; status: string }>).find(
    (r) => r.contactId === created.body.id,
  );
  expect(run).toMatchObject({ test: true, timeScale: 3600, status: 'COMPLETED' });
  const detail = await dash.env.http().get(`/workflows/${journey.id}/executions/${run!.id}`).set(bearer(project.secretKey));
  const delay = (detail.body.steps as Array<{ stepType: string; startedAt: string; finishedAt: string }>).find((s) => s.stepType === 'DELAY')!;
  const lasted = Date.parse(delay.finishedAt) - Date.parse(delay.startedAt);
  // An hour at 3600× is a second (with the timer's and the worker's own latency on top).
  expect(lasted).toBeGreaterThanOrEqual(900);
  expect(lasted).toBeLessThan(10_000);
});

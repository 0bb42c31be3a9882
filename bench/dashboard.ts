/**
 * The dashboard's budgets:
 *  - the first page's JavaScript, gzipped (goal ≤ 250 KB): the scripts and preloads dist/web/index.html loads;
 *  - what the app's build adds to `npm ci` (goal ≤ 60 s): `vite build` from a clean output and cache,
 *    beside the TypeScript build of the service in the same run for scale;
 *  - every page's data requests with 100,000 contacts (goal p95 < 200 ms): the GET requests each page
 *    makes on opening, signed in with a session cookie as the app is, one after another.
 *
 *   npx tsx bench/dashboard.ts [--contacts 100000] [--events 20000] [--emails 2000] [--repeat 40]
 *                              [--topology start|split] [--only budgets|requests]
 *
 * The data goes in through the API's own write paths (POST /contacts, /v1/track, /v1/send) on a fresh
 * database, then ANALYZE; the requests run after it, each `--repeat` times after two unmeasured ones.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { gzipSync } from 'node:zlib';
import { query } from '../db/sql';
import { runBench, startStack, type Stack, topologyOption, verifiedDomain } from './harness';
import { closedLoop, environmentLine, log, percentile, printResult, positiveInt } from './support';

const ROOT = path.resolve(__dirname, '..');

function options() {
  const { values } = parseArgs({
    options: {
      contacts: { type: 'string', default: '100000' },
      events: { type: 'string', default: '20000' },
      emails: { type: 'string', default: '2000' },
      repeat: { type: 'string', default: '40' },
      topology: { type: 'string' },
      only: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    process.stdout.write(
      'Usage: npx tsx bench/dashboard.ts [--contacts 100000] [--events 20000] [--emails 2000] [--repeat 40] [--topology start|split] [--only budgets|requests]\n',
    );
    process.exit(0);
  }
  if (values.only !== undefined && values.only !== 'budgets' && values.only !== 'requests') throw new Error('--only is budgets or requests');
  return {
    contacts: positiveInt('contacts', values.contacts),
    events: positiveInt('events', values.events),
    emails: positiveInt('emails', values.emails),
    repeat: positiveInt('repeat', values.repeat),
    topology: topologyOption(values, 'start'),
    only: values.only as 'budgets' | 'requests' | undefined,
  };
}

/** Gzipped bytes of what index.html makes the browser fetch before the first page shows. */
function firstPageJavaScript(dir: string): { files: string[]; gzipBytes: number } {
  const html = readFileSync(path.join(dir, 'index.html'), 'utf8');
  const files = [...html.matchAll(/(?:src|href)="\/app\/(assets\/[^"]+\.js)"/g)].map((m) => m[1]!);
  const gzipBytes = files.reduce((sum, file) => sum + gzipSync(readFileSync(path.join(dir, file)), { level: 9 }).length, 0);
  return { files, gzipBytes };
}

function seconds(run: () => void): number {
  const start = process.hrtime.bigint();
  run();
  return Number(process.hrtime.bigint() - start) / 1e9;
}

function budgets() {
  const outDir = mkdtempSync(path.join(os.tmpdir(), 'tidings-web-'));
  try {
    rmSync(path.join(ROOT, 'node_modules', '.vite'), { recursive: true, force: true });
    const npx = (args: string[]) => execFileSync('npx', args, { cwd: ROOT, stdio: ['ignore', 'ignore', 'inherit'] });
    const webSeconds = seconds(() => npx(['vite', 'build', '--config', 'web/vite.config.ts', '--logLevel', 'warn', '--outDir', outDir, '--emptyOutDir']));
    const serviceSeconds = seconds(() => npx(['tsc', '-p', 'tsconfig.build.json', '--outDir', path.join(outDir, 'tsc')]));
    const first = firstPageJavaScript(outDir);
    log(`first page: ${first.files.join(', ')}`);
    return { webSeconds, serviceSeconds, firstPageKb: first.gzipBytes / 1024 };
  } finally {
    rmSync(outDir, { recursive: true, force: true });
  }
}

interface Seeded {
  projectId: string;
  contactId: string;
  segmentId: string;
  campaignId: string;
  templateId: string;
  journeyId: string;
  cookie: string;
}

async function expectOk(stack: Stack, method: string, url: string, body?: unknown): Promise<unknown> {
  const res = await stack.client.request(method, url, body);
  if (res.status >= 300) throw new Error(`${method} ${url}: ${res.status} ${res.text}`);
  return res.body;
}

/** A project like a user's after a while: contacts with data, tracked events, sent mail, a segment, a campaign, a journey. */
async function seed(stack: Stack, opts: ReturnType<typeof options>): Promise<Seeded> {
  const plans = ['free', 'starter', 'pro', 'enterprise'];
  let started = Date.now();
  await closedLoop(opts.contacts, 16, async (i) => {
    await expectOk(stack, 'POST', '/contacts', {
      email: `user${i}@bench.example.com`,
      subscribed: i % 5 !== 0,
      data: { name: `User ${i}`, plan: plans[i % plans.length], company: `Company ${i % 997}`, seats: i % 50, trialEnds: new Date(Date.UTC(2027, 0, 1 + (i % 300))).toISOString() },
    });
  });
  log(`${opts.contacts} contacts in ${((Date.now() - started) / 1000).toFixed(0)} s`);
  started = Date.now();
  const names = ['signed_up', 'activated', 'invited_teammate', 'upgraded', 'exported', 'viewed_pricing', 'created_report', 'logged_in'];
  await closedLoop(opts.events, 16, async (i) => {
    await expectOk(stack, 'POST', '/v1/track', { email: `user${(i * 7919) % opts.contacts}@bench.example.com`, event: names[i % names.length], data: { n: i } });
  });
  log(`${opts.events} events in ${((Date.now() - started) / 1000).toFixed(0)} s`);
  await verifiedDomain(stack, 'bench.example.com');
  started = Date.now();
  await closedLoop(opts.emails, 16, async (i) => {
    await expectOk(stack, 'POST', '/v1/send', {
      to: `user${(i * 104729) % opts.contacts}@bench.example.com`,
      from: 'news@bench.example.com',
      subject: 'Hello {{name}}',
      body: '<p>Hi {{name}}, your plan is {{plan}}.</p>',
    });
  });
  log(`${opts.emails} emails accepted in ${((Date.now() - started) / 1000).toFixed(0)} s`);
  const template = (await expectOk(stack, 'POST', '/templates', {
    name: 'Welcome',
    subject: 'Welcome, {{name}}',
    body: '<p>Hello {{name}} from {{company}}</p>',
    from: 'news@bench.example.com',
  })) as { id: string };
  const segment = (await expectOk(stack, 'POST', '/segments', {
    name: 'Pro plans',
    type: 'DYNAMIC',
    condition: { field: 'data.plan', operator: 'equals', value: 'pro' },
  })) as { id: string };
  const campaign = (await expectOk(stack, 'POST', '/campaigns', {
    name: 'Spring news',
    subject: 'News for {{name}}',
    body: '<p>News</p>',
    from: 'news@bench.example.com',
    segmentId: segment.id,
  })) as { id: string };
  const journey = (await expectOk(stack, 'POST', '/workflows', { name: 'Welcome', eventName: 'signed_up' })) as { id: string };
  const contact = (await expectOk(stack, 'GET', `/contacts?search=${encodeURIComponent(`user${Math.floor(opts.contacts / 2)}@`)}`)) as {
    data: Array<{ id: string }>;
  };
  await stack.orm.em.fork().getConnection().execute('analyze contacts, events, emails, segments, campaigns, workflow_executions');

  const email = `owner-${Date.now()}@bench.example.com`;
  const signup = await fetch(`http://127.0.0.1:${stack.port}/auth/signup`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email, password: 'correct horse battery staple', name: 'Owner' }),
  });
  if (signup.status !== 201) throw new Error(`POST /auth/signup: ${signup.status} ${await signup.text()}`);
  const cookie = signup.headers.getSetCookie().map((c) => c.split(';')[0]).join('; ');
  const me = (await signup.json()) as { user: { id: string } };
  await query(stack.orm.em.fork(), `insert into project_members (project_id, user_id, role) values (?, ?, 'OWNER')`, [stack.project.id, me.user.id]);
  return {
    projectId: stack.project.id,
    contactId: contact.data[0]!.id,
    segmentId: segment.id,
    campaignId: campaign.id,
    templateId: template.id,
    journeyId: journey.id,
    cookie,
  };
}

interface DataRequest {
  method: 'GET' | 'POST';
  path: string;
  body?: unknown;
}

const get = (path: string): DataRequest => ({ method: 'GET', path });
const post = (path: string, body: unknown): DataRequest => ({ method: 'POST', path, body });

/** What each page asks for when it opens or as it is used (web/src/pages): the live previews too. */
function pages(s: Seeded): Array<[page: string, requests: DataRequest[]]> {
  const p = s.projectId;
  const condition = { field: 'data.plan', operator: 'equals', value: 'pro' };
  return [
    ['setup', [get('/users/@me'), get(`/projects/${p}/setup-state`), get('/config')]],
    [
      'contacts',
      [
        get('/contacts?limit=20'),
        get('/contacts?limit=20&search=user4242'),
        get('/contacts?limit=20&subscribed=false'),
        get(`/contacts?limit=20&condition=${encodeURIComponent(JSON.stringify(condition))}`),
        get('/contacts/fields'),
        get('/segments'),
      ],
    ],
    ['contact', [get(`/contacts/${s.contactId}`), get(`/events/contact/${s.contactId}`), get(`/emails?contactId=${s.contactId}`)]],
    ['templates', [get('/templates'), get(`/templates/${s.templateId}`), post('/templates/preview', { subject: 'Hi {{name}}', body: '<p>{{name}} at {{company}}</p>', contactId: s.contactId })]],
    [
      'segments',
      [get('/segments'), get(`/segments/${s.segmentId}`), get(`/segments/${s.segmentId}/contacts?page=1&pageSize=20`), post('/segments/preview', { condition, limit: 5 })],
    ],
    ['campaigns', [get('/campaigns'), get(`/campaigns/${s.campaignId}`), get(`/campaigns/${s.campaignId}/stats`), get(`/campaigns/audience?segmentId=${s.segmentId}`)]],
    ['journeys', [get('/workflows'), get(`/workflows/${s.journeyId}`), get(`/workflows/${s.journeyId}/executions`), get('/events/names'), get('/events/system')]],
    ['analytics', [get('/analytics/timeseries?metric=all'), get('/analytics/top-events'), get('/analytics/top-campaigns')]],
    ['activity', [get('/activity'), get('/activity/recent-count'), get('/activity/types'), get('/activity/upcoming')]],
    ['domains', [get(`/domains/project/${p}`)]],
    [
      'settings',
      [get('/users/@me/projects'), get(`/projects/${p}/members`), get(`/users/@me/projects/${p}/billing-limits`), get(`/users/@me/projects/${p}/billing-consumption`)],
    ],
  ];
}

interface Timing {
  page: string;
  request: string;
  status: number;
  p50: number;
  p95: number;
}

async function timeRequests(stack: Stack, seeded: Seeded, repeat: number): Promise<Timing[]> {
  const headers = { cookie: seeded.cookie, 'x-project-id': seeded.projectId, accept: 'application/json', 'content-type': 'application/json' };
  const timings: Timing[] = [];
  for (const [page, requests] of pages(seeded)) {
    for (const r of requests) {
      const samples = new Float64Array(repeat);
      let status = 0;
      for (let i = -2; i < repeat; i++) {
        const start = process.hrtime.bigint();
        const res = await fetch(`http://127.0.0.1:${stack.port}${r.path}`, { method: r.method, headers, body: r.body === undefined ? undefined : JSON.stringify(r.body) });
        await res.arrayBuffer();
        status = res.status;
        if (i >= 0) samples[i] = Number(process.hrtime.bigint() - start) / 1e6;
      }
      samples.sort();
      const ids: Array<[string, string]> = [
        [seeded.projectId, ':projectId'],
        [seeded.contactId, ':contactId'],
        [seeded.segmentId, ':segmentId'],
        [seeded.campaignId, ':campaignId'],
        [seeded.templateId, ':templateId'],
        [seeded.journeyId, ':journeyId'],
      ];
      const shown = ids.reduce((text, [id, name]) => text.replaceAll(id, name), `${r.method} ${decodeURIComponent(r.path)}`);
      timings.push({ page, request: shown, status, p50: percentile(samples, 50), p95: percentile(samples, 95) });
    }
  }
  return timings;
}

runBench(async (teardown, stop) => {
  const opts = options();
  const result: Record<string, unknown> = { bench: 'dashboard' };
  if (opts.only !== 'requests') {
    const b = budgets();
    process.stdout.write(
      [
        'Dashboard budgets',
        `  first page JavaScript  ${b.firstPageKb.toFixed(1)} KB gzipped   (goal ≤ 250 KB: ${b.firstPageKb <= 250 ? 'met' : 'NOT met'})`,
        `  app build              ${b.webSeconds.toFixed(1)} s, added to npm ci (goal ≤ 60 s: ${b.webSeconds <= 60 ? 'met' : 'NOT met'}); the service's tsc build: ${b.serviceSeconds.toFixed(1)} s`,
        '',
      ].join('\n'),
    );
    Object.assign(result, b);
  }
  if (opts.only !== 'budgets') {
    const stack = await startStack({ teardown, checkpoint: stop.checkpoint, concurrency: 16, topology: opts.topology });
    const seeded = await seed(stack, opts);
    stop.checkpoint();
    const timings = await timeRequests(stack, seeded, opts.repeat);
    const pg = await stack.orm.em.fork().getConnection().execute<{ v: string }[]>("select current_setting('server_version') as v");
    const slow = timings.filter((t) => t.p95 >= 200 || t.status >= 300);
    process.stdout.write(
      [
        `Dashboard data requests, ${opts.contacts.toLocaleString('en')} contacts, ${opts.events.toLocaleString('en')} events, ${opts.emails.toLocaleString('en')} emails; ${opts.topology}; ${opts.repeat} each, one at a time`,
        `  ${environmentLine(pg[0]!.v)}`,
        '  page        status    p50 ms    p95 ms   request',
        ...timings.map((t) => `  ${t.page.padEnd(10)} ${String(t.status).padStart(6)} ${t.p50.toFixed(1).padStart(9)} ${t.p95.toFixed(1).padStart(9)}   ${t.request}`),
        `  goal p95 < 200 ms for every request: ${slow.length === 0 ? 'met' : `NOT met (${slow.map((t) => `${t.request} ${t.status} ${t.p95.toFixed(0)} ms`).join('; ')})`}`,
        '',
      ].join('\n'),
    );
    result.requests = timings;
    result.worstP95 = Math.max(...timings.map((t) => t.p95));
  }
  printResult(result);
});


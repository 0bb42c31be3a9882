import { execFile } from 'node:child_process';
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { dkimVerify } from 'mailauth/lib/dkim/verify';
import { waitUntil } from '../helpers/sending';
import { api, expectCleanStop, freePorts, processesUsing, ROOT, type Service, startService, stopService, waitForHealthy, waitForStderr } from '../helpers/service-process';

/**
 * The README's quick start, run as a newcomer runs it: the service started with nothing configured
 * on a fresh data directory, then the README's own shell block (bash + curl) against it. It must end
 * with a message in the outbox that is DKIM-signed with the domain's key and shown rendered at /outbox.
 */
jest.setTimeout(180_000);
const execFileAsync = promisify(execFile);

let dataDir: string;
let service: Service | undefined;

beforeAll(() => {
  dataDir = mkdtempSync(path.join(os.tmpdir(), 'tidings-quick-start-'));
  // As root the embedded PostgreSQL runs as `postgres`, which must be able to enter the data dir.
  chmodSync(dataDir, 0o755);
});

afterAll(async () => {
  if (service && !service.hasExited()) await stopService(service, 30_000).catch(() => process.kill(-service!.child.pid!, 'SIGKILL'));
  for (const { pid } of await processesUsing(dataDir)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  rmSync(dataDir, { recursive: true, force: true });
});

/** The first bash block under "## Quick start" in README.md. */
function quickStartScript(): string {
  const readme = readFileSync(path.join(ROOT, 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf('## Quick start'));
  const block = /```bash\n([\s\S]*?)```/.exec(section)?.[1];
  if (!block) throw new Error('README.md has no bash block under "## Quick start"');
  return block;
}

/** curl -s prints the answers back to back: `{…}{…}{…}`. */
function splitJson(text: string): Record<string, unknown>[] {
  const docs: Record<string, unknown>[] = [];
  let rest = text.trim();
  while (rest) {
    let end = rest.indexOf('}') + 1;
    for (;;) {
      if (end === 0) throw new Error(`not JSON documents: ${rest.slice(0, 200)}`);
      try {
        docs.push(JSON.parse(rest.slice(0, end)) as Record<string, unknown>);
        break;
      } catch {
        end = rest.indexOf('}', end) + 1;
      }
    }
    rest = rest.slice(end).trim();
  }
  return docs;
}

interface DomainAnswer {
  domain: string;
  status: string;
  sending: { allowed: boolean; reason: string };
  records: { type: string; name: string; value: string }[];
}

test("the README's quick start, on a fresh install with nothing configured, ends with a DKIM-signed, rendered message in the outbox", async () => {
  service = startService(dataDir, await freePorts());
  await waitForHealthy(service);
  // The worker's line may reach this process's pipe after the API answers its health check.
  await waitForStderr(service, 'SMTP_URL is not set: outbox mode');

  const base = api(service, '');
  const script = quickStartScript();
  expect(script).toContain('API=http://localhost:3000');
  const workDir = mkdtempSync(path.join(os.tmpdir(), 'tidings-quick-start-shell-'));
  let stdout: string;
  try {
    ({ stdout } = await execFileAsync('bash', ['-euo', 'pipefail', '-c', script.replace('API=http://localhost:3000', `API=${base}`)], {
      cwd: workDir,
      timeout: 60_000,
    }));
  } finally {
    rmSync(workDir, { recursive: true, force: true });
  }

  const [signup, domain, send] = splitJson(stdout) as [Record<string, unknown>, DomainAnswer, { success: boolean; data: { emails: { email: string }[]; outbox: string } }];
  expect(signup).toMatchObject({ user: { email: 'me@example.com' } });
  expect(domain).toMatchObject({ domain: 'example.com', status: 'pending', sending: { allowed: true } });
  expect(send.success).toBe(true);
  expect(send.data.outbox).toContain('/outbox');
  const emailId = send.data.emails[0]!.email;

  // The .eml as written, verified against the very records the API told the user to publish.
  const outboxDir = path.join(dataDir, 'outbox');
  const file = await waitUntil(async () => readdirSync(outboxDir).find((f) => f.includes(emailId)), 60_000);
  const dkim = await dkimVerify(readFileSync(path.join(outboxDir, file)), {
    resolver: async (name: string) => {
      const record = domain.records.find((r) => r.type === 'TXT' && r.name === name);
      if (!record) throw Object.assign(new Error(`no TXT ${name}`), { code: 'ENOTFOUND' });
      return [[record.value]];
    },
  });
  expect(dkim.results[0]).toMatchObject({ signingDomain: 'example.com', status: { result: 'pass' } });

  // Step 4: the outbox page lists it, and its page shows the Markdown rendered for the contact.
  const list = await (await fetch(`${base}/outbox`)).text();
  const id = file.slice(0, -'.eml'.length);
  expect(list).toContain(`href="/outbox/${id}"`);
  const page = await fetch(`${base}/outbox/${id}`);
  expect(page.status).toBe(200);
  expect(await page.text()).toContain('&lt;h1&gt;Hi ada@example.com&lt;/h1&gt;');

  await expectCleanStop(service);
});

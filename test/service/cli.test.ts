import { KEY_MAX_AGE_MS } from '../../api/middleware/api-keys';
import { createTestUser } from '../helpers/accounts';
import { bearer, startTestEnv, type TestEnv } from '../helpers/env';
import { type CliResult, runCli } from '../helpers/service-process';

/**
 * The real `tidings` CLI as a child process (from source with tsx's loader), against the run's
 * database. Each database command takes ~2-3 s here (start-up, ORM init, migration check).
 */
// Generous: on a busy 2-core machine one start-up alone can take several seconds.
jest.setTimeout(120_000);

/** The run's database, unless a test says otherwise. */
const cli = (args: string[], env: Record<string, string> = {}) =>
  runCli(args, { ...process.env, DATABASE_URL: process.env.TEST_DATABASE_URL, LOG_LEVEL: 'silent', ...env });

interface PrintedProject {
  id: string;
  name: string;
  secretKey: string;
  publicKey: string;
}

function parseProject(result: CliResult): PrintedProject {
  if (result.code !== 0) throw new Error(`CLI exited with ${result.code}\nstderr:\n${result.stderr}`);
  // stdout is nothing but the JSON document: progress and warnings go to stderr.
  const printed = JSON.parse(result.stdout) as PrintedProject;
  expect(Object.keys(printed).sort()).toEqual(['id', 'name', 'publicKey', 'secretKey']);
  return printed;
}

let env: TestEnv;
/** The API's clock: a change the CLI (another process) makes holds there once its readings of keys are this old. */
let offset = 0;
const keyReadingsAged = () => (offset += KEY_MAX_AGE_MS);
beforeAll(async () => {
  env = await startTestEnv({}, { clock: () => new Date(Date.now() + offset) });
});
afterAll(() => env.close());

const listContacts = (key: string) => env.http().get('/contacts').set(bearer(key));
/** A public key is recognised (and refused with its own message) on a secret-key route, an unknown one is not. */
const publicKeyMessage = async (key: string) => (await listContacts(key)).body.error.message as string;

test('project create prints the project and working keys as JSON on stdout', async () => {
  const printed = parseProject(await cli(['project', 'create', 'demo']));
  expect(printed.name).toBe('demo');
  expect(printed.id).toMatch(/^prj_/);
  expect(printed.secretKey).toMatch(/^sk_[0-9a-f]{64}$/);
  expect(printed.publicKey).toMatch(/^pk_[0-9a-f]{64}$/);

  expect((await listContacts(printed.secretKey)).status).toBe(200);
  const created = await env.http().post('/contacts').set(bearer(printed.secretKey)).send({ email: 'cli@example.com' });
  expect(created.status).toBe(201);
  expect(await publicKeyMessage(printed.publicKey)).toMatch(/public key/i);
});

test('project create --owner <email>: the account owns it and sees it in its project list; an unknown owner creates nothing', async () => {
  const user = await createTestUser(env);
  const result = await cli(['project', 'create', 'owned by cli', '--owner', user.email.toUpperCase()]);
  if (result.code !== 0) throw new Error(`CLI exited with ${result.code}\nstderr:\n${result.stderr}`);
  const printed = JSON.parse(result.stdout) as PrintedProject & { role: string };
  expect(printed).toMatchObject({ name: 'owned by cli', role: 'OWNER' });
  expect(printed.secretKey).toMatch(/^sk_[0-9a-f]{64}$/);
  const mine = await env.http().get('/users/@me/projects').set('Cookie', user.cookie);
  expect(mine.status).toBe(200);
  expect(mine.body).toEqual(expect.arrayContaining([expect.objectContaining({ id: printed.id, role: 'OWNER' })]));
  expect((await listContacts(printed.secretKey)).status).toBe(200);

  // Named for this run: other test files create projects in the same database meanwhile.
  const name = `nobody owns this ${Date.now()}`;
  const unknown = await cli(['project', 'create', name, '--owner', 'nobody-here@example.com']);
  expect(unknown.code).toBe(1);
  expect(unknown.stdout).toBe('');
  expect(unknown.stderr).toContain('No account uses the email nobody-here@example.com; sign up first');
  const named = await env.orm.em.fork().getConnection().execute(`select count(*)::int as n from projects where name = ?`, [name]);
  expect(named).toEqual([{ n: 0 }]);
});

test('project rotate-keys prints new keys; the old ones stop working within a second', async () => {
  const before = parseProject(await cli(['project', 'create', 'rotating']));
  expect((await listContacts(before.secretKey)).status).toBe(200);

  const after = parseProject(await cli(['project', 'rotate-keys', before.id]));
  expect(after).toMatchObject({ id: before.id, name: 'rotating' });
  expect(after.secretKey).not.toBe(before.secretKey);
  expect(after.publicKey).not.toBe(before.publicKey);

  keyReadingsAged();
  const old = await listContacts(before.secretKey);
  expect(old.status).toBe(401);
  expect(old.body.error.code).toBe('INVALID_API_KEY');
  expect((await listContacts(after.secretKey)).status).toBe(200);
  expect(await publicKeyMessage(before.publicKey)).toBe('The API key is not valid');
  expect(await publicKeyMessage(after.publicKey)).toMatch(/public key/i);
});

test('project rotate-keys with an unknown id fails with a clear message', async () => {
  const result = await cli(['project', 'rotate-keys', 'prj_doesnotexist']);
  expect(result.code).not.toBe(0);
  expect(result.stdout).toBe('');
  expect(result.stderr).toContain('No project with id "prj_doesnotexist"');
  expect(result.stderr).not.toMatch(/\n\s+at /); // a message, not a stack trace
});

describe('usage', () => {
  // No database is touched on these paths; run them side by side to save tsx start-ups.
  let results: Record<string, CliResult>;
  const cases: Record<string, string[]> = {
    none: [],
    unknown: ['frobnicate'],
    help: ['--help'],
    startHelp: ['start', '--help'],
    badStartFlag: ['start', '--bogus'],
    createWithoutName: ['project', 'create'],
    ownerWithoutEmail: ['project', 'create', 'x', '--owner'],
    unknownSub: ['project', 'frob', 'x'],
  };
  beforeAll(async () => {
    // DATABASE_URL pointing nowhere: any attempt to reach a database (or start one) would fail loudly.
    // Three at a time: enough to overlap tsx start-ups without swamping two cores.
    const queue = Object.entries(cases);
    results = {};
    await Promise.all(
      Array.from({ length: 3 }, async () => {
        for (let item = queue.shift(); item; item = queue.shift()) {
          results[item[0]] = await cli(item[1], { DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none' });
        }
      }),
    );
  }, 120_000);

  test('no arguments: usage on stderr, exit 1', () => {
    expect(results.none!.code).toBe(1);
    expect(results.none!.stderr).toContain('Usage: tidings <command>');
    expect(results.none!.stdout).toBe('');
  });

  test('unknown command: names it, usage, exit 1', () => {
    expect(results.unknown!.code).toBe(1);
    expect(results.unknown!.stderr).toContain('Unknown command: frobnicate');
    expect(results.unknown!.stderr).toContain('Usage: tidings <command>');
  });

  test('--help: usage on stdout, exit 0, also after a command (start --help does not start)', () => {
    for (const r of [results.help!, results.startHelp!]) {
      expect(r.code).toBe(0);
      expect(r.stdout).toContain('Usage: tidings <command>');
      expect(r.stdout).toContain('project rotate-keys <projectId>');
      expect(r.stderr).toBe('');
    }
  });

  test('bad arguments of known commands: a specific message and exit 1', () => {
    expect(results.badStartFlag!.code).toBe(1);
    expect(results.badStartFlag!.stderr).toContain('Unknown option for start: --bogus');
    expect(results.createWithoutName!.code).toBe(1);
    expect(results.createWithoutName!.stderr).toContain('project create needs a project name');
    expect(results.ownerWithoutEmail!.code).toBe(1);
    expect(results.ownerWithoutEmail!.stderr).toContain('--owner needs the email of an account');
    expect(results.unknownSub!.code).toBe(1);
    expect(results.unknownSub!.stderr).toContain('Unknown project subcommand: frob');
  });
});

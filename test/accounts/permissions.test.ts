import { newId } from '../../db/ids';
import type { ProjectWithKeys } from '../../db/projects/projects';
import { generateDkimKeyPair } from '../../mail/dkim';
import { query } from '../../db/sql';
import { addTestMember, asMember, createTestUser, type TestUser } from '../helpers/accounts';
import { bearer } from '../helpers/env';
import { type SendingEnv, startSendingEnv } from '../helpers/sending';

/**
 * The permission table (docs/accounts-and-roles.md), one row per action, one column per actor.
 * Every cell is requested against a fresh project, so destructive rows cannot affect each other.
 */

type Actor = 'OWNER' | 'ADMIN' | 'MEMBER' | 'non-member' | 'secret key';
const ACTORS: Actor[] = ['OWNER', 'ADMIN', 'MEMBER', 'non-member', 'secret key'];

/** A success status, a 403 code, 401, or null where the cell does not apply. */
type Outcome = number | 'FORBIDDEN' | 'PROJECT_ACCESS_DENIED' | 'OWNER_IMMUTABLE' | 401 | null;

interface Fixture {
  project: ProjectWithKeys;
  /** Registered through the API (pending, with its verification workflow), for the rows that act on it. */
  domainId: string | undefined;
  /** Written as verified (no workflow to re-check it), for campaigns and sends. */
  sender: string;
  /** A plain member who is not one of the actors (the target of "remove another member"). */
  target: TestUser;
}

interface Row {
  action: string;
  method: 'get' | 'post' | 'put' | 'patch' | 'delete';
  path: (f: Fixture, self: string | undefined) => string;
  body?: (f: Fixture) => object;
  expected: Record<Actor, Outcome>;
  /** The row acts on a registered domain (f.domainId). */
  domain?: true;
}

const DENIED = 'PROJECT_ACCESS_DENIED' as const;
/** Open to every member and to the project's secret key. */
const anyMember = (ok: number): Record<Actor, Outcome> => ({ OWNER: ok, ADMIN: ok, MEMBER: ok, 'non-member': DENIED, 'secret key': ok });
/** OWNER / ADMIN, and the secret key (counts as ADMIN). */
const admins = (ok: number): Record<Actor, Outcome> => ({ OWNER: ok, ADMIN: ok, MEMBER: 'FORBIDDEN', 'non-member': DENIED, 'secret key': ok });

const me = (f: Fixture) => `/users/@me/projects/${f.project.id}`;
const members = (f: Fixture) => `/projects/${f.project.id}/members`;

const ROWS: Row[] = [
  // Project data: every member, and the key.
  { action: 'read contacts', method: 'get', path: () => '/contacts', expected: anyMember(200) },
  { action: 'write contacts', method: 'post', path: () => '/contacts', body: () => ({ email: 'x@y.io' }), expected: anyMember(201) },
  { action: 'track events', method: 'post', path: () => '/events/track', body: () => ({ event: 'e', email: 'x@y.io' }), expected: anyMember(200) },
  { action: 'write templates', method: 'post', path: () => '/templates', body: () => ({ name: 't', subject: 's', body: 'b' }), expected: anyMember(201) },
  {
    action: 'write segments',
    method: 'post',
    path: () => '/segments',
    body: () => ({ name: 's', condition: { field: 'subscribed', operator: 'equals', value: true } }),
    expected: anyMember(201),
  },
  { action: 'write workflows', method: 'post', path: () => '/workflows', body: () => ({ name: 'w', eventName: 'e' }), expected: anyMember(201) },
  {
    action: 'write campaigns',
    method: 'post',
    path: () => '/campaigns',
    body: (f) => ({ name: 'c', subject: 's', body: 'b', from: f.sender }),
    expected: anyMember(201),
  },
  {
    action: 'send email',
    method: 'post',
    path: () => '/v1/send',
    body: (f) => ({ to: 'x@y.io', from: f.sender, subject: 's', body: 'b' }),
    expected: anyMember(200),
  },
  { action: 'list domains', method: 'get', path: (f) => `/domains/project/${f.project.id}`, expected: anyMember(200) },
  // Domains: OWNER / ADMIN.
  { action: 'add a domain', method: 'post', path: () => '/domains', body: (f) => ({ domain: `new-${f.project.id.slice(-12)}.test` }), expected: admins(201) },
  { action: 'verify a domain now', method: 'get', path: (f) => `/domains/${f.domainId}/verify`, expected: admins(200), domain: true },
  { action: 'delete a domain', method: 'delete', path: (f) => `/domains/${f.domainId}`, expected: admins(200), domain: true },
  // Members.
  { action: 'list members', method: 'get', path: members, expected: anyMember(200) },
  { action: 'add a member', method: 'post', path: members, body: () => ({ email: outsider.email, role: 'MEMBER' }), expected: admins(201) },
  {
    action: "change a member's role",
    method: 'patch',
    path: (f) => `${members(f)}/${f.target.id}`,
    body: () => ({ role: 'ADMIN' }),
    expected: admins(200),
  },
  {
    action: 'hand ownership to another member',
    method: 'patch',
    path: (f) => `${members(f)}/${f.target.id}`,
    body: () => ({ role: 'OWNER' }),
    expected: { OWNER: 200, ADMIN: 'OWNER_IMMUTABLE', MEMBER: 'FORBIDDEN', 'non-member': DENIED, 'secret key': 'OWNER_IMMUTABLE' },
  },
  { action: 'remove another member', method: 'delete', path: (f) => `${members(f)}/${f.target.id}`, expected: admins(204) },
  {
    action: 'leave the project (remove oneself)',
    method: 'delete',
    path: (f, self) => `${members(f)}/${self}`,
    expected: { OWNER: 'OWNER_IMMUTABLE', ADMIN: 204, MEMBER: 204, 'non-member': DENIED, 'secret key': null },
  },
  // The project itself.
  { action: 'setup state', method: 'get', path: (f) => `/projects/${f.project.id}/setup-state`, expected: anyMember(200) },
  { action: 'security (project route)', method: 'get', path: (f) => `/projects/${f.project.id}/security`, expected: anyMember(200) },
  { action: 'security (user route)', method: 'get', path: (f) => `${me(f)}/security`, expected: anyMember(200) },
  { action: 'rename the project', method: 'patch', path: me, body: () => ({ name: 'Renamed' }), expected: admins(200) },
  { action: 'regenerate keys', method: 'post', path: (f) => `${me(f)}/regenerate-keys`, expected: admins(200) },
  { action: 'reset the project', method: 'post', path: (f) => `${me(f)}/reset`, body: () => ({ confirm: 'Perms' }), expected: admins(200) },
  {
    action: 'delete the project',
    method: 'delete',
    path: me,
    expected: { OWNER: 200, ADMIN: 'FORBIDDEN', MEMBER: 'FORBIDDEN', 'non-member': DENIED, 'secret key': 'FORBIDDEN' },
  },
  // Billing (routes of the billing module).
  { action: 'read billing limits', method: 'get', path: (f) => `${me(f)}/billing-limits`, expected: anyMember(200) },
  { action: 'set billing limits', method: 'put', path: (f) => `${me(f)}/billing-limits`, body: () => ({ campaign: 1000 }), expected: admins(200) },
];

let sending: SendingEnv;
let users: Record<Exclude<Actor, 'secret key'>, TestUser>;
let outsider: TestUser;
let target: TestUser;
/** One DKIM key for every fixture's verified sender: generating RSA keys is the slow part of a fixture. */
let senderKeys: Awaited<ReturnType<typeof generateDkimKeyPair>>;

beforeAll(async () => {
  sending = await startSendingEnv();
  senderKeys = await generateDkimKeyPair();
  const [owner, admin, member, nonMember, o, t] = await Promise.all(Array.from({ length: 6 }, () => createTestUser(sending.env)));
  users = { OWNER: owner!, ADMIN: admin!, MEMBER: member!, 'non-member': nonMember! };
  outsider = o!;
  target = t!;
});
afterAll(() => sending.close());

/** A fresh project named "Perms" with the three member actors, a plain member, a verified sender and, if asked, a registered domain. */
async function fixture(withDomain = false): Promise<Fixture> {
  const { env } = sending;
  const project = await env.project('Perms');
  await addTestMember(env, project.id, users.OWNER.id, 'OWNER');
  await addTestMember(env, project.id, users.ADMIN.id, 'ADMIN');
  await addTestMember(env, project.id, users.MEMBER.id, 'MEMBER');
  await addTestMember(env, project.id, target.id, 'MEMBER');
  let domainId: string | undefined;
  if (withDomain) {
    const domain = await env.http().post('/domains').set(bearer(project.secretKey)).send({ domain: `${project.id.slice(-12)}.perms.test` });
    expect(domain.status).toBe(201);
    domainId = domain.body.id;
  }
  const sender = `${project.id.slice(-12)}.sender.test`;
  await query(
    env.orm.em.fork(),
    `insert into domains (id, project_id, domain, status, dkim_selector, dkim_private_key, dkim_public_key, verified_at)
     values (?, ?, ?, 'verified', ?, ?, ?, now())`,
    [newId('dom'), project.id, sender, senderKeys.selector, senderKeys.privateKeyPem, senderKeys.publicKeyBase64],
  );
  return { project, domainId, sender: `me@${sender}`, target };
}

const cells = ROWS.flatMap((row) => ACTORS.filter((actor) => row.expected[actor] !== null).map((actor) => [row.action, actor, row] as const));

test.each(cells)('%s as %s', async (_action, actor, row) => {
  const f = await fixture(row.domain);
  const headers = actor === 'secret key' ? bearer(f.project.secretKey) : asMember(users[actor], f.project.id);
  const self = actor === 'secret key' ? undefined : users[actor].id;
  let req = sending.env.http()[row.method](row.path(f, self)).set(headers);
  if (row.body) req = req.send(row.body(f));
  const res = await req;
  const expected = row.expected[actor]!;
  const got = res.status < 400 ? res.status : res.status === 401 ? 401 : res.body.error?.code;
  expect({ status: res.status, outcome: got }).toEqual({ status: typeof expected === 'number' ? expected : 403, outcome: expected });
  // A refused change leaves the project as it was: it still exists with its name and members.
  if (typeof expected !== 'number' || expected === 401) {
    const [project] = await query<{ name: string; members: number }>(
      sending.env.orm.em.fork(),
      'select name, (select count(*)::int from project_members where project_id = p.id) as members from projects p where id = ?',
      [f.project.id],
    );
    expect(project).toEqual({ name: 'Perms', members: 4 });
  }
});

test('a secret key of another project is refused on every route that names a project (403 PROJECT_ACCESS_DENIED)', async () => {
  const f = await fixture();
  const other = await sending.env.project();
  const namesProject = (path: string) => ['/projects/', '/users/@me/projects/', '/domains/project/'].some((p) => path.startsWith(p));
  for (const row of ROWS.filter((r) => namesProject(r.path(f, undefined)))) {
    let req = sending.env.http()[row.method](row.path(f, undefined)).set(bearer(other.secretKey));
    if (row.body) req = req.send(row.body(f));
    const res = await req;
    const code = row.path(f, undefined).startsWith('/domains/project/') ? 'PROJECT_NOT_FOUND' : DENIED;
    expect([row.action, res.body.error?.code]).toEqual([row.action, code]);
  }
});

import { addTestMember, asMember, createTestUser, type TestUser } from '../helpers/accounts';
import { bearer, startTestEnv, type TestEnv } from '../helpers/env';
import type { ProjectWithKeys } from '../../db/projects/projects';

let env: TestEnv;
beforeAll(async () => {
  env = await startTestEnv();
});
afterAll(() => env.close());

interface Team {
  project: ProjectWithKeys;
  owner: TestUser;
  admin: TestUser;
  member: TestUser;
}

async function team(): Promise<Team> {
  const project = await env.project('Team');
  const [owner, admin, member] = await Promise.all([createTestUser(env), createTestUser(env), createTestUser(env)]);
  await addTestMember(env, project.id, owner.id, 'OWNER');
  await addTestMember(env, project.id, admin.id, 'ADMIN');
  await addTestMember(env, project.id, member.id, 'MEMBER');
  return { project, owner, admin, member };
}

const members = async (t: Team) => {
  const res = await env.http().get(`/projects/${t.project.id}/members`).set(asMember(t.member, t.project.id));
  expect(res.status).toBe(200);
  return (res.body as { userId: string; role: string }[]).map((m) => [m.userId, m.role]);
};

test('any member lists the members, owner first, with email and role', async () => {
  const t = await team();
  const res = await env.http().get(`/projects/${t.project.id}/members`).set(asMember(t.member, t.project.id));
  expect(res.status).toBe(200);
  expect(res.body[0]).toEqual({ userId: t.owner.id, email: t.owner.email, name: null, role: 'OWNER', joinedAt: expect.any(String) });
  expect(await members(t)).toEqual([
    [t.owner.id, 'OWNER'],
    [t.admin.id, 'ADMIN'],
    [t.member.id, 'MEMBER'],
  ]);
  // The project's own secret key too.
  expect((await env.http().get(`/projects/${t.project.id}/members`).set(bearer(t.project.secretKey))).status).toBe(200);
});

test('an admin adds an existing account by email (any case); unknown email 404 USER_NOT_FOUND; twice 409', async () => {
  const t = await team();
  const newcomer = await createTestUser(env);
  const res = await env
    .http()
    .post(`/projects/${t.project.id}/members`)
    .set(asMember(t.admin, t.project.id))
    .send({ email: newcomer.email.toUpperCase(), role: 'ADMIN' });
  expect(res.status).toBe(201);
  expect(res.body).toMatchObject({ userId: newcomer.id, email: newcomer.email, role: 'ADMIN' });
  // The newcomer can now work in the project.
  expect((await env.http().get('/contacts').set(asMember(newcomer, t.project.id))).status).toBe(200);

  const again = await env.http().post(`/projects/${t.project.id}/members`).set(asMember(t.owner, t.project.id)).send({ email: newcomer.email });
  expect([again.status, again.body.error.code]).toEqual([409, 'ALREADY_MEMBER']);
  const unknown = await env
    .http()
    .post(`/projects/${t.project.id}/members`)
    .set(asMember(t.owner, t.project.id))
    .send({ email: 'nobody-here@example.com', role: 'MEMBER' });
  expect([unknown.status, unknown.body.error.code]).toEqual([404, 'USER_NOT_FOUND']);
  const bad = await env.http().post(`/projects/${t.project.id}/members`).set(asMember(t.owner, t.project.id)).send({ email: 'not-an-email' });
  expect([bad.status, bad.body.error.errors[0].field]).toEqual([422, 'email']);
});

test('only the owner hands ownership over, and the owner can be neither demoted nor removed (403 OWNER_IMMUTABLE)', async () => {
  const t = await team();
  const outsider = await createTestUser(env);
  const asOwner = asMember(t.owner, t.project.id);
  const cases = [
    env.http().post(`/projects/${t.project.id}/members`).set(asOwner).send({ email: outsider.email, role: 'OWNER' }),
    env.http().patch(`/projects/${t.project.id}/members/${t.member.id}`).set(asMember(t.admin, t.project.id)).send({ role: 'OWNER' }),
    env.http().patch(`/projects/${t.project.id}/members/${t.admin.id}`).set(bearer(t.project.secretKey)).send({ role: 'OWNER' }),
    env.http().patch(`/projects/${t.project.id}/members/${t.owner.id}`).set(asOwner).send({ role: 'ADMIN' }),
    env.http().patch(`/projects/${t.project.id}/members/${t.owner.id}`).set(asMember(t.admin, t.project.id)).send({ role: 'MEMBER' }),
    env.http().delete(`/projects/${t.project.id}/members/${t.owner.id}`).set(asMember(t.admin, t.project.id)),
    env.http().delete(`/projects/${t.project.id}/members/${t.owner.id}`).set(asOwner),
    env.http().delete(`/projects/${t.project.id}/members/${t.owner.id}`).set(bearer(t.project.secretKey)),
  ];
  for (const res of await Promise.all(cases)) expect([res.status, res.body.error.code]).toEqual([403, 'OWNER_IMMUTABLE']);
  expect(await members(t)).toEqual([
    [t.owner.id, 'OWNER'],
    [t.admin.id, 'ADMIN'],
    [t.member.id, 'MEMBER'],
  ]);
});

test('the owner hands ownership to a member: they become OWNER, the former owner ADMIN, at the next request', async () => {
  const t = await team();
  const handOver = await env
    .http()
    .patch(`/projects/${t.project.id}/members/${t.member.id}`)
    .set(asMember(t.owner, t.project.id))
    .send({ role: 'OWNER' });
  expect(handOver.status).toBe(200);
  expect(handOver.body).toMatchObject({ userId: t.member.id, role: 'OWNER' });
  expect(await members(t)).toEqual([
    [t.member.id, 'OWNER'],
    [t.owner.id, 'ADMIN'],
    [t.admin.id, 'ADMIN'],
  ]);
  // Owner-only actions follow the role: the former owner may no longer delete the project; nor hand it back.
  const del = await env.http().delete(`/users/@me/projects/${t.project.id}`).set('Cookie', t.owner.cookie);
  expect([del.status, del.body.error.code]).toEqual([403, 'FORBIDDEN']);
  const back = await env
    .http()
    .patch(`/projects/${t.project.id}/members/${t.owner.id}`)
    .set(asMember(t.owner, t.project.id))
    .send({ role: 'OWNER' });
  expect([back.status, back.body.error.code]).toEqual([403, 'OWNER_IMMUTABLE']);
  // The new owner can hand it back; asking for what already is changes nothing.
  const same = await env
    .http()
    .patch(`/projects/${t.project.id}/members/${t.member.id}`)
    .set(asMember(t.member, t.project.id))
    .send({ role: 'OWNER' });
  expect(same.status).toBe(200);
  expect((await members(t))[0]).toEqual([t.member.id, 'OWNER']);
  // A non-member cannot be made owner.
  const stranger = await createTestUser(env);
  const missing = await env
    .http()
    .patch(`/projects/${t.project.id}/members/${stranger.id}`)
    .set(asMember(t.member, t.project.id))
    .send({ role: 'OWNER' });
  expect(missing.status).toBe(404);
});

test('two concurrent hand-overs by the owner: the second finds the asker no longer owner (403), one owner at the end', async () => {
  const t = await team();
  const [a, b] = await Promise.all(
    [t.admin.id, t.member.id].map((id) =>
      env.http().patch(`/projects/${t.project.id}/members/${id}`).set(asMember(t.owner, t.project.id)).send({ role: 'OWNER' }),
    ),
  );
  const statuses = [a!.status, b!.status].sort();
  expect(statuses).toEqual([200, 403]);
  expect((await members(t)).filter(([, role]) => role === 'OWNER')).toHaveLength(1);
});

test('roles change between ADMIN and MEMBER; the new role applies to the next request', async () => {
  const t = await team();
  const promote = await env
    .http()
    .patch(`/projects/${t.project.id}/members/${t.member.id}`)
    .set(asMember(t.admin, t.project.id))
    .send({ role: 'ADMIN' });
  expect([promote.status, promote.body.role]).toEqual([200, 'ADMIN']);
  const demote = await env.http().patch(`/projects/${t.project.id}/members/${t.admin.id}`).set(bearer(t.project.secretKey)).send({ role: 'MEMBER' });
  expect([demote.status, demote.body.role]).toEqual([200, 'MEMBER']);
  // The demoted admin can no longer manage members.
  const refused = await env
    .http()
    .patch(`/projects/${t.project.id}/members/${t.member.id}`)
    .set(asMember(t.admin, t.project.id))
    .send({ role: 'MEMBER' });
  expect([refused.status, refused.body.error.code]).toEqual([403, 'FORBIDDEN']);
  const missing = await env.http().patch(`/projects/${t.project.id}/members/usr_nobody`).set(asMember(t.owner, t.project.id)).send({ role: 'MEMBER' });
  expect([missing.status, missing.body.error.code]).toEqual([404, 'MEMBER_NOT_FOUND']);
});

test('a member may leave but not remove others; an admin removes; the removed user loses access at once', async () => {
  const t = await team();
  const other = await createTestUser(env);
  await addTestMember(env, t.project.id, other.id, 'MEMBER');
  const refused = await env.http().delete(`/projects/${t.project.id}/members/${other.id}`).set(asMember(t.member, t.project.id));
  expect([refused.status, refused.body.error.code]).toEqual([403, 'FORBIDDEN']);

  expect((await env.http().delete(`/projects/${t.project.id}/members/${t.member.id}`).set(asMember(t.member, t.project.id))).status).toBe(204);
  const gone = await env.http().get('/contacts').set(asMember(t.member, t.project.id));
  expect([gone.status, gone.body.error.code]).toEqual([403, 'PROJECT_ACCESS_DENIED']);

  expect((await env.http().delete(`/projects/${t.project.id}/members/${other.id}`).set(asMember(t.admin, t.project.id))).status).toBe(204);
  const listed = await env.http().get(`/projects/${t.project.id}/members`).set(asMember(t.owner, t.project.id));
  expect(listed.body.map((m: { userId: string }) => m.userId)).toEqual([t.owner.id, t.admin.id]);
  const again = await env.http().delete(`/projects/${t.project.id}/members/${other.id}`).set(asMember(t.admin, t.project.id));
  expect([again.status, again.body.error.code]).toEqual([404, 'MEMBER_NOT_FOUND']);
});

test("another project's key, and a non-member's session, are refused with 403 PROJECT_ACCESS_DENIED", async () => {
  const t = await team();
  const other = await env.project();
  const stranger = await createTestUser(env);
  for (const res of [
    await env.http().get(`/projects/${t.project.id}/members`).set(bearer(other.secretKey)),
    await env.http().post(`/projects/${t.project.id}/members`).set(bearer(other.secretKey)).send({ email: stranger.email }),
    await env.http().get(`/projects/${t.project.id}/members`).set({ Cookie: stranger.cookie }),
    await env.http().delete(`/projects/${t.project.id}/members/${stranger.id}`).set({ Cookie: stranger.cookie }),
  ]) {
    expect([res.status, res.body.error.code]).toEqual([403, 'PROJECT_ACCESS_DENIED']);
  }
});

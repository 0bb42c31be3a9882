import { queryOne } from '../../db/sql';
import { addTestMember, asMember, createTestUser, type TestUser } from '../helpers/accounts';
import { bearer, startTestEnv, type TestEnv } from '../helpers/env';

let env: TestEnv;
beforeAll(async () => {
  env = await startTestEnv();
});
afterAll(() => env.close());

const as = (user: TestUser) => ({ Cookie: user.cookie });

async function createProject(user: TestUser, name = 'Acme') {
  const res = await env.http().post('/users/@me/projects').set(as(user)).send({ name });
  expect(res.status).toBe(201);
  return res.body as { id: string; name: string; role: string; secretKey: string; publicKey: string; secretKeyPreview: string };
}

test('GET /users/@me returns the user and their memberships; a key or no session gets 401', async () => {
  const user = await createTestUser(env);
  const project = await createProject(user, 'Mine');
  const me = await env.http().get('/users/@me').set(as(user));
  expect(me.status).toBe(200);
  expect(me.body).toEqual({
    id: user.id,
    email: user.email,
    name: null,
    emailVerified: true,
    createdAt: expect.any(String),
    memberships: [{ projectId: project.id, projectName: 'Mine', role: 'OWNER' }],
  });
  expect((await env.http().get('/users/@me')).status).toBe(401);
  const byKey = await env.http().get('/users/@me').set(bearer(project.secretKey));
  expect(byKey.status).toBe(401);
  expect(byKey.body.error.code).toBe('MISSING_AUTH');
  expect((await env.http().get('/users/@me').set({ Cookie: 'tidings_session=forged' })).body.error.code).toBe('INVALID_SESSION');
});

test('POST /users/@me/projects creates the project with its owner and returns working keys once; the list shows previews only', async () => {
  const user = await createTestUser(env);
  const created = await createProject(user, '  Launch  ');
  expect(created).toMatchObject({ name: 'Launch', role: 'OWNER', disabled: false });
  expect(created.secretKey).toMatch(/^sk_[0-9a-f]{64}$/);
  expect(created.publicKey).toMatch(/^pk_[0-9a-f]{64}$/);
  expect(created.secretKeyPreview).toBe(created.secretKey.slice(0, 10));

  // The key works on the project's routes at once.
  expect((await env.http().get('/contacts').set(bearer(created.secretKey))).status).toBe(200);

  const list = await env.http().get('/users/@me/projects').set(as(user));
  expect(list.status).toBe(200);
  expect(list.body).toHaveLength(1);
  expect(list.body[0]).toMatchObject({ id: created.id, name: 'Launch', role: 'OWNER', secretKeyPreview: created.secretKeyPreview });
  expect(JSON.stringify(list.body)).not.toContain(created.secretKey);
  expect(JSON.stringify(list.body)).not.toContain(created.publicKey);

  // A member of another user's project sees it with their role.
  const other = await createTestUser(env);
  await addTestMember(env, created.id, other.id, 'MEMBER');
  const theirs = await env.http().get('/users/@me/projects').set(as(other));
  expect(theirs.body.map((p: { id: string; role: string }) => [p.id, p.role])).toEqual([[created.id, 'MEMBER']]);
});

test('POST /users/@me/projects refuses an empty name with 422 and creates nothing', async () => {
  const user = await createTestUser(env);
  const res = await env.http().post('/users/@me/projects').set(as(user)).send({ name: '   ' });
  expect(res.status).toBe(422);
  expect(res.body.error.errors[0].field).toBe('name');
  expect((await env.http().get('/users/@me/projects').set(as(user))).body).toEqual([]);
});

test('PATCH renames (ADMIN), a MEMBER gets 403 FORBIDDEN, a non-member 403 PROJECT_ACCESS_DENIED', async () => {
  const owner = await createTestUser(env);
  const project = await createProject(owner, 'Old name');
  const admin = await createTestUser(env);
  const member = await createTestUser(env);
  const stranger = await createTestUser(env);
  await addTestMember(env, project.id, admin.id, 'ADMIN');
  await addTestMember(env, project.id, member.id, 'MEMBER');

  const renamed = await env.http().patch(`/users/@me/projects/${project.id}`).set(as(admin)).send({ name: 'New name' });
  expect(renamed.status).toBe(200);
  expect(renamed.body).toMatchObject({ id: project.id, name: 'New name', role: 'ADMIN' });

  const byMember = await env.http().patch(`/users/@me/projects/${project.id}`).set(as(member)).send({ name: 'x' });
  expect([byMember.status, byMember.body.error.code]).toEqual([403, 'FORBIDDEN']);
  const byStranger = await env.http().patch(`/users/@me/projects/${project.id}`).set(as(stranger)).send({ name: 'x' });
  expect([byStranger.status, byStranger.body.error.code]).toEqual([403, 'PROJECT_ACCESS_DENIED']);
  expect((await env.http().get('/users/@me/projects').set(as(owner))).body[0].name).toBe('New name');
});

test('regenerate-keys: the new keys work and the old ones stop working at once', async () => {
  const owner = await createTestUser(env);
  const project = await createProject(owner);
  const res = await env.http().post(`/users/@me/projects/${project.id}/regenerate-keys`).set(as(owner));
  expect(res.status).toBe(200);
  expect(res.body.id).toBe(project.id);
  expect(res.body.secretKey).not.toBe(project.secretKey);

  const old = await env.http().get('/contacts').set(bearer(project.secretKey));
  expect([old.status, old.body.error.code]).toEqual([401, 'INVALID_API_KEY']);
  const oldPublic = await env.http().post('/v1/track').set(bearer(project.publicKey)).send({ event: 'x', email: 'a@b.io' });
  expect(oldPublic.status).toBe(401);
  expect((await env.http().get('/contacts').set(bearer(res.body.secretKey))).status).toBe(200);
  expect((await env.http().post('/v1/track').set(bearer(res.body.publicKey)).send({ event: 'x', email: 'a@b.io' })).status).toBe(200);
  // The list shows the new previews.
  const listed = (await env.http().get('/users/@me/projects').set(as(owner))).body[0];
  expect(listed.secretKeyPreview).toBe(res.body.secretKey.slice(0, 10));
});

test('DELETE /users/@me/projects/:id: OWNER only; deletes the project with its data and memberships', async () => {
  const owner = await createTestUser(env);
  const admin = await createTestUser(env);
  const project = await createProject(owner);
  await addTestMember(env, project.id, admin.id, 'ADMIN');
  expect((await env.http().post('/contacts').set(bearer(project.secretKey)).send({ email: 'c@d.io' })).status).toBe(201);

  const byAdmin = await env.http().delete(`/users/@me/projects/${project.id}`).set(as(admin));
  expect([byAdmin.status, byAdmin.body.error.code]).toEqual([403, 'FORBIDDEN']);

  const res = await env.http().delete(`/users/@me/projects/${project.id}`).set(as(owner));
  expect(res.status).toBe(200);
  expect(res.body).toEqual({ id: project.id, deleted: true });
  const em = env.orm.em.fork();
  expect(await queryOne(em, 'select 1 from projects where id = ?', [project.id])).toBeUndefined();
  expect(await queryOne(em, 'select 1 from contacts where project_id = ?', [project.id])).toBeUndefined();
  expect(await queryOne(em, 'select 1 from project_members where project_id = ?', [project.id])).toBeUndefined();
  expect((await env.http().get('/contacts').set(bearer(project.secretKey))).status).toBe(401);
  expect((await env.http().get('/users/@me/projects').set(as(admin))).body).toEqual([]);
});

test('GET /projects/:id/setup-state follows what the project has', async () => {
  const owner = await createTestUser(env);
  const project = await createProject(owner);
  const state = () => env.http().get(`/projects/${project.id}/setup-state`).set(bearer(project.secretKey));
  const empty = await state();
  expect(empty.status).toBe(200);
  expect(empty.body).toEqual({
    hasVerifiedDomain: false,
    hasTemplate: false,
    hasContact: false,
    hasSentEmail: false,
    hasEnabledWorkflow: false,
    complete: false,
  });
  const key = bearer(project.secretKey);
  await env.http().post('/contacts').set(key).send({ email: 'c@d.io' });
  expect((await env.http().post('/templates').set(key).send({ name: 't', subject: 's', body: 'b' })).status).toBe(201);
  const partly = await env.http().get(`/projects/${project.id}/setup-state`).set(asMember(owner, project.id));
  expect(partly.body).toEqual({ ...empty.body, hasContact: true, hasTemplate: true });

  // A pending domain does not count; verified, sent and enabled are set directly (their flows have their own tests).
  expect((await env.http().post('/domains').set(key).send({ domain: `setup-${project.id.slice(-8)}.test` })).status).toBe(201);
  expect((await state()).body.hasVerifiedDomain).toBe(false);
  const wf = await env.http().post('/workflows').set(key).send({ name: 'w', eventName: 'signup' });
  expect(wf.status).toBe(201);
  const em = env.orm.em.fork();
  await queryOne(em, `update domains set status = 'verified', verified_at = now() where project_id = ?`, [project.id]);
  await queryOne(em, 'update workflows set enabled = true where id = ?', [wf.body.id]);
  await queryOne(
    em,
    `insert into emails (id, project_id, source, to_email, from_email, subject, body, status, sent_at)
     values (gen_random_uuid(), ?, 'transactional', 'c@d.io', 'me@x.test', 's', 'b', 'SENT', now())`,
    [project.id],
  );
  expect((await state()).body).toEqual({
    hasVerifiedDomain: true,
    hasTemplate: true,
    hasContact: true,
    hasSentEmail: true,
    hasEnabledWorkflow: true,
    complete: true,
  });
  // Another project's key may not read it.
  const other = await env.project();
  const denied = await env.http().get(`/projects/${project.id}/setup-state`).set(bearer(other.secretKey));
  expect([denied.status, denied.body.error.code]).toEqual([403, 'PROJECT_ACCESS_DENIED']);
});

test('GET /projects/:id/security and /users/@me/projects/:id/security answer the same figures', async () => {
  const owner = await createTestUser(env);
  const project = await createProject(owner);
  const byKey = await env.http().get(`/projects/${project.id}/security`).set(bearer(project.secretKey));
  const bySession = await env.http().get(`/users/@me/projects/${project.id}/security`).set(as(owner));
  expect(byKey.status).toBe(200);
  const withoutClock = (b: { evaluated: { since?: string } }) => ({ ...b, evaluated: { ...b.evaluated, since: undefined } });
  expect(withoutClock(bySession.body)).toEqual(withoutClock(byKey.body));
  expect(byKey.body).toMatchObject({
    projectId: project.id,
    disabled: false,
    allTime: { sent: 0, bounced: 0, complained: 0, bounceRate: 0, complaintRate: 0 },
    last7Days: { sent: 0 },
    suspensions: [],
  });
});

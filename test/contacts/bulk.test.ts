import type { ProjectWithKeys } from '../../db/projects/projects';
import { query } from '../../db/sql';
import { bearer, startTestEnv, type TestEnv } from '../helpers/env';
import { buildJourney, track, waitForExecution } from '../helpers/journeys';
import { waitUntil } from '../helpers/sending';

/** Bulk contact jobs end to end: real database, real Temporal server and worker. */

let env: TestEnv;
let project: ProjectWithKeys;
let other: ProjectWithKeys;
const http = () => env.http();
const em = () => env.orm.em.fork();

interface BulkJob {
  jobId: string;
  operation: string;
  status: string;
  total: number;
  processed: number;
  succeeded: number;
  unchanged: number;
  failed: number;
  errors: { contactId: string; reason: string }[];
}

async function contact(email: string, subscribed: boolean, p = project): Promise<string> {
  const res = await http().post('/contacts').set(bearer(p.secretKey)).send({ email, subscribed });
  expect([200, 201]).toContain(res.status);
  return res.body.id as string;
}

/** Starts a job, checks the 202 answer, and waits for it to finish. */
async function runJob(operation: string, body: Record<string, unknown>, p = project): Promise<BulkJob> {
  const res = await http().post(`/contacts/bulk-${operation}`).set(bearer(p.secretKey)).send(body);
  if (res.status !== 202) throw new Error(`bulk-${operation}: ${res.status} ${JSON.stringify(res.body)}`);
  expect(res.body).toEqual({ jobId: expect.any(String), status: 'queued' });
  return waitUntil(async () => {
    const got = await http().get(`/contacts/bulk/${res.body.jobId}`).set(bearer(p.secretKey));
    expect(got.status).toBe(200);
    const job = got.body as BulkJob;
    return job.status === 'completed' || job.status === 'failed' ? job : undefined;
  });
}

async function eventsFor(name: string, contactIds: string[]): Promise<string[]> {
  const rows = await query<{ contact_id: string }>(
    em(),
    'select contact_id from events where name = ? and contact_id = any(?) order by contact_id',
    [name, contactIds],
  );
  return rows.map((r) => r.contact_id);
}

async function subscribedOf(id: string, p = project): Promise<boolean> {
  const res = await http().get(`/contacts/${id}`).set(bearer(p.secretKey));
  expect(res.status).toBe(200);
  return res.body.subscribed as boolean;
}

const sortErrors = (errors: BulkJob['errors']) => [...errors].sort((a, b) => a.contactId.localeCompare(b.contactId));

beforeAll(async () => {
  env = await startTestEnv();
  await env.startWorker();
  project = await env.project('bulk');
  other = await env.project('bulk other');
});

afterAll(async () => {
  await env?.close();
});

test('bulk-subscribe: changed, already subscribed, unknown and another project’s ids, one event per change', async () => {
  const a = await contact('sub-a@example.org', false);
  const b = await contact('sub-b@example.org', false);
  const c = await contact('sub-c@example.org', true);
  const foreign = await contact('sub-x@example.org', false, other);
  const unknown = 'cnt_does_not_exist';

  const job = await runJob('subscribe', { ids: [a, b, c, foreign, unknown, a] });
  expect(job).toEqual({
    jobId: expect.any(String),
    operation: 'subscribe',
    status: 'completed',
    total: 5,
    processed: 5,
    succeeded: 2,
    unchanged: 1,
    failed: 2,
    errors: expect.any(Array),
  });
  expect(sortErrors(job.errors)).toEqual(sortErrors([
    { contactId: foreign, reason: 'not_found' },
    { contactId: unknown, reason: 'not_found' },
  ]));
  expect([await subscribedOf(a), await subscribedOf(b), await subscribedOf(c)]).toEqual([true, true, true]);
  expect(await subscribedOf(foreign, other)).toBe(false);
  expect(await eventsFor('contact.subscribed', [a, b, c, foreign])).toEqual([a, b].sort());
  expect(await eventsFor('contact.unsubscribed', [a, b, c, foreign])).toEqual([]);

  // The same job again changes nothing and emits nothing more.
  const again = await runJob('subscribe', { ids: [a, b, c] });
  expect([again.succeeded, again.unchanged, again.failed]).toEqual([0, 3, 0]);
  expect(await eventsFor('contact.subscribed', [a, b, c])).toEqual([a, b].sort());
});

test('bulk-unsubscribe with the contactIds alias, over several chunks', async () => {
  const a = await contact('unsub-a@example.org', true);
  const b = await contact('unsub-b@example.org', false);
  const unknown = Array.from({ length: 450 }, (_, i) => `cnt_unknown_${String(i).padStart(3, '0')}`);
  // The existing ids sit in the first and the last chunk of 200.
  const job = await runJob('unsubscribe', { contactIds: [a, ...unknown, b] });
  expect(job).toMatchObject({ operation: 'unsubscribe', status: 'completed', total: 452, processed: 452, succeeded: 1, unchanged: 1, failed: 450 });
  expect(new Set(job.errors.map((e) => e.contactId))).toEqual(new Set(unknown));
  expect(job.errors.every((e) => e.reason === 'not_found')).toBe(true);
  expect(await subscribedOf(a)).toBe(false);
  expect(await eventsFor('contact.unsubscribed', [a, b])).toEqual([a]);
});

test('bulk-delete: removes contacts and their memberships, cancels their executions; unknown ids fail', async () => {
  const wf = await buildJourney(env, project, {
    eventName: 'bulk-start',
    steps: [
      { key: 'wait', type: 'WAIT_FOR_EVENT', config: { eventName: 'never-comes' } },
      { key: 'done', type: 'EXIT', config: { reason: 'came' } },
    ],
    transitions: [
      ['trigger', 'wait'],
      ['wait', 'done', 'event'],
    ],
  });
  const started = await track(env, project, 'del-a@example.org', 'bulk-start');
  const a = started.contact;
  const execution = await waitForExecution(env, project, wf.id, a, ['WAITING']);
  const b = await contact('del-b@example.org', true);
  const keep = await contact('del-keep@example.org', true);
  const foreign = await contact('del-x@example.org', true, other);

  const seg = await http().post('/segments').set(bearer(project.secretKey)).send({ name: 'bulk static', type: 'STATIC' });
  expect(seg.status).toBe(201);
  const added = await http()
    .post(`/segments/${seg.body.id}/members`)
    .set(bearer(project.secretKey))
    .send({ emails: ['del-a@example.org', 'del-b@example.org', 'del-keep@example.org'] });
  expect(added.status).toBe(200);

  const job = await runJob('delete', { ids: [a, b, foreign, 'cnt_nope'] });
  expect(job).toMatchObject({ operation: 'delete', status: 'completed', total: 4, processed: 4, succeeded: 2, unchanged: 0, failed: 2 });
  expect(sortErrors(job.errors)).toEqual(sortErrors([
    { contactId: foreign, reason: 'not_found' },
    { contactId: 'cnt_nope', reason: 'not_found' },
  ]));

  for (const id of [a, b]) expect((await http().get(`/contacts/${id}`).set(bearer(project.secretKey))).status).toBe(404);
  expect((await http().get(`/contacts/${keep}`).set(bearer(project.secretKey))).status).toBe(200);
  expect((await http().get(`/contacts/${foreign}`).set(bearer(other.secretKey))).status).toBe(200);

  const members = await query<{ contact_id: string }>(em(), 'select contact_id from segment_members where segment_id = ?', [seg.body.id]);
  expect(members.map((m) => m.contact_id)).toEqual([keep]);

  // The journey stopped in Temporal (its row went with the contact).
  const handle = env.temporal.client.workflow.getHandle(`journey:${execution.id}`);
  await waitUntil(async () => (await handle.describe()).status.name === 'CANCELLED');
  expect(await query(em(), 'select 1 from workflow_executions where id = ?', [execution.id])).toEqual([]);
});

test('validation: 1 to 1,000 ids, ids or contactIds', async () => {
  const post = (op: string, body: unknown) => http().post(`/contacts/bulk-${op}`).set(bearer(project.secretKey)).send(body as object);
  const ids = (n: number) => Array.from({ length: n }, (_, i) => `cnt_${i}`);
  for (const op of ['subscribe', 'unsubscribe', 'delete']) {
    const tooMany = await post(op, { ids: ids(1001) });
    expect(tooMany.status).toBe(422);
    expect(tooMany.body.error.code).toBe('VALIDATION_ERROR');
    expect((await post(op, { contactIds: ids(1001) })).status).toBe(422);
  }
  expect((await post('subscribe', { ids: [] })).status).toBe(422);
  expect((await post('subscribe', {})).status).toBe(422);
  expect((await post('subscribe', { ids: [123] })).status).toBe(422);
  const max = await runJob('delete', { ids: ids(1000) });
  expect(max).toMatchObject({ status: 'completed', total: 1000, processed: 1000, succeeded: 0, failed: 1000 });
});

test("another project's job is not found; so is an unknown one", async () => {
  const res = await http().post('/contacts/bulk-subscribe').set(bearer(project.secretKey)).send({ ids: ['cnt_whatever'] });
  expect(res.status).toBe(202);
  const foreign = await http().get(`/contacts/bulk/${res.body.jobId}`).set(bearer(other.secretKey));
  expect(foreign.status).toBe(404);
  expect(foreign.body.error.code).toBe('BULK_JOB_NOT_FOUND');
  expect((await http().get('/contacts/bulk/job_nope').set(bearer(project.secretKey))).status).toBe(404);
  // The bulk paths are not taken for a contact id.
  expect((await http().get('/contacts/bulk-subscribe').set(bearer(project.secretKey))).status).toBe(404);
});

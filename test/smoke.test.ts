import { bearer, startTestEnv, type TestEnv } from './helpers/env';

let env: TestEnv;
beforeAll(async () => {
  env = await startTestEnv();
});
afterAll(() => env.close());

test('create and fetch a contact', async () => {
  const p = await env.project();
  const res = await env.http().post('/contacts').set(bearer(p.secretKey)).send({ email: 'A@x.io', data: { plan: 'pro' } });
  expect(res.status).toBe(201);
  const got = await env.http().get(`/contacts/${res.body.id}`).set(bearer(p.secretKey));
  expect(got.body).toMatchObject({ email: 'a@x.io', data: { plan: 'pro' } });
});

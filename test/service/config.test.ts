import { loadConfig } from '../../config';
import { startTestEnv, type TestEnv } from '../helpers/env';

const envs: TestEnv[] = [];
afterAll(() => Promise.all(envs.map((e) => e.close())));

async function configOf(settings: Record<string, string>) {
  const env = await startTestEnv(settings);
  envs.push(env);
  const res = await env.http().get('/config');
  expect(res.status).toBe(200);
  return res.body;
}

test('GET /config needs no key and reflects the real configuration', async () => {
  expect(await configOf({ PUBLIC_URL: 'https://mail.example.com' })).toEqual({
    environment: 'test',
    urls: { api: 'https://mail.example.com', dashboard: 'https://mail.example.com' },
    features: {
      billing: { enabled: false },
      storage: { objectStorage: false },
      authProviders: { github: false, google: false },
      smtp: { enabled: false },
      signups: { enabled: true },
    },
  });
  const configured = await configOf({ SMTP_URL: 'smtp://127.0.0.1:2525', DISABLE_SIGNUPS: 'true' });
  expect(configured.features.smtp).toEqual({ enabled: true });
  expect(configured.features.signups).toEqual({ enabled: false });
});

test('WORKER_NICENESS is 10 unless set, and a value nice cannot take is refused', () => {
  expect(loadConfig({}).workerNiceness).toBe(10);
  expect(loadConfig({ WORKER_NICENESS: '0' }).workerNiceness).toBe(0);
  for (const bad of ['20', '-1', '2.5', 'low']) {
    expect(() => loadConfig({ WORKER_NICENESS: bad })).toThrow(/Invalid configuration[\s\S]*WORKER_NICENESS/);
  }
});

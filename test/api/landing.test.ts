import { loadConfig } from '../../config';
import { startTestEnv, type TestEnv } from '../helpers/env';

const envs: TestEnv[] = [];
afterAll(() => Promise.all(envs.map((e) => e.close())));

async function landing(settings: Record<string, string>) {
  const env = await startTestEnv(settings);
  envs.push(env);
  const res = await env.http().get('/');
  expect(res.status).toBe(200);
  expect(res.headers['content-type']).toMatch(/^text\/html/);
  const links = [...res.text.matchAll(/<a href="([^"]+)">([^<]+)<\/a>/g)].map((m) => ({ href: m[1]!, label: m[2]! }));
  return { env, text: res.text, links };
}

test('GET / links the reference, the OpenAPI document, the health check, the Temporal UI and, in outbox mode, the outbox', async () => {
  const { env, text, links } = await landing({ TEMPORAL_UI_URL: 'http://temporal-ui.test:8080/' });
  expect(text).toContain('<h1>Tidings</h1>');
  expect(links).toEqual([
    { href: '/docs', label: 'API reference' },
    { href: '/openapi.json', label: 'OpenAPI document' },
    { href: '/health', label: 'Health check' },
    { href: 'http://temporal-ui.test:8080', label: 'Temporal Web UI' },
    { href: '/outbox', label: 'Outbox' },
  ]);
  // The local links lead somewhere (supertest connects over loopback, as the outbox requires).
  for (const { href } of links.filter((l) => l.href.startsWith('/'))) {
    expect({ href, status: (await env.http().get(href)).status }).toEqual({ href, status: 200 });
  }
});

test('with a relay and a Temporal server of unknown UI address, neither the outbox nor the UI is linked', async () => {
  // startTestEnv sets TEMPORAL_ADDRESS: the UI address is not known unless configured.
  const { links } = await landing({ SMTP_URL: 'smtp://127.0.0.1:2525' });
  expect(links.map((l) => l.href)).toEqual(['/docs', '/openapi.json', '/health']);
});

test('TEMPORAL_UI_URL: given, or the local dev server UI when no TEMPORAL_ADDRESS is set', () => {
  expect(loadConfig({}).temporal.uiUrl).toBe('http://localhost:8233');
  expect(loadConfig({ TEMPORAL_UI_PORT: '9233' }).temporal.uiUrl).toBe('http://localhost:9233');
  expect(loadConfig({ TEMPORAL_ADDRESS: 'temporal:7233' }).temporal.uiUrl).toBeUndefined();
  expect(loadConfig({ TEMPORAL_ADDRESS: 'temporal:7233', TEMPORAL_UI_URL: 'https://ui.example.com/' }).temporal.uiUrl).toBe('https://ui.example.com');
  expect(() => loadConfig({ TEMPORAL_UI_URL: 'not a url' })).toThrow(/TEMPORAL_UI_URL/);
});

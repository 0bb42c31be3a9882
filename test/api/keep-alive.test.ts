import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { KEEP_ALIVE_TIMEOUT_MS, listenApp } from '../../api/server';
import { startTestEnv, type TestEnv } from '../helpers/env';

/**
 * The API keeps an idle keep-alive connection open for KEEP_ALIVE_TIMEOUT_MS (api/server.ts), not
 * Node's 5 s: a client (or a proxy) that comes back after a pause reuses its connection instead of
 * writing into one the server is closing (ECONNRESET).
 */
jest.setTimeout(30_000);

let env: TestEnv;
let server: http.Server;
let agent: http.Agent;

beforeAll(async () => {
  env = await startTestEnv();
  server = await listenApp(env.app, 0, '127.0.0.1');
  agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
});

afterAll(async () => {
  agent?.destroy();
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  await env?.close();
});

const get = (path: string) =>
  new Promise<{ status: number; reused: boolean }>((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port: (server.address() as AddressInfo).port, path, agent }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode!, reused: req.reusedSocket }));
    });
    req.on('error', reject);
  });

test('a keep-alive connection idle for longer than Node’s default 5 s is still open for the next request', async () => {
  expect(server.keepAliveTimeout).toBe(KEEP_ALIVE_TIMEOUT_MS);
  expect((await get('/health')).reused).toBe(false);
  // The behaviour under test is the server's idle timeout on a real socket: the pause has to outlast Node's 5 s.
  await new Promise((resolve) => setTimeout(resolve, 6_000));
  const again = await get('/health');
  expect(again.status).toBe(200);
  // With Node's default the server closed it after 5 s, and this request needed a new connection.
  expect(again.reused).toBe(true);
});

import { readFileSync } from 'node:fs';
import path from 'node:path';
import { loadConfig } from '../config';
import { LocalDiskStorage } from '../storage/local-disk';
import { SEARCH_ATTRIBUTE_TYPES } from '../temporal/search-attributes';

/**
 * docker-compose.yml and the Dockerfile cannot run here (no Docker engine), so what they say is
 * checked against the code instead: the environment the app containers get, the search attributes
 * the namespace job registers, the paths the image and its volumes use.
 */

const ROOT = path.resolve(__dirname, '..');
const compose = readFileSync(path.join(ROOT, 'docker-compose.yml'), 'utf8');
const dockerfile = readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8');

/** The `x-app-env` block as `docker compose config` resolves it with nothing set: `${VAR:-default}` → default. */
function appEnvironment(): Record<string, string> {
  const block = /^x-app-env: &app-env\n((?: {2}.*\n|\s*#.*\n)+)/m.exec(compose);
  if (!block) throw new Error('x-app-env block not found in docker-compose.yml');
  const env: Record<string, string> = {};
  for (const line of block[1]!.split('\n')) {
    const m = /^ {2}([A-Z0-9_]+): (.*)$/.exec(line);
    if (!m) continue;
    const value = m[2]!.replace(/^"(.*)"$/, '$1').replace(/\$\{[A-Z0-9_]+:-([^}]*)\}/g, '$1');
    if (value.includes('${')) throw new Error(`${m[1]} has a substitution this check does not resolve: ${m[2]}`);
    env[m[1]!] = value;
  }
  return env;
}

test('the app containers’ environment is a valid configuration: production, external Temporal and SMTP, billing and S3 off', () => {
  const env = appEnvironment();
  expect(Object.keys(env).length).toBeGreaterThan(10);
  const config = loadConfig(env);
  expect(config.nodeEnv).toBe('production');
  expect(config.databaseUrl).toBe('postgres://tidings:tidings@postgres:5432/tidings');
  expect(config.temporal).toMatchObject({ address: 'temporal:7233', namespace: 'default', taskQueue: 'tidings' });
  expect(config.smtpUrl).toBe('smtp://mailpit:1025');
  expect(config.stripe).toBeUndefined();
  expect(config.s3).toBeUndefined();
  expect(config.disableSignups).toBe(false);
});

test('the namespace job registers exactly the search attributes the workflows set', () => {
  const registered = Object.fromEntries([...compose.matchAll(/--name (\w+) --type (\w+)/g)].map((m) => [m[1], m[2]]));
  expect(registered).toEqual(SEARCH_ATTRIBUTE_TYPES);
});

test('the image runs the compiled CLI, and the uploads volume is where local storage writes in it', () => {
  const build = JSON.parse(readFileSync(path.join(ROOT, 'tsconfig.build.json'), 'utf8')) as { include: string[] };
  const base = JSON.parse(readFileSync(path.join(ROOT, 'tsconfig.json'), 'utf8')) as { compilerOptions: { outDir: string; rootDir: string } };
  // rootDir "." and outDir "dist": cli/main.ts compiles to dist/cli/main.js.
  expect([base.compilerOptions.rootDir, base.compilerOptions.outDir]).toEqual(['.', 'dist']);
  expect(build.include).toContain('cli');
  expect(dockerfile).toContain('ENTRYPOINT ["node", "dist/cli/main.js"]');

  const workdir = [...dockerfile.matchAll(/^WORKDIR (\S+)$/gm)].map((m) => m[1]).at(-1)!;
  const volume = /- uploads-data:(\S+)/.exec(compose)![1]!;
  const config = loadConfig(appEnvironment());
  // The container's working directory is where a relative DATA_DIR resolves.
  const root = path.resolve(workdir, path.relative(process.cwd(), new LocalDiskStorage(config.dataDir, config.publicUrl).localRoot));
  expect(root).toBe(volume);

  // The commands the services run are ones the CLI takes.
  const commands = [...compose.matchAll(/^ {4}command: (\[.*\])$/gm)].map((m) => JSON.parse(m[1]!) as string[]);
  expect(commands).toEqual(expect.arrayContaining([['migrate'], ['start', '--api'], ['start', '--worker']]));
});

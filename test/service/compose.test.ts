import { readFileSync } from 'node:fs';
import path from 'node:path';
import { loadConfig } from '../../config';
import { LocalDiskStorage } from '../../storage/local-disk';
import { SEARCH_ATTRIBUTE_TYPES } from '../../temporal/search-attributes';

/**
 * docker-compose.yml and the Dockerfile cannot run here (no Docker engine), so what they say is
 * checked against the code instead: the environment the app containers get, the search attributes
 * the namespace job registers, the paths the image and its volumes use. Its Temporal part does run
 * here, through deploy/temporal-postgres.sh (test/service/temporal-postgres.test.ts): these checks fail
 * when the compose file and that script stop describing the same server.
 */

const ROOT = path.resolve(__dirname, '../..');
const read = (file: string) => readFileSync(path.join(ROOT, file), 'utf8');
const compose = read('docker-compose.yml');
const dockerfile = read('Dockerfile');
const script = read('deploy/temporal-postgres.sh');
const template = read('deploy/temporal-postgres.yaml');
const ciRun = read('.ci/run');

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

/** A service's block in docker-compose.yml (x-app-depends-on above `services:` has keys named like services). */
function service(name: string): string {
  const services = compose.slice(compose.search(/^services:$/m));
  const block = new RegExp(`^ {2}${name}:\\n((?: {4}.*\\n|\\s*\\n)+)`, 'm').exec(services);
  if (!block) throw new Error(`service ${name} not found in docker-compose.yml`);
  return block[1]!;
}

/** A service's `environment:` map, `${VAR:-default}` resolved to its default. */
function serviceEnvironment(name: string): Record<string, string> {
  const block = /^ {4}environment:\n((?: {6}.*\n|\s*#.*\n)+)/m.exec(service(name));
  if (!block) throw new Error(`service ${name} has no environment block`);
  return Object.fromEntries(
    [...block[1]!.matchAll(/^ {6}([A-Z0-9_]+): (.*)$/gm)].map((m) => [m[1]!, m[2]!.replace(/^"(.*)"$/, '$1').replace(/\$\{[A-Z0-9_]+:-([^}]*)\}/g, '$1')]),
  );
}

/** A `name=value` assignment in deploy/temporal-postgres.sh, `${VAR:-default}` resolved to its default. */
function scriptValue(name: string): string {
  const m = new RegExp(`^${name}=(\\S+)$`, 'm').exec(script);
  if (!m) throw new Error(`${name}= not found in deploy/temporal-postgres.sh`);
  return m[1]!.replace(/^\$\{[A-Z0-9_]+:-([^}]*)\}$/, '$1');
}

/** A port the script uses when TEMPORAL_PG_PORT_BASE is unset (`frontend_port=7233 history_port=7234 …`). */
function scriptDefaultPort(name: string): string {
  const m = new RegExp(`(?:^|\\s)${name}=(\\d+)(?=\\s|$)`, 'm').exec(script);
  if (!m) throw new Error(`${name}=<number> not found in deploy/temporal-postgres.sh`);
  return m[1]!;
}

/** `--name X --type Y` pairs: how both the namespace job and the script register search attributes. */
const searchAttributes = (text: string) => Object.fromEntries([...text.matchAll(/--name (\w+) --type (\w+)/g)].map((m) => [m[1], m[2]]));

/** Variables deploy/temporal-postgres.yaml reads, with the default it falls back to ('' for none). */
const templateDefaults = (): Record<string, string> =>
  Object.fromEntries([...template.matchAll(/env "([A-Z0-9_]+)"(?: \| default "([^"]*)")?/g)].map((m) => [m[1]!, m[2] ?? '']));

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

test('the namespace job and deploy/temporal-postgres.sh register exactly the search attributes the workflows set', () => {
  expect(searchAttributes(compose)).toEqual(SEARCH_ATTRIBUTE_TYPES);
  expect(searchAttributes(script)).toEqual(SEARCH_ATTRIBUTE_TYPES);
  // The job's readiness query names every attribute; the script builds its own from the flags.
  const query = /--query \\\n\s*"([^"]+)"/.exec(service('temporal-namespace'))![1]!;
  expect([...query.matchAll(/(\w+) = 'probe'/g)].map((m) => m[1])).toEqual(Object.keys(SEARCH_ATTRIBUTE_TYPES));
  // Same namespace and retention by default.
  const job = serviceEnvironment('temporal-namespace');
  expect([job.TEMPORAL_NAMESPACE, job.TEMPORAL_NAMESPACE_RETENTION]).toEqual([scriptValue('namespace'), scriptValue('retention')]);
});

test('compose runs the Temporal server version that .ci/run builds and deploy/temporal-postgres.sh runs', () => {
  const version = scriptValue('TEMPORAL_SERVER_VERSION');
  expect(/^ {4}image: temporalio\/server:(\S+)$/m.exec(service('temporal'))![1]).toBe(version);
  // admin-tools tags read <server>-tctl-<version>-cli-<version>.
  expect(/^ {2}image: temporalio\/admin-tools:(\S+)$/m.exec(compose)![1]).toMatch(new RegExp(`^${version.replace(/\./g, '\\.')}-`));
  expect(ciRun).toContain(`go install go.temporal.io/server/cmd/server@v${version}`);
  expect(ciRun).toContain(`go install go.temporal.io/server/cmd/tools/sql@v${version}`);
});

test('the temporal service and deploy/temporal-postgres.sh run one config file with the same values', () => {
  const temporal = service('temporal');
  const env = serviceEnvironment('temporal');
  const defaults = templateDefaults();

  // compose: --root R --config C --env E reads R/C/E.yaml, which must be the mounted template.
  const entrypoint = [.../^ {4}entrypoint:\n((?: {6}.*\n)+)/m.exec(temporal)![1]!.matchAll(/^ {6}- (\S+)$/gm)].map((m) => m[1]!);
  const flag = (name: string) => entrypoint[entrypoint.indexOf(name) + 1]!;
  expect(entrypoint.slice(-1)).toEqual(['start']);
  expect(temporal).toContain(`- ./deploy/temporal-postgres.yaml:${path.posix.join(flag('--root'), flag('--config'), `${flag('--env')}.yaml`)}:ro`);
  // The script copies the same file to <state>/config/<env>.yaml and starts the server with that --env.
  expect(script).toContain(`cp "$deploy_dir/temporal-postgres.yaml" "$state_dir/config/${flag('--env')}.yaml"`);
  expect(script).toContain(`--root "$state_dir" --config config --env ${flag('--env')} --allow-no-auth start`);
  expect(entrypoint).toContain('--allow-no-auth');

  // The dynamic config: the same file, wherever each side puts it.
  expect(temporal).toContain(`- ./deploy/temporal-dynamicconfig.yaml:${env.DYNAMIC_CONFIG_FILE_PATH}:ro`);
  expect(script).toContain('DYNAMIC_CONFIG_FILE_PATH=$deploy_dir/temporal-dynamicconfig.yaml');

  // The script sets every variable the template reads, and nothing else under those names.
  const exported = Object.fromEntries(
    [.../^ {2}export ((?:.*\\\n)*.*)$/m.exec(script)![1]!.matchAll(/([A-Z0-9_]+)=(\S*)/g)].map((m) => [m[1]!, m[2]!]),
  );
  expect(Object.keys(exported).sort()).toEqual(Object.keys(defaults).sort());

  // compose sets every one of them except the listening ports, which both sides leave at
  // Temporal's usual ports: the template's defaults are the script's ports without a base.
  const portVars = Object.keys(defaults).filter((v) => /_(GRPC|HTTP|MEMBERSHIP)_PORT$/.test(v));
  expect(portVars).toHaveLength(9);
  expect(Object.keys(env).sort()).toEqual(Object.keys(defaults).filter((v) => !portVars.includes(v)).sort());
  for (const v of portVars) expect([v, scriptDefaultPort(exported[v]!.replace(/^\$/, ''))]).toEqual([v, defaults[v]]);

  // Values that have to be equal on both sides.
  expect(env.NUM_HISTORY_SHARDS).toBe(scriptValue('NUM_HISTORY_SHARDS'));
  expect(defaults.NUM_HISTORY_SHARDS).toBe(scriptValue('NUM_HISTORY_SHARDS'));
  expect(env.DBNAME).toBe(scriptValue('db'));
  expect(env.VISIBILITY_DBNAME).toBe(scriptValue('visibility_db').replace('${db}', scriptValue('db')));
  expect(env.LOG_LEVEL).toBe(scriptValue('log_level'));
  expect(env.DB_PORT).toBe(scriptValue('pg_port'));
});

test('the temporal-schema job prepares the same two databases with the same tool steps as the script', () => {
  const job = service('temporal-schema');
  expect(/for db in (.+); do/.exec(job)![1]!.split(' ')).toEqual([
    scriptValue('db'),
    scriptValue('visibility_db').replace('${db}', scriptValue('db')),
  ]);
  const composeSteps = [...job.matchAll(/temporal-sql-tool --db "\$\$db" (.+)$/gm)].map((m) => m[1]!.replace(/\$\$/g, '$'));
  const scriptSteps = [...script.matchAll(/sql_tool_on "\$target" (.+?)(?: &&| \|\|)?$/gm)].map((m) => m[1]!);
  expect(composeSteps).toEqual(['create-database', 'setup-schema -v 0.0', 'update-schema --schema-name "postgresql/v12/$dir"']);
  expect(scriptSteps.slice(0, 3)).toEqual(composeSteps);
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

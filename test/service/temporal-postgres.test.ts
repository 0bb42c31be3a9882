import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Client as PgClient } from 'pg';
import { Client, Connection } from '@temporalio/client';
import { ProjectIdKey, SEARCH_ATTRIBUTE_TYPES } from '../../temporal/search-attributes';
import { freePortRange } from '../helpers/topology';
import { waitUntil } from '../helpers/wait';

/**
 * deploy/temporal-postgres.sh — the production topology's Temporal (what docker-compose.yml runs)
 * built and started here: persistence and visibility on PostgreSQL, on ports and databases of
 * this run's own, so it never meets a server someone else started.
 */

const execFileAsync = promisify(execFile);
const SCRIPT = path.resolve(__dirname, '../../deploy/temporal-postgres.sh');
const PORT_COUNT = 9;
/** grpc.health.v1 ServingStatus.SERVING, and temporal.api.enums.v1.IndexedValueType by the names search-attributes.ts uses. */
const SERVING = 1;
const INDEXED_VALUE_TYPE = { Text: 1, Keyword: 2, Int: 3, Double: 4, Bool: 5, Datetime: 6, KeywordList: 7 } as const;
const runId = `${Date.now().toString(36)}_${process.pid}`;
const db = `tidings_t_${runId}`;
const stateDir = mkdtempSync(path.join(os.tmpdir(), 'tidings-temporal-pg-'));
const adminUrl = process.env.TEST_POSTGRES_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
let portBase = 0;
let address = '';
let connection: Connection | undefined;

function scriptEnv(): NodeJS.ProcessEnv {
  const pg = new URL(adminUrl);
  return {
    ...process.env,
    PATH: [process.env.PATH, '/usr/local/go/bin', path.join(os.homedir(), 'go', 'bin')].join(path.delimiter),
    TEMPORAL_PG_HOST: pg.hostname,
    TEMPORAL_PG_PORT: pg.port || '5432',
    TEMPORAL_PG_USER: decodeURIComponent(pg.username),
    TEMPORAL_PG_PASSWORD: decodeURIComponent(pg.password),
    TEMPORAL_PG_DB: db,
    TEMPORAL_PG_PORT_BASE: String(portBase),
    TEMPORAL_PG_STATE_DIR: stateDir,
    TEMPORAL_NAMESPACE: 'default',
  };
}

async function script(...args: string[]): Promise<string> {
  try {
    const { stdout } = await execFileAsync(SCRIPT, args, { env: scriptEnv(), timeout: 240_000 });
    return stdout.trim();
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new Error(`${SCRIPT} ${args.join(' ')} failed: ${e.message}\n${e.stderr ?? ''}`);
  }
}

/** TCP ports the process listens on, from /proc: its socket inodes matched against the kernel's tables. */
function listeningPorts(pid: number): number[] {
  const inodes = new Set(
    readdirSync(`/proc/${pid}/fd`)
      .map((fd) => {
        try {
          return /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`))?.[1];
        } catch {
          return undefined; // closed since the listing
        }
      })
      .filter((inode): inode is string => !!inode),
  );
  const ports = new Set<number>();
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    for (const line of readFileSync(table, 'utf8').split('\n').slice(1)) {
      const cols = line.trim().split(/\s+/);
      // cols: sl local_address rem_address st ... inode (index 9); st 0A is LISTEN
      if (cols[3] === '0A' && inodes.has(cols[9]!)) ports.add(parseInt(cols[1]!.split(':').at(-1)!, 16));
    }
  }
  return [...ports].sort((a, b) => a - b);
}

beforeAll(async () => {
  portBase = await freePortRange(PORT_COUNT);
  address = await script('start');
  connection = await Connection.connect({ address });
}, 300_000);

afterAll(async () => {
  await connection?.close();
  // Also after a failed start: the script stops whatever is running and drops both databases.
  await script('stop', '--drop');
  rmSync(stateDir, { recursive: true, force: true });
}, 120_000);

test('the server is SERVING on the chosen base port, listens on no port outside its block, and a second start reuses it', async () => {
  expect(address).toBe(`127.0.0.1:${portBase}`);
  const health = await connection!.healthService.check({});
  expect(health.status).toBe(SERVING);
  const pid = Number(readFileSync(path.join(stateDir, 'server.pid'), 'utf8'));
  const ports = listeningPorts(pid);
  expect(ports).toContain(portBase);
  expect(ports.filter((p) => p < portBase || p >= portBase + PORT_COUNT)).toEqual([]);

  expect(await script('start')).toBe(address);
  expect(Number(readFileSync(path.join(stateDir, 'server.pid'), 'utf8'))).toBe(pid);
  expect(await script('status')).toBe(address);
});

test('the namespace has exactly the search attributes the workflows set', async () => {
  const { customAttributes } = await connection!.operatorService.listSearchAttributes({ namespace: 'default' });
  const expected = Object.fromEntries(Object.entries(SEARCH_ATTRIBUTE_TYPES).map(([name, type]) => [name, INDEXED_VALUE_TYPE[type]]));
  const registered = Object.fromEntries(Object.entries(customAttributes ?? {}).map(([name, type]) => [name, Number(type)]));
  expect(registered).toEqual(expected);
});

test('a workflow started with a ProjectId is found by a visibility query, and its row is in the PostgreSQL visibility database', async () => {
  const client = new Client({ connection: connection!, namespace: 'default' });
  const projectId = `prj_${runId}`;
  const workflowId = `visibility-probe-${runId}`;
  // No worker polls this queue: the execution only has to exist, not run.
  await client.workflow.start('visibilityProbe', {
    taskQueue: `no-worker-${runId}`,
    workflowId,
    typedSearchAttributes: [{ key: ProjectIdKey, value: projectId }],
  });

  const found = await waitUntil(
    async () => {
      const ids: string[] = [];
      for await (const wf of client.workflow.list({ query: `ProjectId = "${projectId}"` })) ids.push(wf.workflowId);
      return ids.length ? ids : undefined;
    },
    { timeoutMs: 60_000, intervalMs: 250, what: 'the visibility query to return the workflow' },
  );
  expect(found).toEqual([workflowId]);

  const visibilityUrl = new URL(adminUrl);
  visibilityUrl.pathname = `/${db}_visibility`;
  const pg = new PgClient({ connectionString: visibilityUrl.toString() });
  await pg.connect();
  try {
    const { rows } = await pg.query<{ workflow_type_name: string; search_attributes: unknown }>(
      'select workflow_type_name, search_attributes from executions_visibility where workflow_id = $1',
      [workflowId],
    );
    expect(rows).toHaveLength(1);
    expect(rows[0]!.workflow_type_name).toBe('visibilityProbe');
    expect(Object.values(rows[0]!.search_attributes as Record<string, unknown>)).toContain(projectId);
  } finally {
    await pg.end();
  }
});

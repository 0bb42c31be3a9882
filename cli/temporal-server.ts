import { spawn, execFile } from 'node:child_process';
import { accessSync, constants as fsConstants, createWriteStream } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Connection } from '@temporalio/client';
import { SEARCH_ATTRIBUTE_TYPES } from '../temporal/search-attributes';
import { StartupError } from './errors';

const execFileAsync = promisify(execFile);

export const TEMPORAL_CLI_VERSION = 'v1.5.1';
const GO_INSTALL_ARGS = ['install', `github.com/temporalio/cli/cmd/temporal@${TEMPORAL_CLI_VERSION}`];

function isExecutable(file: string): boolean {
  try {
    accessSync(file, fsConstants.X_OK);
    return true;
  } catch {
    return false;
  }
}

function onPath(name: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    if (dir && isExecutable(path.join(dir, name))) return path.join(dir, name);
  }
  return undefined;
}

/** Locates the `temporal` CLI, building it with Go as a last resort (takes minutes). */
export async function findTemporalCli(opts: {
  cliPath?: string;
  allowBuild: boolean;
  log: (msg: string) => void;
}): Promise<string> {
  if (opts.cliPath) {
    if (!isExecutable(opts.cliPath)) throw new StartupError(`TEMPORAL_CLI_PATH=${opts.cliPath} does not exist or is not executable`);
    return opts.cliPath;
  }
  const found = onPath('temporal');
  if (found) return found;
  const goBins = [process.env.GOPATH, path.join(os.homedir(), 'go')]
    .filter((d): d is string => !!d)
    .flatMap((d) => d.split(path.delimiter))
    .map((d) => path.join(d, 'bin', 'temporal'));
  const built = goBins.find(isExecutable);
  if (built) return built;

  const go = onPath('go');
  if (opts.allowBuild && go) {
    opts.log(`Temporal CLI not found; building it with "go ${GO_INSTALL_ARGS.join(' ')}" (this takes several minutes the first time)...`);
    await new Promise<void>((resolve, reject) => {
      const child = spawn(go, GO_INSTALL_ARGS, { stdio: ['ignore', 'inherit', 'inherit'] });
      child.on('error', reject);
      child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`go install exited with code ${code}`))));
    });
    const gopath = (await execFileAsync(go, ['env', 'GOPATH'])).stdout.trim().split(path.delimiter)[0] ?? '';
    const bin = path.join(gopath, 'bin', 'temporal');
    if (isExecutable(bin)) return bin;
    throw new Error(`go install succeeded but ${bin} is missing`);
  }
  throw new StartupError(
    [
      'The Temporal CLI (`temporal`) is needed to run a local Temporal dev server, and it was not found.',
      'Do one of:',
      `  - install Go (https://go.dev/dl/) and run: go ${GO_INSTALL_ARGS.join(' ')}`,
      '  - set TEMPORAL_CLI_PATH to an existing `temporal` binary',
      '  - set TEMPORAL_ADDRESS to an existing Temporal server (host:port)',
    ].join('\n'),
  );
}

/** A port the OS considers free right now on 127.0.0.1. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

async function isPortFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

/** True when a Temporal frontend answers at `address` and knows `namespace` (used to reuse a running server). */
export async function isTemporalReachable(address: string, namespace: string): Promise<boolean> {
  let connection: Connection | undefined;
  try {
    connection = await Connection.connect({ address, connectTimeout: 2_000 });
    const conn = connection;
    await conn.withDeadline(Date.now() + 2_000, () => conn.workflowService.describeNamespace({ namespace }));
    return true;
  } catch {
    return false;
  } finally {
    await connection?.close().catch(() => undefined);
  }
}

/**
 * start-dev only registers search attributes when it first creates a namespace, so a persisted
 * DB (or a reused server) misses attributes added later; add whatever is missing.
 */
export async function ensureSearchAttributes(connection: Connection, namespace: string): Promise<void> {
  const { customAttributes } = await connection.operatorService.listSearchAttributes({ namespace });
  const missing = Object.entries(SEARCH_ATTRIBUTE_TYPES).filter(([name]) => !(name in (customAttributes ?? {})));
  if (missing.length === 0) return;
  await connection.operatorService.addSearchAttributes({
    namespace,
    searchAttributes: Object.fromEntries(missing.map(([name, type]) => [name, indexedValueType(type)])),
  });
}

// Values of temporal.api.enums.v1.IndexedValueType.
function indexedValueType(type: 'Keyword' | 'Text' | 'Int' | 'Datetime' | 'Bool'): number {
  return { Text: 1, Keyword: 2, Int: 3, Bool: 5, Datetime: 6 }[type];
}

async function probe(address: string, namespace: string): Promise<void> {
  const connection = await Connection.connect({ address, connectTimeout: 5_000 });
  try {
    await connection.withDeadline(Date.now() + 5_000, () => connection.workflowService.describeNamespace({ namespace }));
    await ensureSearchAttributes(connection, namespace);
  } finally {
    await connection.close().catch(() => undefined);
  }
}

export interface DevServerHandle {
  address: string;
  uiUrl: string | undefined;
  namespace: string;
  stop(): Promise<void>;
}

export interface DevServerOptions {
  cliPath: string;
  port?: number;
  uiPort?: number | false;
  dbFile?: string;
  namespace?: string;
  readinessTimeoutMs?: number;
  log?: (msg: string) => void;
  logFile?: string;
}

/** The dev server's process ended before it answered: nothing was served, so starting it again is safe. */
class DevServerExited extends StartupError {}

/**
 * Starts `temporal server start-dev` and waits until it answers. start-dev picks its internal ports
 * itself and now and then panics while it sets them up (seen once in dozens of starts on a busy
 * machine), before it serves anything: such a start is tried once more.
 */
export async function startTemporalDevServer(opts: DevServerOptions): Promise<DevServerHandle> {
  try {
    return await startDevServerOnce(opts);
  } catch (err) {
    if (!(err instanceof DevServerExited)) throw err;
    opts.log?.(`${err.message}\nStarting it once more.`);
    return startDevServerOnce(opts);
  }
}

async function startDevServerOnce(opts: DevServerOptions): Promise<DevServerHandle> {
  const namespace = opts.namespace ?? 'default';
  const log = opts.log ?? (() => undefined);
  const port = opts.port || (await freePort());
  // Otherwise the readiness probe would happily talk to whatever already listens there.
  if (opts.port && !(await isPortFree(port))) {
    throw new StartupError(
      `Port ${port} is already in use; if it is a Temporal server from an earlier run, reuse it (see isTemporalReachable) or pick another port.`,
    );
  }
  const address = `127.0.0.1:${port}`;
  // start-dev's own default UI port (port + 1000) may be taken; only fall back when it is.
  let uiPort: number | undefined;
  if (opts.uiPort !== false) {
    uiPort = opts.uiPort ?? (port + 1000 <= 65535 && (await isPortFree(port + 1000)) ? port + 1000 : await freePort());
  }

  // History/matching/worker, metrics and HTTP ports are picked free by start-dev itself (v1.5.1),
  // which holds them in TIME_WAIT to avoid reuse; choosing them here would only add a race.
  const args = ['server', 'start-dev', '--ip', '127.0.0.1', '--port', String(port), '--log-level', 'warn'];
  args.push(...(uiPort === undefined ? ['--headless'] : ['--ui-port', String(uiPort)]));
  if (opts.dbFile) args.push('--db-filename', opts.dbFile);
  // "default" is always created; naming it again is redundant.
  if (namespace !== 'default') args.push('--namespace', namespace);
  for (const [name, type] of Object.entries(SEARCH_ATTRIBUTE_TYPES)) args.push('--search-attribute', `${name}=${type}`);

  log(`Starting Temporal dev server on ${address}${opts.dbFile ? ` (state in ${opts.dbFile})` : ' (in-memory)'}`);
  // Own process group: a terminal Ctrl-C must not kill the server before our workers have drained.
  const child = spawn(opts.cliPath, args, { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  const logStream = opts.logFile ? createWriteStream(opts.logFile, { flags: 'a' }) : undefined;
  // The first lines say why it stopped (a panic's message), the last where.
  const head: string[] = [];
  const tail: string[] = [];
  let skipped = 0;
  for (const stream of [child.stdout, child.stderr]) {
    stream.on('data', (chunk: Buffer) => {
      logStream?.write(chunk);
      const lines = chunk.toString('utf8').split('\n').filter(Boolean);
      const toHead = lines.splice(0, Math.max(0, 10 - head.length));
      head.push(...toHead);
      tail.push(...lines);
      skipped += tail.splice(0, Math.max(0, tail.length - 30)).length;
    });
  }
  let exited: string | undefined;
  const exitPromise = new Promise<void>((resolve) => {
    child.on('error', (err) => {
      exited = `failed to spawn: ${err.message}`;
      resolve();
    });
    child.on('exit', (code, signal) => {
      exited = `exited with ${signal ?? `code ${code}`}`;
      resolve();
    });
  });
  // Detached children outlive a crashed parent; take the server down with us.
  const killOnExit = () => child.kill('SIGTERM');
  process.on('exit', killOnExit);

  const stop = async (): Promise<void> => {
    process.off('exit', killOnExit);
    if (exited === undefined) {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exitPromise;
      clearTimeout(timer);
    }
    await new Promise((resolve) => (logStream ? logStream.end(resolve) : resolve(undefined)));
  };

  const started = Date.now();
  const deadline = started + Math.max(opts.readinessTimeoutMs ?? 90_000, 60_000);
  // Lets a probe give up as soon as the process dies instead of waiting for its connect timeout.
  const died = exitPromise.then(() => Promise.reject(new Error('server process exited')));
  died.catch(() => undefined);
  let lastError = 'not attempted';
  for (let delay = 250; exited === undefined; delay = Math.min(delay * 2, 2_000)) {
    try {
      await Promise.race([probe(address, namespace), died]);
      log(`Temporal dev server ready on ${address} after ${((Date.now() - started) / 1000).toFixed(1)}s`);
      return { address, uiUrl: uiPort === undefined ? undefined : `http://127.0.0.1:${uiPort}`, namespace, stop };
    } catch (err) {
      lastError = err instanceof Error ? err.message : String(err);
    }
    if (Date.now() + delay > deadline) break;
    await Promise.race([new Promise((r) => setTimeout(r, delay)), exitPromise]);
  }

  const exitedEarly = exited !== undefined;
  const reason = exited ?? `not ready after ${Math.round((Date.now() - started) / 1000)}s (last error: ${lastError})`;
  await stop();
  const output = [...head, ...(skipped > 0 ? [`… (${skipped} lines)`] : []), ...tail].join('\n') || '(none)';
  const message = `Temporal dev server (${opts.cliPath} ${args.join(' ')}) ${reason}.\nIts output:\n${output}`;
  throw exitedEarly ? new DevServerExited(message) : new StartupError(message);
}

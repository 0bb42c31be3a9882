import { type ChildProcess, spawn } from 'node:child_process';
import { accessSync, constants as fsConstants } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort } from '../../cli/temporal-server';
import { waitUntil } from './wait';

/**
 * A real S3-protocol server (gofakes3, in-memory backend) on 127.0.0.1, for the object-storage
 * tests. The binary comes from GOFAKES3_PATH, PATH or the Go bin folder; .ci/run installs it with
 * `go install github.com/johannesboyne/gofakes3/cmd/gofakes3@v1.2.0`. It checks no signatures
 * and serves objects to anonymous GETs, as a public-read bucket would.
 *
 *   const s3 = await startGofakes3('images');
 *   // S3_ENDPOINT = s3.endpoint, S3_BUCKET = s3.bucket, S3_FORCE_PATH_STYLE = 'true'
 *   await s3.stop();
 */
export interface Gofakes3 {
  /** http://127.0.0.1:<port> */
  readonly endpoint: string;
  /** Created at start. */
  readonly bucket: string;
  stop(): Promise<void>;
}

const INSTALL = 'go install github.com/johannesboyne/gofakes3/cmd/gofakes3@v1.2.0';

function findBinary(): string {
  const dirs = [
    ...(process.env.PATH ?? '').split(path.delimiter),
    ...[process.env.GOPATH, path.join(os.homedir(), 'go')].filter((d): d is string => !!d).map((d) => path.join(d, 'bin')),
  ];
  const candidates = [process.env.GOFAKES3_PATH, ...dirs.filter(Boolean).map((d) => path.join(d, 'gofakes3'))];
  for (const file of candidates) {
    if (!file) continue;
    try {
      accessSync(file, fsConstants.X_OK);
      return file;
    } catch {
      // not this one
    }
  }
  throw new Error(`gofakes3 not found (GOFAKES3_PATH, PATH, ~/go/bin); install it with: ${INSTALL}`);
}

export async function startGofakes3(bucket = 'tidings-test', timeoutMs = 15_000): Promise<Gofakes3> {
  const binary = findBinary();
  const port = await freePort();
  const endpoint = `http://127.0.0.1:${port}`;
  const child = spawn(binary, ['-host', `127.0.0.1:${port}`, '-backend', 'memory', '-initialbucket', bucket], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let output = '';
  child.stderr!.on('data', (c: Buffer) => {
    output = (output + c.toString()).slice(-4000);
  });
  let exited = false;
  const exit = new Promise<void>((resolve) => {
    child.once('exit', () => {
      exited = true;
      resolve();
    });
    child.once('error', (err) => {
      output += `\n${err.message}`;
      exited = true;
      resolve();
    });
  });

  // Ready once the bucket answers; before that the port refuses connections.
  const ready = async () => {
    if (await bucketAnswers(endpoint, bucket)) return true;
    if (exited) throw new Error('exited');
    return false;
  };
  await waitUntil(ready, timeoutMs).catch(async () => {
    await stop(child, exit);
    throw new Error(`gofakes3 did not answer on ${endpoint} within ${timeoutMs} ms (exited: ${exited}):\n${output}`);
  });
  return { endpoint, bucket, stop: () => stop(child, exit) };
}

async function bucketAnswers(endpoint: string, bucket: string): Promise<boolean> {
  try {
    const res = await fetch(`${endpoint}/${bucket}`, { signal: AbortSignal.timeout(1000) });
    await res.arrayBuffer();
    return res.status === 200;
  } catch {
    return false;
  }
}

async function stop(child: ChildProcess, exit: Promise<void>): Promise<void> {
  if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
  await exit;
}

import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { StartupError } from '../../cli/errors';
import { findTemporalCli, isTemporalReachable, startTemporalDevServer } from '../../cli/temporal-server';

/**
 * The embedded Temporal dev server (cli/temporal-server.ts): a start-dev that dies as it starts,
 * as its own port picking now and then makes it, is started once more. The CLI here is a script
 * that panics for its first starts, then runs the real `temporal`.
 */

jest.setTimeout(120_000);

let dir: string;
let realCli: string;

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'tidings-devserver-'));
  realCli = await findTemporalCli({ cliPath: process.env.TEMPORAL_CLI_PATH, allowBuild: false, log: () => undefined });
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A `temporal` that panics on its first `failures` starts, then is the real one; counts its starts. */
function cliPanicking(name: string, failures: number) {
  const file = path.join(dir, name);
  const counter = path.join(dir, `${name}.starts`);
  writeFileSync(
    file,
    [
      '#!/bin/sh',
      `n=$(cat '${counter}' 2>/dev/null || echo 0); n=$((n + 1)); echo "$n" > '${counter}'`,
      `if [ "$n" -le ${failures} ]; then`,
      `  echo 'panic: failed assigning ephemeral port: start '"$n" >&2`,
      '  echo "goroutine 1 [running]:" >&2',
      '  exit 2',
      'fi',
      `exec '${realCli}' "$@"`,
      '',
    ].join('\n'),
  );
  chmodSync(file, 0o755);
  return { path: file, starts: () => Number(readFileSync(counter, 'utf8')) };
}

test('a dev server that panics as it starts is started once more, and the panic is logged', async () => {
  const cli = cliPanicking('once', 1);
  const logged: string[] = [];
  const server = await startTemporalDevServer({ cliPath: cli.path, port: 0, uiPort: false, log: (m) => logged.push(m) });
  try {
    expect(cli.starts()).toBe(2);
    expect(await isTemporalReachable(server.address, server.namespace)).toBe(true);
    expect(logged.join('\n')).toMatch(/exited with code 2[\s\S]*panic: failed assigning ephemeral port: start 1[\s\S]*Starting it once more/);
  } finally {
    await server.stop();
  }
});

test('one that panics again fails with the second panic’s message, after two starts', async () => {
  const cli = cliPanicking('always', 99);
  const started = startTemporalDevServer({ cliPath: cli.path, port: 0, uiPort: false });
  await expect(started).rejects.toThrow(StartupError);
  await expect(started).rejects.toThrow(/exited with code 2[\s\S]*panic: failed assigning ephemeral port: start 2/);
  expect(cli.starts()).toBe(2);
});

import { type ChildProcess, spawn } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { waitUntil } from './wait';

export interface StripeMock {
  /** `http://127.0.0.1:<port>`, for STRIPE_API_URL. */
  url: string;
  close(): Promise<void>;
}

const executable = (file: string) => {
  try {
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
};

/** STRIPE_MOCK_PATH, else `stripe-mock` on PATH or in the Go bin directories (.ci/run installs it there). */
function findStripeMock(): string {
  if (process.env.STRIPE_MOCK_PATH) return process.env.STRIPE_MOCK_PATH;
  const dirs = [
    ...(process.env.PATH ?? '').split(path.delimiter),
    ...(process.env.GOPATH ?? '').split(path.delimiter).filter(Boolean).map((d) => path.join(d, 'bin')),
    path.join(os.homedir(), 'go', 'bin'),
  ];
  const found = dirs.filter(Boolean).map((d) => path.join(d, 'stripe-mock')).find(executable);
  if (!found) throw new Error('stripe-mock not found: run `go install github.com/stripe/stripe-mock@v0.203.0` or set STRIPE_MOCK_PATH');
  return found;
}

/**
 * Stripe's own API mock on loopback, on ports the OS picks (both listeners, so parallel runs never
 * collide); resolves once it answers on the HTTP address it prints.
 */
export async function startStripeMock(): Promise<StripeMock> {
  const child: ChildProcess = spawn(findStripeMock(), ['-http-addr', '127.0.0.1:', '-https-addr', '127.0.0.1:'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const url = await new Promise<string>((resolve, reject) => {
    let output = '';
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`stripe-mock did not start within 20 s:\n${output}`));
    }, 20_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString('utf8');
      const match = /Listening for HTTP at address: (\S+)/.exec(output);
      if (match) {
        clearTimeout(timer);
        resolve(`http://${match[1]}`);
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`stripe-mock exited with code ${code}:\n${output}`));
    });
  });
  // The address is printed as the listener opens; a first answered request confirms it serves.
  const answers = () =>
    fetch(`${url}/v1/customers`, { headers: { Authorization: 'Bearer sk_test_ready' } }).then(
      (r) => r.ok,
      () => false,
    );
  await waitUntil(answers, 10_000).catch(() => {
    child.kill('SIGKILL');
    throw new Error(`stripe-mock at ${url} does not answer`);
  });
  return {
    url,
    close: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}

#!/usr/bin/env node
import { ConfigError, loadConfig } from '../config';
import { createOrm, migrate } from '../db/orm';
import { createProject, rotateProjectKeys } from '../db/projects/projects';
import { disableProject, enableProject } from '../db/projects/security';
import { createProjectForOwner } from '../db/accounts/user-projects';
import { setThrottleRate } from '../db/messages/send-throttle';
import { AppError } from '../errors';
import { StartupError } from './errors';
import { resolveDatabase } from './services';
import { superviseService } from './supervise';

const USAGE = `Usage: tidings <command>

  start [--api | --worker]         run the service; by default both roles, the worker and the
                                   API, as two processes under this one; --api or --worker
                                   runs that role alone in this process
  migrate                          apply database migrations
  project create <name> [--owner <email>]
                                   create a project; prints {id, name, secretKey, publicKey}.
                                   --owner: the account (signed up already) that owns it and
                                   sees it in the dashboard; without it no user can see it
  project rotate-keys <projectId>  replace both keys of a project; prints the new ones
  project disable <projectId> [--reason <text>]
                                   disable a project: writes get 403 PROJECT_DISABLED, its mail
                                   stops; recorded as a suspension
  project enable <projectId>       enable it again and lift its open suspension
  project throttle <projectId> <emailsPerSecond | off>
                                   hold all of a project's mail (transactional, journeys,
                                   campaigns, retries) to this rate; off: campaigns at
                                   SEND_THROTTLE_PER_SECOND, the rest unthrottled
  contacts import <file> --project <projectId> [--timeout <seconds>]
                                   import a CSV file (UTF-8, at most 5 MB) into a project; shows
                                   progress on stderr until the worker finishes, then prints the
                                   job JSON. Exit 0 completed, 1 failed, 2 still queued/running
                                   after the timeout (default 600 s)

Configuration comes from the environment (see docs/configuration.md).`;

// Progress goes to stderr so stdout stays machine-readable JSON. Under `tidings start` each role's
// process (cli/supervise.ts, started with an IPC channel) names itself.
const role = process.send && ['--api', '--worker'].find((flag) => process.argv.includes(flag));
const log = (msg: string) => process.stderr.write(`[tidings${role ? ` ${role.slice(2)}` : ''}] ${msg}\n`);

/** Runs a database command against the configured (or embedded) database, then lets go of it. */
async function withDatabase<T>(fn: (orm: Awaited<ReturnType<typeof createOrm>>) => Promise<T>): Promise<T> {
  const config = loadConfig();
  const db = await resolveDatabase(config, log);
  try {
    const orm = await createOrm(db.url, {}, config.temporal.taskQueue);
    try {
      await migrate(orm);
      return await fn(orm);
    } finally {
      await orm.close();
    }
  } finally {
    // An embedded PostgreSQL started just for this command stops again; a reused one keeps running.
    await db.stop();
  }
}

const fail = (message: string): number => {
  process.stderr.write(`${message}\n\n${USAGE}\n`);
  return 1;
};

async function main(argv: string[]): Promise<number> {
  // Before anything else: `tidings start --help` must print help, not start the service.
  if (argv.includes('--help') || argv.includes('-h') || argv[0] === 'help') {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const [command, ...rest] = argv;
  switch (command) {
    case undefined:
      return fail('No command given.');
    case 'start': {
      const unknown = rest.filter((a) => a !== '--api' && a !== '--worker');
      if (unknown.length) return fail(`Unknown option for start: ${unknown.join(' ')}`);
      const apiOnly = rest.includes('--api');
      const workerOnly = rest.includes('--worker');
      // Both flags (or neither) mean both roles, each in a process of its own.
      if (apiOnly === workerOnly) await superviseService(loadConfig(), log);
      else {
        // Loaded by a role's process only: the supervisor runs neither, and with their modules in
        // its heap it spent 0.1-0.2 s of CPU collecting garbage in the service's first 20 s.
        const { startService } = require('./start') as typeof import('./start');
        await startService(loadConfig(), apiOnly ? 'api' : 'worker', log);
      }
      return 0;
    }
    case 'migrate':
      if (rest.length) return fail(`Unexpected argument for migrate: ${rest.join(' ')}`);
      await withDatabase(async () => log('Migrations are up to date'));
      return 0;
    case 'project': {
      const [sub, arg, ...extra] = rest;
      if (sub === 'disable' || sub === 'enable') return setProjectStatus(sub, arg, extra);
      if (sub === 'create') return createProjectCommand(arg, extra);
      if (sub === 'throttle') return setProjectThrottle(arg, extra);
      if (sub !== 'rotate-keys') {
        return fail(sub === undefined ? 'Missing project subcommand.' : `Unknown project subcommand: ${sub}`);
      }
      if (!arg?.trim()) return fail(`project ${sub} needs a project id.`);
      if (extra.length) return fail(`Unexpected argument for project ${sub}: ${extra.join(' ')}`);
      const project = await withDatabase((orm) =>
        rotateProjectKeys(orm.em.fork(), arg.trim()).catch((err: unknown) => {
          if (err instanceof AppError && err.status === 404) {
            throw new AppError(404, err.code, `No project with id "${arg.trim()}"; keys were not changed.`);
          }
          throw err;
        }),
      );
      await writeStdout(`${JSON.stringify(project, null, 2)}\n`);
      return 0;
    }
    case 'contacts': {
      const [sub, ...subArgs] = rest;
      if (sub !== 'import') return fail(sub === undefined ? 'Missing contacts subcommand.' : `Unknown contacts subcommand: ${sub}`);
      // The import's Temporal client, like the roles' modules, loads only for the command that uses it.
      const { parseContactsImportArgs, runContactsImport } = require('./import') as typeof import('./import');
      const parsed = parseContactsImportArgs(subArgs);
      if (typeof parsed === 'string') return fail(parsed);
      return runContactsImport(parsed, { withDatabase, log, writeStdout });
    }
    default:
      return fail(`Unknown command: ${command}`);
  }
}

/** `project create <name> [--owner <email>]`: prints the project with its keys. */
async function createProjectCommand(name: string | undefined, extra: string[]): Promise<number> {
  if (!name?.trim() || name.startsWith('--')) return fail('project create needs a project name.');
  let owner: string | undefined;
  if (extra[0] === '--owner') {
    if (!extra[1]?.trim()) return fail('--owner needs the email of an account.');
    owner = extra[1];
    extra = extra.slice(2);
  }
  if (extra.length) return fail(`Unexpected argument for project create: ${extra.join(' ')}`);
  const project = await withDatabase((orm) =>
    owner ? createProjectForOwner(orm.em.fork(), owner, name.trim()) : createProject(orm.em.fork(), name.trim()),
  );
  if (!owner) log('No --owner given: the keys work, but no dashboard user can see this project');
  await writeStdout(`${JSON.stringify(project, null, 2)}\n`);
  return 0;
}

/** `project disable <id> [--reason <text>]` / `project enable <id>`: prints {id, disabled, changed}. */
async function setProjectStatus(sub: 'disable' | 'enable', arg: string | undefined, extra: string[]): Promise<number> {
  if (!arg?.trim() || arg.startsWith('--')) return fail(`project ${sub} needs a project id.`);
  let reason = 'Disabled by an operator';
  if (sub === 'disable' && extra[0] === '--reason') {
    if (!extra[1]?.trim()) return fail('--reason needs a text.');
    reason = extra[1].trim();
    extra = extra.slice(2);
  }
  if (extra.length) return fail(`Unexpected argument for project ${sub}: ${extra.join(' ')}`);
  const id = arg.trim();
  const changed = await withDatabase((orm) =>
    (sub === 'disable' ? disableProject(orm.em.fork(), id, reason, { by: 'operator' }) : enableProject(orm.em.fork(), id)).catch((err: unknown) => {
      if (err instanceof AppError && err.status === 404) throw new AppError(404, err.code, `No project with id "${id}".`);
      throw err;
    }),
  );
  await writeStdout(`${JSON.stringify({ id, disabled: sub === 'disable', changed }, null, 2)}\n`);
  return 0;
}

/** `project throttle <id> <rate | off>`: prints {id, ratePerSecond}. */
async function setProjectThrottle(arg: string | undefined, extra: string[]): Promise<number> {
  if (!arg?.trim() || arg.startsWith('--')) return fail('project throttle needs a project id.');
  const [given, ...more] = extra;
  const rate = given === 'off' ? null : Number(given);
  if (given === undefined || (rate !== null && !(rate > 0))) return fail('project throttle needs a rate in emails per second (> 0), or off.');
  if (more.length) return fail(`Unexpected argument for project throttle: ${more.join(' ')}`);
  const id = arg.trim();
  await withDatabase((orm) =>
    setThrottleRate(orm.em.fork(), id, rate).catch((err: unknown) => {
      if (err instanceof AppError && err.status === 404) throw new AppError(404, err.code, `No project with id "${id}".`);
      throw err;
    }),
  );
  await writeStdout(`${JSON.stringify({ id, ratePerSecond: rate }, null, 2)}\n`);
  return 0;
}

/** process.exit() right after a write to a pipe must not lose the JSON the caller is waiting for. */
function writeStdout(text: string): Promise<void> {
  return new Promise((resolve, reject) => process.stdout.write(text, (err) => (err ? reject(err) : resolve())));
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    if (err instanceof ConfigError || err instanceof AppError || err instanceof StartupError) log(err.message);
    else log(err instanceof Error ? (err.stack ?? err.message) : String(err));
    process.exit(1);
  },
);

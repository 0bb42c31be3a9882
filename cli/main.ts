#!/usr/bin/env node
import { ConfigError, loadConfig } from '../config';
import { createOrm, migrate } from '../db/orm';
import { createProject, rotateProjectKeys } from '../db/projects';
import { AppError } from '../errors';
import { resolveDatabase } from './services';
import { startService } from './start';

const USAGE = `Usage: tidings <command>

  start [--api | --worker]         run the service (both by default)
  migrate                          apply database migrations
  project create <name>            create a project; prints {id, name, secretKey, publicKey}
  project rotate-keys <projectId>  replace both keys of a project; prints the new ones

Configuration comes from the environment (see README).`;

// Progress goes to stderr so stdout stays machine-readable JSON.
const log = (msg: string) => process.stderr.write(`[tidings] ${msg}\n`);

/** Runs a database command against the configured (or embedded) database, then lets go of it. */
async function withDatabase<T>(fn: (orm: Awaited<ReturnType<typeof createOrm>>) => Promise<T>): Promise<T> {
  const db = await resolveDatabase(loadConfig(), log);
  const orm = await createOrm(db.url);
  try {
    await migrate(orm);
    return await fn(orm);
  } finally {
    await orm.close();
    await db.stop();
  }
}

async function main(argv: string[]): Promise<number> {
  const [command, sub, arg] = argv;
  switch (command) {
    case 'start': {
      const apiOnly = argv.includes('--api');
      const workerOnly = argv.includes('--worker');
      await startService(loadConfig(), { api: !workerOnly, worker: !apiOnly }, log);
      return 0;
    }
    case 'migrate':
      await withDatabase(async () => log('Migrations are up to date'));
      return 0;
    case 'project':
      if (sub === 'create' && arg) {
        const project = await withDatabase((orm) => createProject(orm.em.fork(), arg));
        process.stdout.write(`${JSON.stringify(project, null, 2)}\n`);
        return 0;
      }
      if (sub === 'rotate-keys' && arg) {
        const project = await withDatabase((orm) => rotateProjectKeys(orm.em.fork(), arg));
        process.stdout.write(`${JSON.stringify(project, null, 2)}\n`);
        return 0;
      }
      break;
    case undefined:
    case 'help':
    case '--help':
      process.stdout.write(`${USAGE}\n`);
      return command === undefined ? 1 : 0;
  }
  process.stderr.write(`${USAGE}\n`);
  return 1;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    if (err instanceof ConfigError || err instanceof AppError) log(err.message);
    else log(err instanceof Error ? (err.stack ?? err.message) : String(err));
    process.exit(1);
  },
);

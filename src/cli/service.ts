// serve and migrate: running the service, and bringing its database up to date.
import { quietLogger } from './output.ts';
import type { CliCommand, CommandInput } from './types.ts';

type Command = (input: CommandInput) => Promise<number>;

const serve: Command = async ({ config }) => {
  const { startApp } = await import('../app.ts');
  const app = await startApp(config);
  const log = app.services.log;
  log.info({ url: app.url, role: config.role, background: app.background.map((b) => b.name) }, 'posthorn is running');
  await new Promise<void>((resolve) => {
    // Signal handlers do not keep Node's event loop alive, and a worker process may hold nothing
    // else that does (unref'd poll timers, no HTTP server): this timer keeps it running until told.
    const keepAlive = setInterval(() => {}, 1 << 30);
    const stop = (signal: string) => {
      clearInterval(keepAlive);
      log.info({ signal }, 'shutting down');
      resolve();
    };
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once('SIGINT', () => stop('SIGINT'));
  });
  await app.close();
  return 0;
};

const migrate: Command = async ({ config }) => {
  const { migrateDatabase } = await import('../app.ts');
  const applied = await migrateDatabase(config, await quietLogger(config));
  process.stdout.write(applied.length ? `applied: ${applied.join(', ')}\n` : 'database is up to date\n');
  return 0;
};

export const serviceCommands: CliCommand[] = [
  {
    name: 'serve',
    usage: ['serve                         run the service (HTTP API and delivery workers)'],
    description: 'Runs what --role asks for: the HTTP API (--port), the delivery, webhook and mailbox workers, and the listeners that are configured (--bounce-port, --submission-port). Stops cleanly on SIGTERM or SIGINT. Creates the database and applies migrations at start.',
    run: serve,
  },
  {
    name: 'migrate',
    usage: ['migrate                       apply database migrations and exit'],
    description: 'Applies pending migrations to the database of --database-url (or --data) and prints what was applied. serve does the same at start; run it alone before a rolling upgrade.',
    run: migrate,
  },
];

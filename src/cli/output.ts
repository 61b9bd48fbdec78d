// What every command file shares: printing JSON or text, opening the services.
// The app is imported when a command runs, not when the table loads (src/cli/types.ts).
import type { Config } from '../config.ts';
import type { Services } from '../services.ts';
import { UsageError } from './types.ts';

/** `--json`: one JSON document on stdout; otherwise the human text. */
export function print(json: boolean, value: unknown, text: string): void {
  process.stdout.write(json ? JSON.stringify(value) + '\n' : text + '\n');
}

/**
 * Opens the store (migrating it), runs fn, closes the store. Only the commands that make a new
 * installation (`init`, `account create`) pass `create`: every other command works on existing
 * data, so without a database it says how to make one instead of creating an empty one.
 */
export async function withServices<T>(config: Readonly<Config>, fn: (s: Services) => Promise<T>, opts: { create?: boolean } = {}): Promise<T> {
  const { databaseExists, openServices } = await import('../app.ts');
  if (!opts.create && !databaseExists(config)) {
    throw new UsageError(`no database at ${config.databaseUrl ?? config.data} (--data, DATABASE_URL): create one with \`posthorn init\``);
  }
  const services = await openServices(config, { log: await quietLogger(config) });
  try {
    return await fn(services);
  } finally {
    await services.store.close();
  }
}

/**
 * For read-only commands: runs fn on the services when the database exists, else returns
 * `absent()` without touching the disk, so a command that only reads never creates a database.
 */
export async function withExistingServices<T>(config: Readonly<Config>, fn: (s: Services) => Promise<T>, absent: () => T): Promise<T> {
  const { databaseExists } = await import('../app.ts');
  if (!databaseExists(config)) return absent();
  return withServices(config, fn);
}

/** CLI commands print their own output; the logger only speaks up for warnings. */
export async function quietLogger(config: Readonly<Config>) {
  const { createLogger } = await import('../log.ts');
  return createLogger(config.logLevel === 'info' ? 'warn' : config.logLevel);
}

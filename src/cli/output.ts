// Helpers every command file shares: reading a flag, printing JSON or text, opening the services.
import { openServices } from '../app.ts';
import type { Config } from '../config.ts';
import { createLogger } from '../log.ts';
import type { Services } from '../services.ts';

export function flag(flags: Map<string, string[]>, name: string): string | undefined {
  const v = flags.get(name);
  return v?.[v.length - 1];
}

/** `--json`: one JSON document on stdout; otherwise the human text. */
export function print(json: boolean, value: unknown, text: string): void {
  process.stdout.write(json ? JSON.stringify(value) + '\n' : text + '\n');
}

export async function withServices<T>(config: Readonly<Config>, fn: (s: Services) => Promise<T>): Promise<T> {
  const services = await openServices(config, { log: quietLogger(config) });
  try {
    return await fn(services);
  } finally {
    await services.store.close();
  }
}

/** CLI commands print their own output; the logger only speaks up for warnings. */
export function quietLogger(config: Readonly<Config>) {
  return createLogger(config.logLevel === 'info' ? 'warn' : config.logLevel);
}

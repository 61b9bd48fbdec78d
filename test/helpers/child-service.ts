// A `posthorn serve` child process on a test app's own database and secret, for crash tests that
// kill it with SIGKILL mid-work. Loopback only: DNS goes to a closed port on 127.0.0.1.
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import type { Config } from '../../src/config.ts';

export interface ChildService {
  readonly child: ChildProcess;
  /** SIGKILL, then wait for the exit. */
  kill(): Promise<void>;
}

export function spawnServe(config: Readonly<Config>, args: string[], env: Record<string, string> = {}): ChildService {
  const child = spawn(process.execPath, [path.resolve('bin/posthorn.js'), 'serve', ...args], {
    env: {
      ...process.env,
      POSTHORN_DATA: config.data,
      ...(config.databaseUrl ? { DATABASE_URL: config.databaseUrl } : {}),
      POSTHORN_SECRET_KEY: config.secretKey ?? '',
      POSTHORN_DNS_SERVERS: '127.0.0.1:9',
      LOG_LEVEL: 'silent',
      ...env,
    },
    stdio: 'ignore',
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return {
    child,
    async kill() {
      child.kill('SIGKILL');
      await exited;
    },
  };
}

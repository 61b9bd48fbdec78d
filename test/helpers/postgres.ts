// Fresh PostgreSQL databases for tests: one per test app (CREATE DATABASE posthorn_t_<pid>_<random>
// on the server at POSTHORN_TEST_PG_URL, default postgres://postgres@127.0.0.1:5432/postgres,
// trust auth), dropped when the app closes. The pid in the name lets scripts/run-tests.js drop the
// leftovers of test processes that died, without touching databases of runs still going.
import { execFileSync, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import pg from 'pg';

export const ADMIN_URL = process.env.POSTHORN_TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
/** One statement on the admin database, over a connection of its own; its rows. */
export async function adminQuery<T extends pg.QueryResultRow>(text: string, values: unknown[] = []): Promise<T[]> {
  const client = new pg.Client({ connectionString: ADMIN_URL });
  await client.connect();
  try {
    return (await client.query<T>(text, values)).rows;
  } finally {
    await client.end();
  }
}

export const TEST_DATABASE_PREFIX = 'posthorn_t_';

/** The URL of a database on the admin URL's server. */
export function databaseUrlFor(name: string): string {
  const url = new URL(ADMIN_URL);
  url.pathname = `/${name}`;
  return url.toString();
}

async function withAdmin<T>(fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: ADMIN_URL, connectionTimeoutMillis: 10_000 });
  client.on('error', () => {});
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end().catch(() => {});
  }
}

export async function createFreshPostgresDatabase(): Promise<string> {
  const name = `${TEST_DATABASE_PREFIX}${process.pid}_${randomBytes(6).toString('hex')}`;
  await withAdmin(async (client) => {
    // Two CREATE DATABASE at once from template1 can collide ("source database is being accessed
    // by other users") when one copies while the other still holds template1: retry briefly.
    for (let attempt = 1; ; attempt++) {
      try {
        // As docs/operations.md recommends: UTF-8, C collation (text ordered by code point, as on SQLite).
        await client.query(`CREATE DATABASE "${name}" TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C'`);
        // Tests never outlive a server crash: commits need not wait for the WAL flush. (Production
        // keeps synchronous_commit on: docs/operations.md.)
        await client.query(`ALTER DATABASE "${name}" SET synchronous_commit = off`);
        return;
      } catch (error) {
        if ((error as { code?: string }).code !== '55006' || attempt >= 20) throw error;
        await new Promise((r) => setTimeout(r, 50 * attempt));
      }
    }
  });
  return databaseUrlFor(name);
}

/** Drops a database made by createFreshPostgresDatabase (closing whatever still holds it). */
export async function dropPostgresDatabase(url: string): Promise<void> {
  const name = decodeURIComponent(new URL(url).pathname.slice(1));
  if (!name.startsWith(TEST_DATABASE_PREFIX) || !/^[a-z0-9_]+$/.test(name)) throw new Error(`refusing to drop ${name}: not a test database`);
  await withAdmin((client) => client.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`));
}

/** Stops or starts the machine's PostgreSQL cluster (tests that prove outages; they run alone). */
export function controlPostgresCluster(action: 'start' | 'stop'): void {
  const version = fs.readdirSync('/etc/postgresql')[0];
  execFileSync('pg_ctlcluster', ['--skip-systemctl-redirect', version, 'main', action, ...(action === 'stop' ? ['-m', 'fast'] : [])], { stdio: 'ignore', timeout: 60_000 });
}

/** Whether this process may stop and start the cluster: root, with Debian's pg_ctlcluster. */
export function canControlPostgres(): boolean {
  return process.getuid?.() === 0 && fs.existsSync('/etc/postgresql') && spawnSync('which', ['pg_ctlcluster']).status === 0;
}

/** Waits (bounded) until PostgreSQL answers a query. */
export async function waitForPostgres(timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const client = new pg.Client({ connectionString: ADMIN_URL });
    client.on('error', () => {});
    try {
      await client.connect();
      await client.query('select 1');
      await client.end();
      return;
    } catch (error) {
      await client.end().catch(() => {});
      if (Date.now() > deadline) throw error;
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}

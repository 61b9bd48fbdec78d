// Which database a test run uses (POSTHORN_TEST_DB, set by scripts/run-tests.js): SQLite in the
// test's temp directory (null URL), or a fresh PostgreSQL database per test app.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { migrateToLatest } from '../../src/storage/migrate.ts';
import { openStore, type Store } from '../../src/storage/store.ts';

export type TestDatabase = 'sqlite' | 'postgres';

export function testDatabase(): TestDatabase {
  const which = process.env.POSTHORN_TEST_DB ?? 'sqlite';
  if (which !== 'sqlite' && which !== 'postgres') throw new Error(`unknown POSTHORN_TEST_DB ${which}`);
  return which;
}

/** For `it(..., { skip: onlyOn('postgres') }, ...)`: false to run, else the printed reason. */
export function onlyOn(database: TestDatabase): false | string {
  return testDatabase() === database ? false : `${database} only (this run is on ${testDatabase()})`;
}

export async function freshDatabaseUrl(): Promise<string | null> {
  if (testDatabase() === 'sqlite') return null;
  const { createFreshPostgresDatabase } = await import('./postgres.ts');
  return createFreshPostgresDatabase();
}

/** Releases what freshDatabaseUrl made: drops a PostgreSQL database; SQLite files go with the temp dir. */
export async function releaseDatabaseUrl(url: string | null): Promise<void> {
  if (url === null || !/^postgres(ql)?:/.test(url)) return;
  const { dropPostgresDatabase } = await import('./postgres.ts');
  await dropPostgresDatabase(url);
}

export interface TestStore {
  store: Store;
  /** the database's URL (sqlite:// on SQLite), for more stores or processes on the same database */
  url: string;
  dataDir: string;
  /** another store on the same database (as another process would open it), migrated */
  openAnother(opts?: { poolSize?: number }): Promise<Store>;
  /** closes every store opened here, drops the database, removes the temp directory */
  close(): Promise<void>;
}

/** A fresh, migrated database of the run's kind, opened as a Store (no HTTP, no workers). */
export async function openTestStore(opts: { poolSize?: number } = {}): Promise<TestStore> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'posthorn-store-'));
  const fresh = await freshDatabaseUrl();
  const url = fresh ?? `sqlite://${path.join(dataDir, 'posthorn.db')}`;
  const stores: Store[] = [];
  const open = async (poolSize = opts.poolSize ?? 5) => {
    const store = await openStore({ databaseUrl: url, data: dataDir, dbPoolSize: poolSize });
    stores.push(store);
    await migrateToLatest(store.dialect);
    return store;
  };
  const store = await open();
  return {
    store,
    url,
    dataDir,
    openAnother: (o = {}) => open(o.poolSize),
    async close() {
      for (const s of stores) await s.close();
      await releaseDatabaseUrl(fresh);
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

const SEED_AT = 1_800_000_000_000;

/** An account, its project and one message in it, written straight into the store (ids differ per call). */
export async function seedProject(store: Store): Promise<{ accountId: number; projectId: number; messageId: number }> {
  return store.write(async (trx) => {
    const account = await trx
      .insertInto('accounts')
      .values({ uid: `a-${Math.random()}`, name: 'a', status: 'active', settings: '{}', created_at: SEED_AT, updated_at: SEED_AT })
      .returning('id')
      .executeTakeFirstOrThrow();
    const project = await trx
      .insertInto('projects')
      .values({ account_id: account.id, uid: 'p', name: 'p', status: 'active', settings: '{}', created_at: SEED_AT, updated_at: SEED_AT })
      .returning('id')
      .executeTakeFirstOrThrow();
    const message = await trx
      .insertInto('messages')
      .values({ project_id: project.id, uid: `m-${Math.random()}`, unique_id: 'm@posthorn.test', recipient_count: 1, deliver: 1, created_at: SEED_AT, payload: '{}' })
      .returning('id')
      .executeTakeFirstOrThrow();
    return { accountId: account.id, projectId: project.id, messageId: message.id };
  });
}

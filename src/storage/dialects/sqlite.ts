// SQLite through better-sqlite3: one file, one connection, WAL. Writers are serialised by the single
// connection, so the store groups the writes of one event-loop turn into one transaction
// (groupCommit), and no grouped write is answered before its commit is on disk:
//
// better-sqlite3 is synchronous, so with synchronous=FULL the fsync of every COMMIT stopped the whole
// process (17% of the wall time of durable ingest, docs/decisions/0003-performance.md). Instead, in
// WAL mode: synchronous=NORMAL (SQLite still syncs the WAL before and the database after each
// checkpoint, and the WAL header when it is reused, so a crash cannot corrupt the file) and, after
// each grouped COMMIT, an fdatasync of the -wal file on libuv's thread pool (syncCommitted). The
// store settles the group only when that returns: the same durability as FULL for every answered
// write, while the event loop goes on parsing requests and running the next group. Not in WAL mode
// (:memory:, or a filesystem refusing WAL): synchronous=FULL as before.
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import SqliteDatabase from 'better-sqlite3';
import { Kysely, SqliteDialect } from 'kysely';
import type { StoreDialect } from '../dialect.ts';
import type { Database } from '../schema.ts';

export function openSqlite(file: string): StoreDialect {
  if (file !== ':memory:') fs.mkdirSync(path.dirname(file), { recursive: true });
  const sqlite = new SqliteDatabase(file);
  const wal = String(sqlite.pragma('journal_mode = WAL', { simple: true })).toLowerCase() === 'wal' && file !== ':memory:';
  sqlite.pragma(wal ? 'synchronous = NORMAL' : 'synchronous = FULL');
  sqlite.pragma('busy_timeout = 10000');
  sqlite.pragma('foreign_keys = ON');
  // Keep the WAL from growing without bound under sustained load.
  sqlite.pragma('wal_autocheckpoint = 4000');
  sqlite.pragma('cache_size = -65536');
  const db = new Kysely<Database>({ dialect: new SqliteDialect({ database: withStatementCache(sqlite) }) });
  // Opened at the first sync: the -wal file exists once a transaction has committed, and keeps its
  // inode while this connection is open (resets and truncation rewrite it in place).
  let walFd: number | null = null;
  const syncCommitted = async (): Promise<void> => {
    if (walFd === null) {
      try {
        walFd = fs.openSync(`${file}-wal`, 'r');
      } catch (error) {
        // No WAL file: no transaction has written to it, so there is nothing to make durable.
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
        throw error;
      }
    }
    await fdatasync(walFd);
  };
  return {
    name: 'sqlite',
    db,
    groupCommit: true,
    skipLocked: false,
    bigintType: 'integer',
    textType: 'text',
    addIdColumn: (table) => table.addColumn('id', 'integer', (c) => c.primaryKey().autoIncrement()),
    isUniqueViolation: (error) =>
      typeof error === 'object' && error !== null && String((error as { code?: unknown }).code).startsWith('SQLITE_CONSTRAINT_UNIQUE'),
    ...(wal ? { syncCommitted } : {}),
    close: async () => {
      await db.destroy();
      if (walFd !== null) fs.closeSync(walFd);
      walFd = null;
    },
  };
}

const fdatasync = promisify(fs.fdatasync);

/**
 * Kysely's SQLite driver prepares every statement it runs; at ingest rates sqlite3_prepare was a
 * fifth of the CPU (bench/, docs/decisions/0003-performance.md). Statements are reused by SQL text
 * instead. Safe because the driver runs one statement at a time on the single connection (its
 * mutex also holds the connection for a whole streamed query). Bounded: multi-row INSERTs have as
 * many texts as row counts, so the cache is emptied when it grows past MAX_CACHED_STATEMENTS.
 */
const MAX_CACHED_STATEMENTS = 500;
function withStatementCache(sqlite: SqliteDatabase.Database): { prepare(sql: string): SqliteDatabase.Statement; close(): void } {
  const cache = new Map<string, SqliteDatabase.Statement>();
  return {
    prepare(sql) {
      let statement = cache.get(sql);
      if (statement === undefined) {
        if (cache.size >= MAX_CACHED_STATEMENTS) cache.clear();
        statement = sqlite.prepare(sql);
        cache.set(sql, statement);
      }
      return statement;
    },
    close: () => sqlite.close(),
  };
}

/** The SQLite file for a sqlite:// URL or a data directory. */
export function sqliteFileFrom(databaseUrl: string | null, dataDir: string): string {
  if (databaseUrl === null) return path.join(dataDir, 'posthorn.db');
  const rest = databaseUrl.replace(/^sqlite:(\/\/)?/, '');
  return rest === ':memory:' ? rest : path.resolve(rest);
}

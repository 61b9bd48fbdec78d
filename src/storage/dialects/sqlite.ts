// SQLite through better-sqlite3: one file, one connection, WAL, synchronous=FULL so that a commit
// is on disk (fsync) before the API answers 200. Writers are serialised by the single connection,
// so the store groups the writes of one event-loop turn into one transaction (groupCommit).
import fs from 'node:fs';
import path from 'node:path';
import SqliteDatabase from 'better-sqlite3';
import { Kysely, SqliteDialect } from 'kysely';
import type { StoreDialect } from '../dialect.ts';
import type { Database } from '../schema.ts';

export function openSqlite(file: string): StoreDialect {
  if (file !== ':memory:') fs.mkdirSync(path.dirname(file), { recursive: true });
  const sqlite = new SqliteDatabase(file);
  sqlite.pragma('journal_mode = WAL');
  sqlite.pragma('synchronous = FULL');
  sqlite.pragma('busy_timeout = 10000');
  sqlite.pragma('foreign_keys = ON');
  // Keep the WAL from growing without bound under sustained load.
  sqlite.pragma('wal_autocheckpoint = 4000');
  sqlite.pragma('cache_size = -65536');
  const db = new Kysely<Database>({ dialect: new SqliteDialect({ database: withStatementCache(sqlite) }) });
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
    close: () => db.destroy(),
  };
}

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

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
import { CompiledQuery, Kysely, SqliteDialect, SqliteQueryCompiler, type DatabaseConnection, type Driver, type LimitNode, type QueryCompiler } from 'kysely';
import { StoreUnavailableError } from '../../domain/errors.ts';
import { WriteLockBusyError, type StoreDialect } from '../dialect.ts';
import type { Database } from '../schema.ts';
import { makePrivateDatabaseFiles } from '../private-files.ts';
import { SqliteAcceptanceThread } from './sqlite-acceptance.ts';
import { START_AFTER_WAL_BYTES, startCheckpointer, type Checkpointer } from './sqlite-checkpointer.ts';

export function openSqlite(file: string, opts: { acceptanceThread?: boolean } = {}): StoreDialect {
  // The database holds message content: 0600 in a 0700 directory (storage/private-files.ts).
  if (file !== ':memory:') makePrivateDatabaseFiles(file);
  const sqlite = new SqliteDatabase(file);
  const wal = String(sqlite.pragma('journal_mode = WAL', { simple: true })).toLowerCase() === 'wal' && file !== ':memory:';
  sqlite.pragma(wal ? 'synchronous = NORMAL' : 'synchronous = FULL');
  sqlite.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
  sqlite.pragma('foreign_keys = ON');
  // Keep the WAL from growing without bound under sustained load. Most of each checkpoint's work is
  // done beforehand by a thread of its own (sqlite-checkpointer.ts), started by watchWal.
  sqlite.pragma(`wal_autocheckpoint = ${AUTOCHECKPOINT_PAGES}`);
  // SQLite's own default page cache (2 MiB), not more: in WAL mode every commit of another
  // connection empties it, so under load a larger one holds little; and a commit or a reset scans
  // the cache's whole hash table, which grows with the most pages it ever held (at 64 MiB this scan
  // was 2.4% of a draining worker's CPU, at 2 MiB 0.04%; history pages read no slower:
  // docs/decisions/0003-performance.md, "The page cache: SQLite's default").
  sqlite.pragma(`cache_size = ${PAGE_CACHE_KIB}`);
  const db = new Kysely<Database>({ dialect: new PosthornSqliteDialect({ database: withStatementCache(sqlite, file) }) });
  // Opened at the first sync: the -wal file exists once a transaction has committed, and keeps its
  // inode while this connection is open (resets and truncation rewrite it in place).
  let walFd: number | null = null;
  let checkpointer: Checkpointer | null = null;
  let closed = false;
  /** The -wal file, opened once a transaction has committed (null before: nothing to make durable). */
  const openWal = (): number | null => {
    if (walFd === null) {
      try {
        walFd = fs.openSync(`${file}-wal`, 'r');
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
        throw error;
      }
    }
    return walFd;
  };
  /** After a commit of either connection: the checkpoint thread starts once the WAL has grown. */
  const watchWal = (fd: number) => {
    if (checkpointer === null && !closed && fs.fstatSync(fd).size > START_AFTER_WAL_BYTES) checkpointer = startCheckpointer(file);
  };
  const syncCommitted = async (): Promise<void> => {
    const fd = openWal();
    if (fd === null) return;
    watchWal(fd);
    try {
      await fdatasync(fd);
    } catch (error) {
      throw sqliteUnavailable(error, file) ?? error;
    }
  };
  // Where asked (store.ts openStore), accepted messages are written by a thread of their own
  // (sqlite-acceptance.ts), in WAL mode.
  const acceptance = !wal || !opts.acceptanceThread ? null : new SqliteAcceptanceThread({
    file,
    busyTimeoutMs: BUSY_TIMEOUT_MS,
    autocheckpointPages: AUTOCHECKPOINT_PAGES,
    tightAutocheckpointPages: TIGHT_AUTOCHECKPOINT_PAGES,
    unavailable: (error) => sqliteUnavailable(error, file) ?? lockedOut(error, file),
    onCommitted: () => {
      if (closed) return;
      const fd = openWal();
      if (fd !== null) watchWal(fd);
    },
  });
  return {
    name: 'sqlite',
    db,
    groupCommit: true,
    bigintType: 'integer',
    textType: 'text',
    addIdColumn: (table) => table.addColumn('id', 'integer', (c) => c.primaryKey().autoIncrement()),
    ...(wal ? { syncCommitted } : {}),
    ...(acceptance ? { insertMessageWithTransmissions: (message, transmissions) => acceptance.accept(message, transmissions) } : {}),
    close: async () => {
      closed = true;
      await acceptance?.stop();
      await checkpointer?.stop();
      await db.destroy();
      if (walFd !== null) fs.closeSync(walFd);
      walFd = null;
    },
  };
}

const fdatasync = promisify(fs.fdatasync);

/**
 * Kysely's SQLite dialect with two changes:
 *
 * - A bound LIMIT is written `limit cast(? as integer)`. SQLite marks a statement whose LIMIT is a
 *   bare parameter to be prepared again whenever that parameter is bound (measured on this build,
 *   3.53: ~4 µs more per execution of a one-row lookup, more for the delivery claim), so a cached
 *   statement with `limit ?` was compiled anew on every run. The cast keeps the value a parameter
 *   and the plan.
 * - A transaction begins with BEGIN IMMEDIATE (BEGIN_WRITE), taking the write lock at once. Every
 *   transaction here is the store's group of writes (store.ts; Kysely's migrator runs none on
 *   SQLite). With a plain BEGIN the transaction starts as a reader, and a unit that reads before it
 *   writes (a duplicate check, a re-read) fails with SQLITE_BUSY at its first write whenever another
 *   process (serve's API and delivery processes share the file) committed in between: SQLite
 *   cannot move a reader's snapshot, and calls no busy handler for it.
 */
class PosthornSqliteDialect extends SqliteDialect {
  override createQueryCompiler(): QueryCompiler {
    return new CastLimitCompiler();
  }

  override createDriver(): Driver {
    const driver = super.createDriver();
    driver.beginTransaction = async (connection: DatabaseConnection) => {
      await connection.executeQuery(CompiledQuery.raw(BEGIN_WRITE));
    };
    return driver;
  }
}

/** How every transaction begins (PosthornSqliteDialect); run without waiting (guardStatement). */
const BEGIN_WRITE = 'begin immediate';

/**
 * How long a statement other than BEGIN_WRITE waits for a lock inside SQLite (its busy handler,
 * which sleeps and so stops the event loop). The store's own wait for the write lock is on the
 * event loop, bounded by the same time (store.ts).
 */
export const BUSY_TIMEOUT_MS = 10_000;

class CastLimitCompiler extends SqliteQueryCompiler {
  protected override visitLimit(node: LimitNode): void {
    this.append('limit cast(');
    this.visitNode(node.limit);
    this.append(' as integer)');
  }
}

/**
 * Kysely's SQLite driver prepares every statement it runs; at ingest rates sqlite3_prepare was a
 * fifth of the CPU (bench/, docs/decisions/0003-performance.md). Statements are reused by SQL text
 * instead. Safe because the driver runs one statement at a time on the single connection (its
 * mutex also holds the connection for a whole streamed query). Bounded: multi-row INSERTs have as
 * many texts as row counts, so the cache is emptied when it grows past MAX_CACHED_STATEMENTS.
 * A schema change (CREATE, ALTER, DROP: migrations) empties it too, and is not kept in it: a
 * reader's column names are read once, at prepare (guardStatement), and must not outlive the
 * schema they were read from.
 */
const MAX_CACHED_STATEMENTS = 500;
const SCHEMA_CHANGE = /^\s*(create|alter|drop)\b/i;
function withStatementCache(sqlite: SqliteDatabase.Database, file: string): { prepare(sql: string): GuardedStatement; close(): void } {
  const cache = new Map<string, GuardedStatement>();
  return {
    prepare(sql) {
      let statement = cache.get(sql);
      if (statement === undefined) {
        const changesSchema = SCHEMA_CHANGE.test(sql);
        if (changesSchema || cache.size >= MAX_CACHED_STATEMENTS) cache.clear();
        statement = guardStatement(sqlite, sqlite.prepare(sql), sql, file);
        if (!changesSchema) cache.set(sql, statement);
      }
      return statement;
    },
    close: () => sqlite.close(),
  };
}

type GuardedStatement = Pick<SqliteDatabase.Statement, 'reader' | 'all' | 'run' | 'iterate'>;

/**
 * A statement whose failures name their cause (docs/operations.md, "When the database is away"):
 *
 * - SQLITE_FULL and SQLITE_IOERR become StoreUnavailableError ("disk full: <file>").
 * - On SQLITE_FULL (and some I/O errors) SQLite rolls the whole transaction back by itself. The
 *   ROLLBACK TO / RELEASE / ROLLBACK that the store and Kysely then send would fail with "no such
 *   savepoint" or "cannot rollback - no transaction is active" and hide the cause: with no
 *   transaction open they are no-ops here, so the caller sees the first error, the real one, and
 *   every unit of the group is rejected with it (nothing answered, nothing half-written).
 *
 * A reader returns its rows as arrays (better-sqlite3's raw mode) made into objects here, by one
 * loop over the column names read at prepare: better-sqlite3 builds each row object in C++ one
 * property at a time, which for a page of 251 history rows of 14 columns took 0.8 ms against
 * 0.5 ms this way (docs/decisions/0003-performance.md, "Rows as arrays"). The objects are the same:
 * one property per column in column order, the last of two equal names winning. A row of another
 * length than the names (the schema changed under the statement, by another connection) reads the
 * names again.
 */
function guardStatement(sqlite: SqliteDatabase.Database, statement: SqliteDatabase.Statement, sql: string, file: string): GuardedStatement {
  const endsTransaction = /^\s*(rollback|release)\b/i.test(sql);
  const beginsTransaction = /^\s*begin\b/i.test(sql);
  // BEGIN_WRITE does not wait in SQLite's busy handler: with the write lock held elsewhere it
  // fails at once with WriteLockBusyError, and the store tries again from the event loop. The
  // timeout is set by exec, each time: PRAGMA busy_timeout takes effect when it is compiled, and a
  // prepared one run again is recompiled only from its second run (SQLite expires it after each),
  // so a kept statement would leave the first BEGIN after every prepare in the busy handler.
  const lockWait = sql === BEGIN_WRITE ? { off: () => sqlite.exec('pragma busy_timeout = 0'), on: () => sqlite.exec(`pragma busy_timeout = ${BUSY_TIMEOUT_MS}`) } : null;
  const guard = <T>(run: () => T): T => {
    try {
      return run();
    } catch (error) {
      const unavailable = sqliteUnavailable(error, file);
      if (unavailable?.reason === DISK_FULL) diskFull.add(sqlite);
      throw unavailable ?? error;
    }
  };
  let columns: string[] = [];
  if (statement.reader) {
    columns = columnNames(statement);
    statement.raw(true);
  }
  const toObject = (values: unknown[]): Record<string, unknown> => {
    if (values.length !== columns.length) columns = columnNames(statement);
    const row: Record<string, unknown> = {};
    for (let i = 0; i < values.length; i++) row[columns[i]] = values[i];
    return row;
  };
  return {
    reader: statement.reader,
    all: ((...params: unknown[]) =>
      guard(() => {
        const rows = statement.all(...params) as unknown[][];
        const objects = new Array<Record<string, unknown>>(rows.length);
        for (let i = 0; i < rows.length; i++) objects[i] = toObject(rows[i]);
        return objects;
      })) as SqliteDatabase.Statement['all'],
    run: ((...params: unknown[]) => {
      if (endsTransaction && !sqlite.inTransaction) return { changes: 0, lastInsertRowid: 0 };
      if (beginsTransaction && diskFull.has(sqlite)) shrinkWal(sqlite);
      if (lockWait === null) return guard(() => statement.run(...params));
      lockWait.off();
      try {
        return guard(() => statement.run(...params));
      } catch (error) {
        if (isBusy(error)) throw new WriteLockBusyError(lockedMessage(file), { cause: error });
        throw error;
      } finally {
        lockWait.on();
      }
    }) as SqliteDatabase.Statement['run'],
    iterate: ((...params: unknown[]) => {
      const rows = guard(() => statement.iterate(...params)) as IterableIterator<unknown[]>;
      return (function* () {
        for (const values of rows) yield toObject(values);
      })();
    }) as SqliteDatabase.Statement['iterate'],
  };
}

function columnNames(statement: SqliteDatabase.Statement): string[] {
  return statement.columns().map((c) => c.name);
}

/** Connections that met a full disk since their WAL was last shrunk. */
const diskFull = new WeakSet<SqliteDatabase.Database>();

/**
 * After a full disk, before the next transaction: checkpoint and truncate the WAL, and from then
 * on checkpoint every TIGHT_AUTOCHECKPOINT_PAGES. The WAL keeps the size it grew to, and grows
 * until wal_autocheckpoint pages (16 MB) before the first checkpoint, so on a disk this tight the
 * space freed by the operator would be eaten again by the WAL before any checkpoint ran. Fails
 * quietly while the disk is still full; tried again before the next transaction.
 */
const TIGHT_AUTOCHECKPOINT_PAGES = 128;
/** Pages of WAL after which a commit checkpoints (both connections of a store: sqlite-acceptance.ts). */
const AUTOCHECKPOINT_PAGES = 4000;
/** The connection's page cache, in KiB when negative (SQLite's convention): SQLite's default. */
const PAGE_CACHE_KIB = -2000;
function shrinkWal(sqlite: SqliteDatabase.Database): void {
  try {
    sqlite.pragma(`wal_autocheckpoint = ${TIGHT_AUTOCHECKPOINT_PAGES}`);
    const [result] = sqlite.pragma('wal_checkpoint(TRUNCATE)') as Array<{ busy: number }>;
    if (!result || result.busy === 0) diskFull.delete(sqlite);
  } catch {
    // Still full: the transaction that follows fails with the cause.
  }
}

/** The StoreUnavailableError for an error of a full or failing disk, or null for any other. */
export function sqliteUnavailable(error: unknown, file: string): StoreUnavailableError | null {
  if (error instanceof StoreUnavailableError) return error;
  const code = String((error as { code?: unknown } | null)?.code ?? '');
  if (code === 'SQLITE_FULL' || code === 'ENOSPC') return new StoreUnavailableError(`disk full: ${file}`, { cause: error, reason: DISK_FULL });
  if (code.startsWith('SQLITE_IOERR') || code === 'EIO') {
    return new StoreUnavailableError(`database I/O error: ${file}: ${(error as Error).message}`, { cause: error, reason: 'database I/O error' });
  }
  return null;
}

/** The StoreUnavailableError for a write lock still held by others after BUSY_TIMEOUT_MS, or null. */
function lockedOut(error: unknown, file: string): StoreUnavailableError | null {
  return isBusy(error) ? new StoreUnavailableError(lockedMessage(file), { cause: error, reason: LOCKED }) : null;
}

/** SQLITE_BUSY or one of its extended codes: another connection holds the lock. */
function isBusy(error: unknown): boolean {
  return String((error as { code?: unknown } | null)?.code ?? '').startsWith('SQLITE_BUSY');
}

/** What the log is told when the write lock is held elsewhere (the store waits, then says it). */
const lockedMessage = (file: string) => `database is locked by another connection: ${file}`;

/** The reasons clients are shown (domain/errors.ts StoreUnavailableError): no path. */
const DISK_FULL = 'disk full';
export const LOCKED = 'database locked by another connection';

export { sqliteFileFrom } from '../../domain/database-url.ts';

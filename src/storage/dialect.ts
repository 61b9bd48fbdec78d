// The dialect seam. Everything that differs between SQLite and PostgreSQL is declared here as a
// capability and implemented in dialects/{sqlite,postgres}.ts; the rest of the code is shared
// Kysely. A dialect check anywhere else is a smell (docs/decisions/0001-storage.md).
import { PostgresAdapter, type ColumnDefinitionBuilder, type CreateTableBuilder, type Kysely, type SelectQueryBuilder } from 'kysely';
import type { AcceptedTransmission, Database, MessageRow } from './schema.ts';

export interface StoreDialect {
  readonly name: 'sqlite' | 'postgres';
  readonly db: Kysely<Database>;
  /**
   * Commit the writes that arrive in one event-loop turn together (one fsync for many requests).
   * True where a single connection serialises writers anyway (SQLite); PostgreSQL commits each
   * unit on its own pooled connection and groups fsyncs itself.
   */
  readonly groupCommit: boolean;
  /** Adds the auto-increment integer primary key column `id`. */
  addIdColumn<T extends string>(table: CreateTableBuilder<T, never>): CreateTableBuilder<T, 'id'>;
  /** Column type of epoch-ms timestamps and other large integers. */
  readonly bigintType: 'integer' | 'bigint';
  /** Column type of large text (payloads, PEM keys). */
  readonly textType: 'text';
  /**
   * Where COMMIT returns before the disk has the transaction (SQLite in WAL mode with
   * synchronous=NORMAL), makes everything committed so far durable without blocking the event loop
   * (an fdatasync on libuv's pool). The store answers a grouped unit only after it resolves, and
   * runs the next group's transaction meanwhile. Absent where COMMIT itself is durable.
   */
  syncCommitted?(): Promise<void>;
  /**
   * Inserts a message and its transmissions atomically, together with the other acceptances of the
   * same event-loop turn, and durably before it resolves: on PostgreSQL in ONE statement without
   * BEGIN/COMMIT (a data-modifying CTE with ON CONFLICT DO NOTHING on the uid,
   * dialects/postgres-acceptance.ts); on a SQLite file by a thread of its own with its own
   * connection, in group commits off the event loop (dialects/sqlite-acceptance.ts). Returns the
   * message's id, or null when its (project_id, uid) is taken and nothing was written for it.
   * Absent where acceptance is one unit of store.write (SQLite in memory, or without WAL).
   */
  insertMessageWithTransmissions?(message: MessageRow, transmissions: readonly AcceptedTransmission[]): Promise<number | null>;
  /**
   * The connection pool's counts now: connections open (total), of them idle, and callers waiting
   * for one (PostgreSQL). Absent on SQLite: one connection per store (and one per acceptance
   * thread), nobody waits for it (a writer waits for the write lock, which the store bounds).
   */
  poolStats?(): { total: number; idle: number; waiting: number };
  /**
   * The handle migrations run on, where db bounds each statement's wait (PostgreSQL,
   * --db-timeout-ms): a migration may rewrite a large table. Absent: db.
   */
  readonly migrationDb?: Kysely<Database>;
  /** Cross-process wake-ups (PostgreSQL LISTEN/NOTIFY). Absent where one process owns the file. */
  notify?(channel: string): Promise<void>;
  listen?(channel: string, onNotify: () => void): Promise<() => Promise<void>>;
  close(): Promise<void>;
}

export type ColumnBuilder = (col: ColumnDefinitionBuilder) => ColumnDefinitionBuilder;

/**
 * A write transaction could not begin because another connection holds the database's write lock
 * (SQLite: another process writing the same file). Nothing has run: the store tries the group again
 * from the event loop (store.ts flush) instead of sleeping in SQLite's busy handler.
 */
export class WriteLockBusyError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'WriteLockBusyError';
  }
}

/**
 * Whether an error is a unique-constraint violation, on either database (PostgreSQL 23505, SQLite
 * SQLITE_CONSTRAINT_UNIQUE / _PRIMARYKEY). For storage's own inserts that report a duplicate as a
 * value; callers outside storage/ never ask.
 */
export function isUniqueViolationError(error: unknown): boolean {
  const code = String((error as { code?: unknown } | null)?.code ?? '');
  return code === '23505' || code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY';
}

/** Statement texts run often enough to be prepared on the server, by text: their statement names. */
const serverPrepared = new Map<string, string>();

/**
 * Marks a statement of fixed text as hot: where the server prepares statements per connection
 * (PostgreSQL), it is then parsed and planned once per connection instead of at every execution
 * (measured on this machine: an unprepared API key lookup costs its backend ~170 µs of CPU, mostly
 * parse and plan; docs/decisions/0003-performance.md). Only for a bounded set of texts (each one
 * is a prepared statement in every pooled connection); SQLite caches its prepared statements
 * itself (dialects/sqlite.ts). Returns the text.
 */
export function preparedOnServer(text: string): string {
  if (!serverPrepared.has(text)) serverPrepared.set(text, `posthorn_${serverPrepared.size + 1}`);
  return text;
}

/** The server-side name of a text marked by preparedOnServer, if it is one (dialects/postgres.ts). */
export function serverStatementName(text: string): string | undefined {
  return serverPrepared.get(text);
}

/**
 * Whether statements may take arrays as parameters (PostgreSQL: `unnest($1::bigint[], ...)`), so
 * that a batch of any size is ONE statement of one text. Decided from the connection's own
 * adapter, like skippingLocked below; SQLite keeps its per-row statements, which its group commit
 * makes cheap.
 */
export function takesArrayParameters(db: Kysely<any>): boolean {
  return db.getExecutor().adapter instanceof PostgresAdapter;
}

/**
 * A claim's due-row subquery, with FOR UPDATE SKIP LOCKED where the database has it (PostgreSQL:
 * concurrent claimers pass over each other's rows instead of waiting); SQLite's single writer makes
 * it moot. Decided here, from the connection's own adapter, so no caller outside storage/ reads a
 * dialect capability.
 */
export function skippingLocked<DB, TB extends keyof DB, O>(qb: SelectQueryBuilder<DB, TB, O>, db: Kysely<any>): SelectQueryBuilder<DB, TB, O> {
  return db.getExecutor().adapter instanceof PostgresAdapter ? qb.forUpdate().skipLocked() : qb;
}

/**
 * Whether a queue is claimed by its function of migration 320 (PostgreSQL: planned to walk the due
 * index whatever the table's statistics say) rather than by the plain statement (SQLite, which
 * plans without statistics). Decided from the connection's own adapter, like skippingLocked.
 */
export function claimsByFunction(db: Kysely<any>): boolean {
  return db.getExecutor().adapter instanceof PostgresAdapter;
}

/**
 * Whether the server cleans and analyzes its tables itself, and an operator can turn that off
 * (PostgreSQL's autovacuum); a SQLite file needs neither. Decided from the connection's own
 * adapter, like skippingLocked.
 */
export function vacuumsItself(db: Kysely<any>): boolean {
  return db.getExecutor().adapter instanceof PostgresAdapter;
}

/**
 * Whether the server can answer reads while refusing every write (PostgreSQL: a standby, a primary
 * demoted by a failover, default_transaction_read_only); a SQLite file Posthorn opens is writable
 * or not opened at all. Decided from the connection's own adapter, like skippingLocked.
 */
export function canBeReadOnly(db: Kysely<any>): boolean {
  return db.getExecutor().adapter instanceof PostgresAdapter;
}

/**
 * A read that holds the rows it returns against writers until the transaction ends, waiting for a
 * writer already at them (PostgreSQL FOR SHARE: a later statement of the same transaction, with
 * its fresh snapshot, then sees what that writer committed). SQLite's single writer makes it moot:
 * nothing commits between two statements of a write transaction.
 */
export function holdingRows<DB, TB extends keyof DB, O>(qb: SelectQueryBuilder<DB, TB, O>, db: Kysely<any>): SelectQueryBuilder<DB, TB, O> {
  return db.getExecutor().adapter instanceof PostgresAdapter ? qb.forShare() : qb;
}

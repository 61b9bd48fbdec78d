// The dialect seam. Everything that differs between SQLite and PostgreSQL is declared here as a
// capability and implemented in dialects/{sqlite,postgres}.ts; the rest of the code is shared
// Kysely. A dialect check anywhere else is a smell (docs/decisions/0001-storage.md).
import { PostgresAdapter, type ColumnDefinitionBuilder, type CreateTableBuilder, type Kysely, type SelectQueryBuilder } from 'kysely';
import type { Database } from './schema.ts';

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
  /** Cross-process wake-ups (PostgreSQL LISTEN/NOTIFY). Absent where one process owns the file. */
  notify?(channel: string): Promise<void>;
  listen?(channel: string, onNotify: () => void): Promise<() => Promise<void>>;
  close(): Promise<void>;
}

export type ColumnBuilder = (col: ColumnDefinitionBuilder) => ColumnDefinitionBuilder;

/**
 * Whether an error is a unique-constraint violation, on either database (PostgreSQL 23505, SQLite
 * SQLITE_CONSTRAINT_UNIQUE / _PRIMARYKEY). For storage's own inserts that report a duplicate as a
 * value; callers outside storage/ never ask.
 */
export function isUniqueViolationError(error: unknown): boolean {
  const code = String((error as { code?: unknown } | null)?.code ?? '');
  return code === '23505' || code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY';
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

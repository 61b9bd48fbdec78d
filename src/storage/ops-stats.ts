// The figures the operations gauges read at scrape time (observability/database-gauges.ts). Each
// query walks a partial index that holds only live rows (transmissions_due, outbound_requests_due)
// or a small table (mailboxes), so its cost follows the queue, never the history.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { sql } from 'kysely';
import { StoreUnavailableError } from '../domain/errors.ts';
import { canBeReadOnly, vacuumsItself } from './dialect.ts';
import type { Tx } from './store.ts';

export interface TransmissionQueueStats {
  /** live rows by status (queued, retry) */
  byStatus: Record<string, number>;
  /** held by a worker's lease now */
  leased: number;
  /** may be claimed now */
  due: number;
  /** the earliest next_attempt_at among due rows, null when none is due */
  oldestDueAt: number | null;
}

export async function readTransmissionQueueStats(db: Tx, now: number): Promise<TransmissionQueueStats> {
  // The status test is a literal so the planner matches the partial index transmissions_due.
  const rows = await db
    .selectFrom('transmissions')
    .select((eb) => [
      'status',
      eb.fn.countAll<number>().as('total'),
      sql<number>`sum(case when locked_until > ${now} then 1 else 0 end)`.as('leased'),
      sql<number>`sum(case when next_attempt_at <= ${now} then 1 else 0 end)`.as('due'),
      sql<number | null>`min(case when next_attempt_at <= ${now} then next_attempt_at end)`.as('oldest_due_at'),
    ])
    .where(sql<boolean>`status in ('queued', 'retry')`)
    .groupBy('status')
    .execute();
  const out: TransmissionQueueStats = { byStatus: { queued: 0, retry: 0 }, leased: 0, due: 0, oldestDueAt: null };
  for (const r of rows) {
    out.byStatus[r.status] = Number(r.total);
    out.leased += Number(r.leased ?? 0);
    out.due += Number(r.due ?? 0);
    if (r.oldest_due_at !== null && r.oldest_due_at !== undefined) {
      const at = Number(r.oldest_due_at);
      out.oldestDueAt = out.oldestDueAt === null ? at : Math.min(out.oldestDueAt, at);
    }
  }
  return out;
}

export interface OutboundQueueStats {
  pending: number;
  /** pending requests whose due time has come */
  due: number;
  /** created_at of the oldest pending request */
  oldestPendingAt: number | null;
}

export async function readOutboundQueueStats(db: Tx, now: number): Promise<OutboundQueueStats> {
  const row = await db
    .selectFrom('outbound_requests')
    .select((eb) => [
      eb.fn.countAll<number>().as('pending'),
      sql<number>`sum(case when next_attempt_at <= ${now} then 1 else 0 end)`.as('due'),
      eb.fn.min('created_at').as('oldest'),
    ])
    .where('state', '=', 'pending')
    .executeTakeFirst();
  return {
    pending: Number(row?.pending ?? 0),
    due: Number(row?.due ?? 0),
    oldestPendingAt: row?.oldest === null || row?.oldest === undefined ? null : Number(row.oldest),
  };
}

export interface MailboxStats {
  /** mailboxes by status (active, auth_failed, error) */
  byStatus: Record<string, number>;
  /** mailboxes a watcher holds a session on now (leased) */
  inSession: number;
}

export async function readMailboxStats(db: Tx, now: number): Promise<MailboxStats> {
  const rows = await db
    .selectFrom('mailboxes')
    .select((eb) => ['status', eb.fn.countAll<number>().as('total'), sql<number>`sum(case when locked_until > ${now} then 1 else 0 end)`.as('held')])
    .groupBy('status')
    .execute();
  const out: MailboxStats = { byStatus: { active: 0, auth_failed: 0, error: 0 }, inSession: 0 };
  for (const r of rows) {
    out.byStatus[r.status] = Number(r.total);
    out.inSession += Number(r.held ?? 0);
  }
  return out;
}

/**
 * Answers when the database does: the cheapest round trip. Where the server can answer and still
 * refuse every write (PostgreSQL: a standby, a demoted primary, default_transaction_read_only), a
 * read-only one fails as unavailable, as the writes would (docs/reliability.md).
 */
export async function pingDatabase(db: Tx): Promise<void> {
  if (!canBeReadOnly(db)) {
    await sql`select 1`.execute(db);
    return;
  }
  const { rows } = await sql<{ read_only: string }>`select current_setting('transaction_read_only') as read_only`.execute(db);
  if (rows[0]?.read_only === 'on') throw new StoreUnavailableError('database read-only: transaction_read_only is on (a standby, or default_transaction_read_only)', { reason: 'database read-only' });
}

/** The tables whose rows are updated at every message: autovacuum must visit them. */
const QUEUE_TABLES = ['transmissions', 'messages', 'outbound_requests', 'events'];

/**
 * Why the database will not clean and analyze the queue's tables by itself, or null: PostgreSQL's
 * autovacuum off (or the statistics it works from, track_counts), for the server or for one of
 * the tables (autovacuum_enabled = false). Dead row versions then pile up in the due indexes, and
 * the statements each process prepares once are never re-planned as the tables grow
 * (docs/operations.md, "Vacuum").
 */
export async function maintenanceProblem(db: Tx): Promise<string | null> {
  if (!vacuumsItself(db)) return null;
  const { rows } = await sql<{ autovacuum: string; track_counts: string }>`
    select current_setting('autovacuum') as autovacuum, current_setting('track_counts') as track_counts`.execute(db);
  const { rows: tables } = await sql<{ relname: string }>`
    select c.relname from pg_class c
    where c.oid in (${sql.join(QUEUE_TABLES.map((t) => sql`to_regclass(${t})`))})
      and 'autovacuum_enabled=false' = any(coalesce(c.reloptions, '{}'))
    order by c.relname`.execute(db);
  const server = rows[0];
  const off = [
    ...(server?.autovacuum === 'off' ? ["autovacuum is off (the server's setting)"] : []),
    ...(server?.track_counts === 'off' ? ["track_counts is off (the server's setting)"] : []),
    ...(tables.length > 0 ? [`autovacuum_enabled = false on ${tables.map((t) => t.relname).join(', ')}`] : []),
  ];
  if (off.length === 0) return null;
  return `PostgreSQL will not vacuum nor analyze the queue's tables: ${off.join('; ')}. Turn autovacuum on, or run VACUUM ANALYZE from cron (docs/operations.md, "Vacuum")`;
}

const MIGRATIONS_DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), 'migrations');

/**
 * Migrations present in this build but not applied to the database (names without .ts). Reads the
 * migrator's own table (storage/migrate.ts names it posthorn_migrations).
 */
export async function listPendingMigrations(db: Tx): Promise<string[]> {
  // The migrator's own rule (storage/migrate.ts): .ts in the sources, .js in the compiled dist/.
  const files = fs.readdirSync(MIGRATIONS_DIR).filter((f) => /^\d{3}-.*\.[jt]s$/.test(f) && !f.endsWith('.d.ts')).map((f) => f.replace(/\.[jt]s$/, ''));
  const { rows } = await sql<{ name: string }>`select name from posthorn_migrations`.execute(db);
  const applied = new Set(rows.map((r) => r.name));
  return files.filter((f) => !applied.has(f)).sort();
}

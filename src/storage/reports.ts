// The read queries behind the report methods (operations/reports/). Nothing here writes.
//
// Paging invariant: listings page through an index in a subquery that selects ONLY ids, and join
// the full rows of that one page afterwards (the joins run for the page's rows only). The
// transmission history seeks its page by a dense per-project number (listHistoryPage), so the last
// page costs what the first does; get_messages still steps over skipped index entries with OFFSET
// (more in docs/api/reports.md and docs/decisions/0003-performance.md).
import { sql } from 'kysely';
import type { Message, Suppression, Transmission } from './schema.ts';
import type { Store, Tx } from './store.ts';

/** A message row without its payload (listings never read the payload). */
export type MessageSummary = Omit<Message, 'payload'>;

const MESSAGE_COLUMNS = ['id', 'project_id', 'uid', 'unique_id', 'template', 'subject', 'from_address', 'recipient_count', 'deliver', 'created_at', 'send_at', 'sandbox'] as const;

export async function findMessageByUid(db: Tx, projectId: number, uid: string): Promise<MessageSummary | undefined> {
  return db.selectFrom('messages').select(MESSAGE_COLUMNS).where('project_id', '=', projectId).where('uid', '=', uid).executeTakeFirst();
}

/** One message's accepted payload (JSON text): read for one message at a time, never by a listing. */
export async function findMessagePayload(db: Tx, messageId: number): Promise<string | undefined> {
  const row = await db.selectFrom('messages').select('payload').where('id', '=', messageId).executeTakeFirst();
  return row?.payload;
}

/** The transmissions of one message, in the order they were written (recipient order). */
export async function listTransmissionsOfMessage(db: Tx, messageId: number): Promise<Transmission[]> {
  return db.selectFrom('transmissions').selectAll().where('message_id', '=', messageId).orderBy('id').execute();
}

export interface HistoryQuery {
  projectId: number;
  /** inclusive lower bound of created_at (ms), or null */
  fromMs: number | null;
  /** exclusive upper bound of created_at (ms), or null */
  untilMs: number | null;
  offset: number;
  limit: number;
}

export type HistoryRow = Pick<
  Transmission,
  | 'id' | 'message_id' | 'recipient' | 'status' | 'created_at' | 'completed_at' | 'failed_at' | 'opened_at' | 'clicked_at'
  | 'result_code' | 'result_message' | 'attempts'
> &
  Pick<Message, 'uid' | 'unique_id'>;

/**
 * Gives every transmission of the project written since the last call its history_seq (migration
 * 140): the next numbers after the project's highest, in id (write) order. Ingest writes NULL and
 * pays nothing more; the history listing calls this first, so the cost is per new row, once.
 * Batches of NUMBER_BATCH rows per transaction keep each commit short (a project's first call after
 * a bulk import may have many to number). Serialized per project: SQLite has one writer; on
 * PostgreSQL the project row is locked FOR NO KEY UPDATE, which does not block the KEY SHARE that
 * inserting a transmission takes on it, so ingest never waits for numbering.
 */
export async function numberNewTransmissions(store: Store, projectId: number): Promise<number> {
  let numbered = 0;
  for (;;) {
    const pending = await store.db
      .selectFrom('transmissions')
      .select('id')
      .where('project_id', '=', projectId)
      .where('history_seq', 'is', null)
      .limit(1)
      .executeTakeFirst();
    if (!pending) return numbered;
    const n = await store.write(async (trx) => {
      if (store.dialect.name === 'postgres') await sql`SELECT id FROM projects WHERE id = ${projectId} FOR NO KEY UPDATE`.execute(trx);
      const result = await sql`UPDATE transmissions SET history_seq = n.seq
        FROM (
          SELECT id, row_number() OVER (ORDER BY id) + coalesce((
            SELECT history_seq FROM transmissions
            WHERE project_id = ${projectId} AND history_seq IS NOT NULL
            ORDER BY history_seq DESC LIMIT 1
          ), 0) AS seq
          FROM transmissions
          WHERE project_id = ${projectId} AND history_seq IS NULL
          ORDER BY id
          LIMIT ${sql.lit(NUMBER_BATCH)}
        ) AS n
        WHERE transmissions.id = n.id`.execute(trx);
      return Number(result.numAffectedRows ?? 0n);
    });
    numbered += n;
    if (n < NUMBER_BATCH) return numbered;
  }
}

const NUMBER_BATCH = 20_000;

/**
 * One page of a project's transmissions, newest first: history_seq descending, which is write
 * order (and created_at order, as far as the clocks of the writers agree). Every page is a seek,
 * whatever its number: numbers are dense, so page N starts at the project's highest number minus
 * its offset, found from the partial index transmissions_project_history_seq (140) without
 * stepping over the pages before it. Call numberNewTransmissions first; rows not yet numbered are
 * not listed.
 *
 * A date filter becomes a range of numbers: the numbers of the newest row before `until` and of
 * the oldest row from `from` on (two seeks on transmissions_project_created), paged the same way;
 * created_at is checked on every row too, so a row never shows outside its dates even where two
 * writers' clocks disagreed.
 */
export async function listHistoryPage(db: Tx, q: HistoryQuery): Promise<HistoryRow[]> {
  const bounds = await findHistoryBounds(db, q);
  if (!bounds) return [];
  const start = bounds.highest - q.offset;
  if (start < bounds.lowest) return [];
  const page = selectHistoryPageIds(db, q, start, bounds.lowest);
  return db
    .selectFrom(page.as('page'))
    .innerJoin('transmissions as t', 't.id', 'page.id')
    .innerJoin('messages as m', 'm.id', 't.message_id')
    .select([
      't.id',
      't.message_id',
      'm.uid',
      'm.unique_id',
      't.recipient',
      't.status',
      't.created_at',
      't.completed_at',
      't.failed_at',
      't.opened_at',
      't.clicked_at',
      't.result_code',
      't.result_message',
      't.attempts',
    ])
    .orderBy('page.history_seq', 'desc')
    .execute();
}

/**
 * The ids of one history page: the numbers from `start` down, no lower than `lowest`. Exported for
 * the plan test (test/perf-shape/history-seek.test.ts): a descending range of
 * transmissions_project_history_seq, never a sort.
 */
export function selectHistoryPageIds(db: Tx, q: HistoryQuery, start: number, lowest: number) {
  let ids = db
    .selectFrom('transmissions')
    .select(['id', 'history_seq'])
    .where('project_id', '=', q.projectId)
    .where('history_seq', '<=', start)
    .where('history_seq', '>=', lowest);
  // The unary `+` keeps the planners on the history_seq index (a date range may hold every row;
  // this guard only checks the rows the seek reads).
  if (q.fromMs !== null) ids = ids.where(sql<boolean>`+transmissions.created_at >= ${q.fromMs}`);
  if (q.untilMs !== null) ids = ids.where(sql<boolean>`+transmissions.created_at < ${q.untilMs}`);
  return ids.orderBy('history_seq', 'desc').limit(q.limit);
}

/** The highest and lowest history_seq of the listing (inside its dates), or null when it is empty. */
async function findHistoryBounds(db: Tx, q: HistoryQuery): Promise<{ highest: number; lowest: number } | null> {
  const edge = async (direction: 'asc' | 'desc'): Promise<number | null> => {
    let query = db.selectFrom('transmissions').select('history_seq').where('project_id', '=', q.projectId);
    if (q.fromMs === null && q.untilMs === null) {
      const row = await query.where('history_seq', 'is not', null).orderBy('history_seq', direction).limit(1).executeTakeFirst();
      return row?.history_seq == null ? null : Number(row.history_seq);
    }
    // Walks transmissions_project_created from the range's edge to the first numbered row.
    if (q.fromMs !== null) query = query.where('created_at', '>=', q.fromMs);
    if (q.untilMs !== null) query = query.where('created_at', '<', q.untilMs);
    const row = await query.where('history_seq', 'is not', null).orderBy('created_at', direction).orderBy('id', direction).limit(1).executeTakeFirst();
    return row?.history_seq == null ? null : Number(row.history_seq);
  };
  const highest = await edge('desc');
  if (highest === null) return null;
  const lowest = await edge('asc');
  return lowest === null || lowest > highest ? null : { highest, lowest };
}

/** One page of a project's messages, newest first, through the index messages_project_created. */
export async function listMessagesPage(db: Tx, projectId: number, offset: number, limit: number): Promise<MessageSummary[]> {
  const page = db
    .selectFrom('messages')
    .select('id')
    .where('project_id', '=', projectId)
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .limit(limit)
    .offset(offset);
  return db
    .selectFrom(page.as('page'))
    .innerJoin('messages as m', 'm.id', 'page.id')
    .select(MESSAGE_COLUMNS.map((c) => `m.${c}` as const))
    .orderBy('m.created_at', 'desc')
    .orderBy('m.id', 'desc')
    .execute();
}

export interface TransmissionTally {
  message_id: number;
  total: number;
  failed: number;
  completed: number;
}

/** Per message: how many transmissions, how many failed, how many completed. */
export async function tallyTransmissionsByMessage(db: Tx, messageIds: readonly number[]): Promise<TransmissionTally[]> {
  if (messageIds.length === 0) return [];
  const rows = await db
    .selectFrom('transmissions')
    .select([
      'message_id',
      sql<number>`count(*)`.as('total'),
      sql<number>`sum(case when status = 'failed' then 1 else 0 end)`.as('failed'),
      sql<number>`sum(case when status = 'completed' then 1 else 0 end)`.as('completed'),
    ])
    .where('message_id', 'in', messageIds)
    .groupBy('message_id')
    .execute();
  return rows.map((r) => ({ message_id: Number(r.message_id), total: Number(r.total), failed: Number(r.failed ?? 0), completed: Number(r.completed ?? 0) }));
}

/** A half-open window of time [startMs, endMs). */
export interface TimeWindow {
  startMs: number;
  endMs: number;
}

/** The timestamp columns a metric counts by. */
export type MetricColumn = 'created_at' | 'completed_at' | 'failed_at' | 'opened_at' | 'clicked_at' | 'spammed_at';

/** Extra condition of a metric beyond its timestamp falling in the window. */
export type MetricFilter = 'none' | 'suppressed' | 'pending';

/**
 * Counts the transmissions of the given projects whose `column` falls in each window. Each column
 * has a (project_id, column) index (001's transmissions_project_created, 070's partial indexes),
 * so counting is COUNT over index ranges: measured on 1,000,000 rows, eight such counts cost
 * ~20 ms where one scan summing a CASE per window cost ~180 ms (the CASE is evaluated for every
 * row, 16 comparisons each).
 *
 * 'pending' (created in the window and still queued/retry) is driven by the partial queue index
 * instead, in ONE pass summing per window: the queue is small however long history grows, while
 * a created_at range holds every row of the period. The unary `+` on project_id and created_at is
 * the portable way of saying "don't drive this scan by these columns' indexes" (SQLite and
 * PostgreSQL both read it so).
 */
export async function countInWindows(
  db: Tx,
  projectIds: readonly number[],
  column: MetricColumn,
  filter: MetricFilter,
  windows: readonly TimeWindow[],
): Promise<number[]> {
  if (projectIds.length === 0 || windows.length === 0) return windows.map(() => 0);
  if (filter === 'pending') return countPendingInWindows(db, projectIds, windows);
  // The windows overlap (this hour lies in today, in this month...). Cut their union at every
  // window boundary and count each piece once, so no index entry is stepped over twice; each
  // window is then the sum of the pieces inside it (1,000,000 rows, created_at: 56 ms against
  // 88 ms for one count per window, same load).
  const cuts = [...new Set(windows.flatMap((w) => [w.startMs, w.endMs]))].sort((a, b) => a - b);
  const pieces: Array<TimeWindow & { n: number }> = [];
  for (let i = 0; i + 1 < cuts.length; i++) {
    const piece = { startMs: cuts[i], endMs: cuts[i + 1] };
    if (!windows.some((w) => w.startMs <= piece.startMs && piece.endMs <= w.endMs)) continue;
    let query = db
      .selectFrom('transmissions')
      .select(sql<number>`count(*)`.as('n'))
      .where('project_id', 'in', projectIds)
      .where(column, '>=', piece.startMs)
      .where(column, '<', piece.endMs);
    if (filter === 'suppressed') query = query.where('result_code', '=', 'SUPPRESSED');
    const row = await query.executeTakeFirst();
    pieces.push({ ...piece, n: Number(row?.n ?? 0) });
  }
  return windows.map((w) => pieces.filter((p) => w.startMs <= p.startMs && p.endMs <= w.endMs).reduce((sum, p) => sum + p.n, 0));
}

async function countPendingInWindows(db: Tx, projectIds: readonly number[], windows: readonly TimeWindow[]): Promise<number[]> {
  const lo = Math.min(...windows.map((w) => w.startMs));
  const hi = Math.max(...windows.map((w) => w.endMs));
  const row = (await db
    .selectFrom('transmissions')
    .select(
      windows.map((w, i) =>
        sql<number>`sum(case when transmissions.created_at >= ${w.startMs} and transmissions.created_at < ${w.endMs} then 1 else 0 end)`.as(`w${i}`),
      ),
    )
    // Spelled exactly as the partial index's WHERE (literals, not bound parameters), which is
    // what lets SQLite match the query to transmissions_due.
    .where(sql<boolean>`status in ('queued', 'retry')`)
    .where(sql<boolean>`+transmissions.project_id in (${sql.join(projectIds)})`)
    .where(sql<boolean>`+transmissions.created_at >= ${lo}`)
    .where(sql<boolean>`+transmissions.created_at < ${hi}`)
    .executeTakeFirst()) as Record<string, unknown> | undefined;
  return windows.map((_, i) => Number(row?.[`w${i}`] ?? 0));
}

/** Transmissions of the given projects created in [sinceMs, untilMs) (a null bound is open). */
export async function countTransmissionsCreated(db: Tx, projectIds: readonly number[], sinceMs: number | null, untilMs: number | null): Promise<number> {
  if (projectIds.length === 0) return 0;
  let query = db.selectFrom('transmissions').select(sql<number>`count(*)`.as('n')).where('project_id', 'in', projectIds);
  if (sinceMs !== null) query = query.where('created_at', '>=', sinceMs);
  if (untilMs !== null) query = query.where('created_at', '<', untilMs);
  const row = await query.executeTakeFirst();
  return Number(row?.n ?? 0);
}

export async function listProjectIdsOfAccount(db: Tx, accountId: number): Promise<number[]> {
  const rows = await db.selectFrom('projects').select('id').where('account_id', '=', accountId).orderBy('id').execute();
  return rows.map((r) => Number(r.id));
}

/**
 * The suppression entries that block sending now: every `rejected` entry, and `warning` entries
 * whose blocked_until is absent or still ahead. Ordered by address; a page when limit is given.
 */
export async function listActiveSuppressions(
  db: Tx,
  projectId: number,
  nowMs: number,
  page: { offset: number; limit: number } | null,
): Promise<Suppression[]> {
  let query = db
    .selectFrom('suppressions')
    .selectAll()
    .where('project_id', '=', projectId)
    .where((eb) => eb.or([eb('status', '!=', 'warning'), eb('blocked_until', 'is', null), eb('blocked_until', '>', nowMs)]))
    .orderBy('address')
    .orderBy('id');
  if (page) query = query.limit(page.limit).offset(page.offset);
  return query.execute();
}

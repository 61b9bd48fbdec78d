// The dashboard's reads of messages (operations/message-views.ts): a keyset-paged search of one
// project's messages and everything one message caused. Nothing here writes.
//
// Every page costs a bounded amount of index work whatever the table's size (docs/dashboard.md):
// without filters a page is LIMIT rows read backwards from the cursor along messages_project_created;
// with filters the query looks at a WINDOW of at most scanLimit messages below the cursor (an
// index-only range) and keeps those that match, so a rare recipient may give a short page whose
// "older" link continues below the window. The one index search added to the ingest hot path,
// transmissions_message_subject, is partial: only copies whose subject differs from their
// message's have an entry (migration 200).
import { sql, type Expression, type Selectable, type SqlBool } from 'kysely';
import type { AttemptsTable, EventsTable, Message, Transmission } from './schema.ts';
import type { Tx } from './store.ts';

export type MessageRow = Omit<Message, 'payload'>;
export type Attempt = Selectable<AttemptsTable>;
export type Event = Selectable<EventsTable>;

export interface MessageCursor {
  createdAt: number;
  id: number;
}

export interface MessageSearch {
  projectId: number;
  /** newest first, strictly below this (created_at, id); null: from the newest */
  before: MessageCursor | null;
  /** inclusive lower and exclusive upper bound of created_at (ms), or null */
  fromMs: number | null;
  untilMs: number | null;
  /** substrings, matched case-insensitively */
  recipient: string | null;
  subject: string | null;
  /** exact */
  template: string | null;
  /** a transmission status: the message has at least one copy in it */
  status: string | null;
  limit: number;
  scanLimit: number;
}

export interface MessageSearchPage {
  rows: MessageRow[];
  /** where the next page starts, or null when nothing older is left to look at */
  next: MessageCursor | null;
}

const COLUMNS = ['m.id', 'm.project_id', 'm.uid', 'm.unique_id', 'm.template', 'm.subject', 'm.from_address', 'm.recipient_count', 'm.deliver', 'm.created_at'] as const;

function likePattern(text: string): string {
  return `%${text.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

export async function searchMessagesPage(db: Tx, q: MessageSearch): Promise<MessageSearchPage> {
  const filtered = q.recipient !== null || q.subject !== null || q.template !== null || q.status !== null;
  // The window: ids below the cursor along messages_project_created.
  let window = db.selectFrom('messages').select(['id', 'created_at']).where('project_id', '=', q.projectId);
  if (q.fromMs !== null) window = window.where('created_at', '>=', q.fromMs);
  if (q.untilMs !== null) window = window.where('created_at', '<', q.untilMs);
  if (q.before) {
    const { createdAt, id } = q.before;
    // The bare range on created_at lets the planner seek the index to the cursor; the OR then only
    // refines the rows of the cursor's own millisecond (without it SQLite walks from the newest).
    window = window
      .where('created_at', '<=', createdAt)
      .where((eb) => eb.or([eb('created_at', '<', createdAt), eb('id', '<', id)]));
  }
  const size = filtered ? q.scanLimit : q.limit + 1;
  const windowRows = await window.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(size).execute();
  if (windowRows.length === 0) return { rows: [], next: null };
  if (!filtered) {
    const pageIds = windowRows.slice(0, q.limit).map((r) => Number(r.id));
    const rows = await db.selectFrom('messages as m').select(COLUMNS).where('m.id', 'in', pageIds).orderBy('m.created_at', 'desc').orderBy('m.id', 'desc').execute();
    const last = rows[rows.length - 1];
    return { rows, next: windowRows.length > q.limit && last ? { createdAt: Number(last.created_at), id: Number(last.id) } : null };
  }
  const lowest = windowRows[windowRows.length - 1];
  let match = db
    .selectFrom('messages as m')
    .select(COLUMNS)
    .where('m.project_id', '=', q.projectId)
    .where((eb) => {
      const low = Number(lowest.created_at);
      const lowId = Number(lowest.id);
      const conds: Expression<SqlBool>[] = [eb('m.created_at', '>=', low), eb.or([eb('m.created_at', '>', low), eb('m.id', '>=', lowId)])];
      if (q.before) {
        const { createdAt, id } = q.before;
        conds.push(eb('m.created_at', '<=', createdAt), eb.or([eb('m.created_at', '<', createdAt), eb('m.id', '<', id)]));
      }
      if (q.fromMs !== null) conds.push(eb('m.created_at', '>=', q.fromMs));
      if (q.untilMs !== null) conds.push(eb('m.created_at', '<', q.untilMs));
      return eb.and(conds);
    });
  if (q.subject !== null) {
    // The message's subject (its first copy's), or the subject of a copy whose own differs
    // (transmissions.subject, migration 200): through transmissions_message_subject, which holds
    // only those copies, a message without any costs one probe of a nearly empty index.
    const pattern = likePattern(q.subject);
    match = match.where(({ or, exists, selectFrom }) =>
      or([
        sql<SqlBool>`lower(m.subject) like ${pattern} escape '\\'`,
        exists(
          selectFrom('transmissions as ts')
            .select(sql`1`.as('one'))
            .whereRef('ts.message_id', '=', 'm.id')
            .where('ts.subject', 'is not', null)
            .where(sql<SqlBool>`lower(ts.subject) like ${pattern} escape '\\'`),
        ),
      ]),
    );
  }
  if (q.template !== null) match = match.where('m.template', '=', q.template);
  if (q.recipient !== null || q.status !== null) {
    const recipient = q.recipient;
    const status = q.status;
    match = match.where(({ exists, selectFrom }) => {
      let t = selectFrom('transmissions as t').select(sql`1`.as('one')).whereRef('t.message_id', '=', 'm.id');
      if (recipient !== null) t = t.where(sql<SqlBool>`lower(t.recipient) like ${likePattern(recipient)} escape '\\'`);
      if (status !== null) t = t.where('t.status', '=', status);
      return exists(t);
    });
  }
  const rows = await match.orderBy('m.created_at', 'desc').orderBy('m.id', 'desc').limit(q.limit + 1).execute();
  if (rows.length > q.limit) {
    const last = rows[q.limit - 1];
    return { rows: rows.slice(0, q.limit), next: { createdAt: Number(last.created_at), id: Number(last.id) } };
  }
  // The window was searched to its end: continue below it if it was full.
  return { rows, next: windowRows.length === q.scanLimit ? { createdAt: Number(lowest.created_at), id: Number(lowest.id) } : null };
}

export async function findMessageUidInProject(db: Tx, projectId: number, uid: string): Promise<MessageRow | undefined> {
  return db.selectFrom('messages as m').select(COLUMNS).where('m.project_id', '=', projectId).where('m.uid', '=', uid).executeTakeFirst();
}

export async function findMessageWithPayload(db: Tx, id: number): Promise<Message | undefined> {
  return db.selectFrom('messages').selectAll().where('id', '=', id).executeTakeFirst();
}

export interface StatusTally {
  message_id: number;
  status: string;
  count: number;
  first_recipient: string;
}

/** Per message and status: how many copies, and the first recipient (alphabetically) among them. */
export async function tallyMessageStatuses(db: Tx, messageIds: readonly number[]): Promise<StatusTally[]> {
  if (messageIds.length === 0) return [];
  const rows = await db
    .selectFrom('transmissions')
    .select(['message_id', 'status', sql<number>`count(*)`.as('count'), sql<string>`min(recipient)`.as('first_recipient')])
    .where('message_id', 'in', messageIds)
    .groupBy(['message_id', 'status'])
    .execute();
  return rows.map((r) => ({ message_id: Number(r.message_id), status: r.status, count: Number(r.count), first_recipient: r.first_recipient }));
}

/** A message's copies in recipient order, at most `limit`. */
export async function listMessageTransmissions(db: Tx, messageId: number, limit: number): Promise<Transmission[]> {
  return db.selectFrom('transmissions').selectAll().where('message_id', '=', messageId).orderBy('id').limit(limit).execute();
}

export async function listAttemptsOf(db: Tx, transmissionIds: readonly number[]): Promise<Attempt[]> {
  if (transmissionIds.length === 0) return [];
  return db.selectFrom('attempts').selectAll().where('transmission_id', 'in', transmissionIds).orderBy('id').execute();
}

/** Events reporting this message, through events_message (migration 160); at most `limit`. */
export async function listMessageEvents(db: Tx, messageId: number, limit: number): Promise<Event[]> {
  return db.selectFrom('events').selectAll().where('message_id', '=', messageId).orderBy('id').limit(limit).execute();
}

/** Outbound requests (webhook deliveries) of these events, with their attempts' count. */
export async function listOutboundOfEvents(db: Tx, eventIds: readonly number[]) {
  if (eventIds.length === 0) return [];
  return db
    .selectFrom('outbound_requests')
    .select(['id', 'webhook_id', 'event_id', 'event_type', 'url', 'state', 'attempts', 'last_status_code', 'last_error', 'created_at', 'delivered_at', 'failed_at'])
    .where('event_id', 'in', eventIds)
    .orderBy('id')
    .execute();
}

/** Counts per bucket of a transmissions timestamp column, for one project, within [startMs, endMs). */
export async function countTransmissionBuckets(
  db: Tx,
  projectId: number,
  column: 'created_at' | 'completed_at' | 'failed_at' | 'opened_at' | 'clicked_at',
  startMs: number,
  endMs: number,
  bucketMs: number,
): Promise<Array<{ bucket: number; count: number }>> {
  const col = sql.ref(column);
  // Literals, not parameters: PostgreSQL matches the GROUP BY expression to the selected one only
  // when they are the same text (two placeholders are two expressions). Both are whole numbers.
  const start = sql.lit(Math.trunc(startMs));
  const width = sql.lit(Math.trunc(bucketMs));
  const rows = await db
    .selectFrom('transmissions')
    .select([sql<number>`(${col} - ${start}) / ${width}`.as('bucket'), sql<number>`count(*)`.as('count')])
    .where('project_id', '=', projectId)
    .where(column, '>=', startMs)
    .where(column, '<', endMs)
    .groupBy(sql`(${col} - ${start}) / ${width}`)
    .execute();
  return rows.map((r) => ({ bucket: Math.floor(Number(r.bucket)), count: Number(r.count) }));
}

/** Counts per bucket of the project's events of these types within [startMs, endMs). */
export async function countEventBuckets(
  db: Tx,
  projectId: number,
  types: readonly string[],
  startMs: number,
  endMs: number,
  bucketMs: number,
): Promise<Array<{ type: string; bucket: number; count: number }>> {
  const start = sql.lit(Math.trunc(startMs));
  const width = sql.lit(Math.trunc(bucketMs));
  const rows = await db
    .selectFrom('events')
    .select(['type', sql<number>`(created_at - ${start}) / ${width}`.as('bucket'), sql<number>`count(*)`.as('count')])
    .where('project_id', '=', projectId)
    .where('created_at', '>=', startMs)
    .where('created_at', '<', endMs)
    .where('type', 'in', types)
    .groupBy(['type', sql`(created_at - ${start}) / ${width}`])
    .execute();
  return rows.map((r) => ({ type: r.type, bucket: Math.floor(Number(r.bucket)), count: Number(r.count) }));
}

/** The project's queue now: copies queued and retrying, and the oldest due time among them. */
export async function summariseQueue(db: Tx, projectId: number): Promise<Array<{ status: string; count: number; oldest_due: number | null }>> {
  const rows = await db
    .selectFrom('transmissions')
    .select(['status', sql<number>`count(*)`.as('count'), sql<number | null>`min(next_attempt_at)`.as('oldest_due')])
    .where('status', 'in', ['queued', 'retry'])
    .where('project_id', '=', projectId)
    .groupBy('status')
    .execute();
  return rows.map((r) => ({ status: r.status, count: Number(r.count), oldest_due: r.oldest_due === null ? null : Number(r.oldest_due) }));
}

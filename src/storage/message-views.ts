// The dashboard's reads of messages (operations/message-views.ts): a keyset-paged search of one
// project's messages and everything one message caused, its copies and webhook deliveries keyset-
// paged too (a message may have a thousand copies and several requests each). Nothing here writes.
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

const COLUMNS = ['m.id', 'm.project_id', 'm.uid', 'm.unique_id', 'm.template', 'm.subject', 'm.from_address', 'm.recipient_count', 'm.deliver', 'm.created_at', 'm.send_at', 'm.sandbox'] as const;

function escapeLike(text: string): string {
  return text.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`);
}

function likePattern(text: string): string {
  return `%${escapeLike(text)}%`;
}

function prefixPattern(text: string): string {
  return `${escapeLike(text)}%`;
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
  /** the earliest next_attempt_at among the copies no worker holds (a held copy's is its lease's end), or null */
  next_due: number | null;
}

/** Per message and status: how many copies, the first recipient (alphabetically) among them, and when the next is due. */
export async function tallyMessageStatuses(db: Tx, messageIds: readonly number[]): Promise<StatusTally[]> {
  if (messageIds.length === 0) return [];
  const rows = await db
    .selectFrom('transmissions')
    .select([
      'message_id',
      'status',
      sql<number>`count(*)`.as('count'),
      sql<string>`min(recipient)`.as('first_recipient'),
      sql<number | null>`min(case when locked_by is null then next_attempt_at end)`.as('next_due'),
    ])
    .where('message_id', 'in', messageIds)
    .groupBy(['message_id', 'status'])
    .execute();
  return rows.map((r) => ({
    message_id: Number(r.message_id),
    status: r.status,
    count: Number(r.count),
    first_recipient: r.first_recipient,
    next_due: r.next_due === null ? null : Number(r.next_due),
  }));
}

export interface CopiesPageQuery {
  messageId: number;
  /** keyset: only copies of a higher id (the previous page's last); null from the first */
  afterId: number | null;
  /** only addresses that start with this text, case-insensitively (a whole address finds itself), or null */
  recipientPrefix: string | null;
  limit: number;
}

/**
 * One page of a message's copies in recipient order (id), by keyset: the seek is along
 * transmissions_message, whose entries are in id order within a message (SQLite: the rowid;
 * PostgreSQL sorts the message's own rows, at most a message's recipients), never OFFSET.
 */
export async function listMessageTransmissionsPage(db: Tx, q: CopiesPageQuery): Promise<Transmission[]> {
  let query = db.selectFrom('transmissions').selectAll().where('message_id', '=', q.messageId);
  if (q.afterId !== null) query = query.where('id', '>', q.afterId);
  if (q.recipientPrefix !== null) query = query.where(sql<SqlBool>`lower(recipient) like ${prefixPattern(q.recipientPrefix)} escape '\\'`);
  return query.orderBy('id').limit(q.limit).execute();
}

/** The first copy of a message to this exact address, or undefined. */
export async function findMessageTransmission(db: Tx, messageId: number, recipient: string): Promise<Transmission | undefined> {
  return db.selectFrom('transmissions').selectAll().where('message_id', '=', messageId).where('recipient', '=', recipient).orderBy('id').limit(1).executeTakeFirst();
}

/** A message's first copy (the one its content is shown for), or undefined. */
export async function findFirstMessageTransmission(db: Tx, messageId: number): Promise<Transmission | undefined> {
  return db.selectFrom('transmissions').selectAll().where('message_id', '=', messageId).orderBy('id').limit(1).executeTakeFirst();
}

export async function listAttemptsOf(db: Tx, transmissionIds: readonly number[]): Promise<Attempt[]> {
  if (transmissionIds.length === 0) return [];
  return db.selectFrom('attempts').selectAll().where('transmission_id', 'in', transmissionIds).orderBy('id').execute();
}

export interface WebhookDeliveryRow {
  id: number;
  event_type: string | null;
  url: string;
  state: string;
  attempts: number;
  last_status_code: number | null;
  last_error: string | null;
  created_at: number;
  /** the payload of the event the request carries (its recipient is shown beside it) */
  event_payload: string;
  /** the project of the endpoint the request went to; null for an account-wide one (or one since deleted) */
  webhook_project_id: number | null;
}

/**
 * The events of a recipient whose address starts with `prefix` (case-insensitively, as the copies'
 * filter): their payload, written by JSON.stringify (domain/events.ts), holds
 * `"recipient":"<address>`. A superset: a variable named recipient holding such a value matches
 * too, so the reader checks each row's own recipient (operations/message-views.ts).
 */
function recipientInPayloadPattern(prefix: string): string {
  return `%${escapeLike(`"recipient":${JSON.stringify(prefix.toLowerCase()).slice(0, -1)}`)}%`;
}

/**
 * One page of the webhook deliveries (outbound requests) of the events that report this message,
 * oldest first, by keyset on the request's id: events_message (migration 160) finds the message's
 * events, outbound_requests_event (migration 210) their requests; nothing else of either table is
 * read, and a page holds at most `limit` rows however many a message caused. With a recipient
 * prefix, only the message's own events are matched against it (their payloads, read through the
 * same index seek).
 */
export async function listMessageWebhookDeliveries(
  db: Tx,
  q: { messageId: number; afterId: number | null; recipientPrefix: string | null; limit: number },
): Promise<WebhookDeliveryRow[]> {
  let query = db
    .selectFrom('outbound_requests as o')
    .innerJoin('events as e', 'e.id', 'o.event_id')
    .leftJoin('webhooks as w', 'w.id', 'o.webhook_id')
    .select(['o.id', 'o.event_type', 'o.url', 'o.state', 'o.attempts', 'o.last_status_code', 'o.last_error', 'o.created_at', 'e.payload as event_payload', 'w.project_id as webhook_project_id'])
    .where('e.message_id', '=', q.messageId);
  if (q.afterId !== null) query = query.where('o.id', '>', q.afterId);
  if (q.recipientPrefix !== null) query = query.where(sql<SqlBool>`lower(e.payload) like ${recipientInPayloadPattern(q.recipientPrefix)} escape '\\'`);
  const rows = await query.orderBy('o.id').limit(q.limit).execute();
  return rows.map((r) => ({
    ...r,
    id: Number(r.id),
    attempts: Number(r.attempts),
    created_at: Number(r.created_at),
    webhook_project_id: r.webhook_project_id === null ? null : Number(r.webhook_project_id),
  }));
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
export async function summariseQueue(db: Tx, projectId: number, now: number): Promise<Array<{ status: string; count: number; oldest_due: number | null; next_scheduled: number | null }>> {
  // A waiting copy is due once next_attempt_at has come; one still ahead (send_at, a retry's time) is scheduled.
  const rows = await db
    .selectFrom('transmissions')
    .select([
      'status',
      sql<number>`count(*)`.as('count'),
      sql<number | null>`min(case when next_attempt_at <= ${now} then next_attempt_at end)`.as('oldest_due'),
      sql<number | null>`min(case when next_attempt_at > ${now} then next_attempt_at end)`.as('next_scheduled'),
    ])
    .where('status', 'in', ['queued', 'retry'])
    .where('project_id', '=', projectId)
    .groupBy('status')
    .execute();
  return rows.map((r) => ({
    status: r.status,
    count: Number(r.count),
    oldest_due: r.oldest_due === null ? null : Number(r.oldest_due),
    next_scheduled: r.next_scheduled === null ? null : Number(r.next_scheduled),
  }));
}

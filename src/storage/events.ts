// The outbox: an event row is written in the same transaction as the change it reports, so a
// change and its notification are never separated by a crash. The webhook dispatcher delivers them.
// Kinds and payloads are defined once, in src/domain/events.ts: every producer in src/ builds a
// payload with its buildEventPayload (test/domain/events.test.ts checks); this module only writes.
//
// The events a write unit records are inserted together when its function returns (store.ts: before
// its COMMIT on PostgreSQL, before its RELEASE SAVEPOINT in a SQLite group): a batch of delivery
// finishes writes its N events in one statement (SQLite: a few multi-row INSERTs) instead of N
// (docs/decisions/0003-performance.md). Nothing in a unit reads back the events it recorded.
//
// An event of an account without an active webhook endpoint is recorded already dispatched
// (dispatched_at = NO_ENDPOINT): nobody can hear of it (an endpoint hears of what happens after it
// exists, docs/webhooks.md), so the fan-out neither claims nor rewrites it. The test is part of the
// INSERT, against what is committed when the statement runs: an endpoint whose creation has been
// answered hears of every event recorded after. The INSERT answers whether any event it wrote
// waits for the fan-out, and the store wakes the fan-out after the unit commits only then
// (store.ts): a delivery to an account without endpoints wakes no one, in no process.
import { CompiledQuery, sql } from 'kysely';
import type { EventKind } from '../domain/events.ts';
import { CompiledInsert } from './compiled-insert.ts';
import { CompiledStatement } from './compiled-statement.ts';
import { preparedOnServer, takesArrayParameters } from './dialect.ts';
import type { EventsTable } from './schema.ts';
import type { Tx } from './schema.ts';

export type EventType = EventKind;

export interface NewEvent {
  accountId: number;
  projectId: number | null;
  type: EventType;
  payload: Readonly<Record<string, unknown>>;
  now: number;
}

type EventRow = Pick<EventsTable, 'account_id' | 'project_id' | 'type' | 'payload' | 'message_id' | 'created_at'>;

/** events.dispatched_at of an event recorded while its account had no active webhook endpoint. */
export const NO_ENDPOINT = 0;

/** The INSERT of events one by one (SQLite, and a unit's single event), compiled once. */
const INSERT_EVENT = new CompiledInsert('events', ['account_id', 'project_id', 'type', 'payload', 'message_id', 'created_at'], 'dispatched_at', {
  // null (the fan-out's) or NO_ENDPOINT
  dispatched_at: (value) =>
    sql`CASE WHEN EXISTS (SELECT 1 FROM webhooks WHERE account_id = ${value('account_id')} AND status = 'active') THEN NULL ELSE ${sql.lit(NO_ENDPOINT)} END`,
});

/** The events recorded so far in a unit whose inserts are deferred, by its transaction. */
const deferred = new WeakMap<object, EventRow[]>();

/**
 * Records an event in the unit's transaction: in a unit of store.write it is inserted when the unit
 * returns, and wakes the fan-out once committed; outside one (no caller in src/) it is inserted at
 * once, and the fan-out's poll finds it.
 */
export async function recordEvent(db: Tx, event: NewEvent): Promise<void> {
  const row: EventRow = {
    account_id: event.accountId,
    project_id: event.projectId,
    type: event.type,
    payload: JSON.stringify(event.payload),
    // Every payload of domain/events.ts names its message; the column makes it a seek.
    message_id: typeof event.payload.message_id === 'number' ? event.payload.message_id : null,
    created_at: event.now,
  };
  const later = deferred.get(db);
  if (later) later.push(row);
  else await INSERT_EVENT.execute(db, [row]);
}

/** Whether an event among those an INSERT answered with their dispatched_at waits for the fan-out. */
const waitForFanOut = (rows: ReadonlyArray<Record<string, unknown>>) => rows.some((row) => row.dispatched_at === null);

/** What a write unit returned, and whether an event it recorded waits for the fan-out. */
export interface UnitOutcome<T> {
  value: T;
  eventsWaiting: boolean;
}

/**
 * Runs one write unit (store.ts) with its events deferred: they are inserted together when `fn`
 * returns, before the unit is committed or released; none when it throws.
 */
export async function withDeferredEvents<T>(trx: Tx, fn: (trx: Tx) => Promise<T>): Promise<UnitOutcome<T>> {
  deferred.set(trx, []);
  try {
    const value = await fn(trx);
    return { value, eventsWaiting: await insertDeferredEvents(trx) };
  } finally {
    deferred.delete(trx);
  }
}

/**
 * Inserts the events deferred in `trx`, in the order they were recorded: one statement where
 * statements take arrays (the same text for any count), else multi-row INSERTs (compiled-insert.ts).
 * Answers whether any of them waits for the fan-out.
 */
async function insertDeferredEvents(trx: Tx): Promise<boolean> {
  const rows = deferred.get(trx);
  deferred.delete(trx);
  if (!rows || rows.length === 0) return false;
  if (rows.length === 1 || !takesArrayParameters(trx)) return waitForFanOut(await INSERT_EVENT.execute(trx, rows));
  const column = <K extends keyof EventRow>(key: K) => rows.map((r) => r[key] ?? null);
  const { rows: [answer] } = await trx.executeQuery<{ waiting: number | string }>(
    CompiledQuery.raw(INSERT_EVENTS_SQL, [column('account_id'), column('project_id'), column('type'), column('payload'), column('message_id'), column('created_at')]),
  );
  return Number(answer?.waiting ?? 0) > 0;
}

const INSERT_EVENTS_SQL = preparedOnServer(`WITH inserted AS (
  INSERT INTO events (account_id, project_id, type, payload, message_id, created_at, dispatched_at)
  SELECT e.*, CASE WHEN EXISTS (SELECT 1 FROM webhooks w WHERE w.account_id = e.account_id AND w.status = 'active') THEN NULL ELSE ${NO_ENDPOINT} END
  FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[], $5::bigint[], $6::bigint[]) AS e(account_id, project_id, type, payload, message_id, created_at)
  RETURNING dispatched_at
)
SELECT count(*) AS waiting FROM inserted WHERE dispatched_at IS NULL`);

/** Whether some event still waits for the dispatcher's fan-out. */
export async function hasUndispatchedEvents(db: Tx): Promise<boolean> {
  // Asked after every batch of delivery finishes: compiled once (storage/compiled-statement.ts).
  const { rows } = await db.executeQuery(ANY_UNDISPATCHED.with(db, {}));
  return rows.length > 0;
}

const ANY_UNDISPATCHED = new CompiledStatement<never, { id: number }>((db) => db.selectFrom('events').select('id').where('dispatched_at', 'is', null).limit(1));

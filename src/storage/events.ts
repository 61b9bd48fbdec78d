// The outbox: an event row is written in the same transaction as the change it reports, so a
// change and its notification are never separated by a crash. The webhook dispatcher delivers them.
// Kinds and payloads are defined once, in src/domain/events.ts: every producer in src/ builds a
// payload with its buildEventPayload (test/domain/events.test.ts checks); this module only writes.
import type { EventKind } from '../domain/events.ts';
import type { Tx } from './store.ts';

export type EventType = EventKind;

export interface NewEvent {
  accountId: number;
  projectId: number | null;
  type: EventType;
  payload: Readonly<Record<string, unknown>>;
  now: number;
}

export async function recordEvent(db: Tx, event: NewEvent): Promise<void> {
  await db
    .insertInto('events')
    .values({
      account_id: event.accountId,
      project_id: event.projectId,
      type: event.type,
      payload: JSON.stringify(event.payload),
      // Every payload of domain/events.ts names its message; the column makes it a seek.
      message_id: typeof event.payload.message_id === 'number' ? event.payload.message_id : null,
      created_at: event.now,
    })
    .execute();
}

/** Whether some event still waits for the dispatcher's fan-out. */
export async function hasUndispatchedEvents(db: Tx): Promise<boolean> {
  const rows = await db.selectFrom('events').select('id').where('dispatched_at', 'is', null).limit(1).execute();
  return rows.length > 0;
}

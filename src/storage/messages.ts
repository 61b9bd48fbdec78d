// The messages table: one row per accepted send_message (or SMTP submission). Inserts and simple
// lookups; the listings of reports live with them (storage/reports.ts).
//
// Acceptance (storeAcceptedMessage) is the ingest hot path of both edges: the message row and one
// transmission per copy, written atomically, in as few round trips as the database allows
// (docs/decisions/0003-performance.md): on PostgreSQL ONE statement shared by the acceptances of
// an event-loop turn (a data-modifying CTE, atomic without BEGIN/COMMIT:
// dialects/postgres-acceptance.ts), on a SQLite file by the acceptance thread, in group commits off
// the event loop (dialects/sqlite-acceptance.ts); otherwise (SQLite in memory, an acceptance with
// events alongside) one unit of the store's group commit.
import { CompiledInsert } from './compiled-insert.ts';
import { CompiledStatement, padToPowerOfTwo } from './compiled-statement.ts';
import { isUniqueViolationError, preparedOnServer } from './dialect.ts';
import type { Duplicate } from './duplicates.ts';
import type { MessageRow } from './schema.ts';
import type { Store, Tx } from './store.ts';
import { acceptedTransmissionRows, insertTransmissions, type AcceptedCopy } from './transmissions.ts';
import { withFields } from '../domain/objects.ts';

export type { AcceptedCopy } from './transmissions.ts';

const INSERT_MESSAGE = new CompiledInsert(
  'messages',
  ['project_id', 'uid', 'unique_id', 'template', 'subject', 'from_address', 'recipient_count', 'deliver', 'created_at', 'send_at', 'sandbox', 'payload'],
  'id',
);

export type { MessageRow } from './schema.ts';

/** The message's id, or `duplicate`: its (project_id, uid) is taken. */
export type InsertedMessage = { duplicate: false; id: number } | { duplicate: true };

/**
 * Inserts a message. A second message with the same (project_id, uid) violates
 * messages_project_uid and comes back as `{ duplicate: true }` (no SELECT beforehand: this is the
 * ingest hot path, and only the constraint is race-free). After a duplicate the transaction takes
 * no further statement (PostgreSQL has aborted it): the caller ends its unit with its own error.
 */
export async function insertMessage(db: Tx, row: MessageRow): Promise<InsertedMessage> {
  try {
    const [inserted] = await INSERT_MESSAGE.execute(db, [row]);
    return { duplicate: false, id: Number(inserted.id) };
  } catch (error) {
    if (isUniqueViolationError(error)) return { duplicate: true };
    throw error;
  }
}

/** What acceptance stores: the message (its recipient_count is the number of copies) and its copies. */
export interface Acceptance {
  message: Omit<MessageRow, 'recipient_count'>;
  /** one transmission each, in this order; due at `dueAt` unless completed at acceptance */
  copies: readonly AcceptedCopy[];
  /** when the queued copies are due (now, or send_at) */
  dueAt: number;
}

/** Thrown inside a unit to roll it back after a duplicate; never leaves this module. */
const DUPLICATE = Symbol('duplicate uid');

/**
 * Stores an accepted message and its transmissions atomically, all or nothing. Returns the
 * message's id, or `{ duplicate: true }` when its (project_id, uid) is taken (storage/duplicates.ts):
 * nothing is written then.
 *
 * `alongside` runs in the same transaction after the inserts (the events of copies completed at
 * acceptance, docs/sandbox.md); a write that needs it is a transaction on every database, the
 * common one (every copy queued) is one statement where the dialect has it.
 */
export async function storeAcceptedMessage(
  store: Store,
  acceptance: Acceptance,
  alongside?: (trx: Tx, messageId: number) => Promise<void>,
): Promise<{ id: number } | Duplicate> {
  const message: MessageRow = withFields(acceptance.message, { recipient_count: acceptance.copies.length });
  const rows = acceptedTransmissionRows(message, acceptance.copies, acceptance.dueAt);
  if (store.acceptsApart && !alongside) {
    const id = await store.acceptMessage(message, rows);
    return id === null ? { duplicate: true } : { id };
  }
  try {
    const id = await store.write(async (trx) => {
      const inserted = await insertMessage(trx, message);
      // The thrown marker rolls this unit back (PostgreSQL has aborted its transaction anyway).
      if (inserted.duplicate) throw DUPLICATE;
      for (const row of rows) row.message_id = inserted.id;
      await insertTransmissions(trx, rows);
      await alongside?.(trx, inserted.id);
      return inserted.id;
    });
    return { id };
  } catch (error) {
    if (error === DUPLICATE) return { duplicate: true };
    throw error;
  }
}

/**
 * What delivery needs of the messages of a claimed batch, with their projects: one query. Its text
 * depends only on the next power of two of the count (padToPowerOfTwo), a bounded set of texts,
 * each built and compiled once (storage/compiled-statement.ts) and prepared once per connection
 * where the server prepares statements.
 */
export async function readMessagesForDelivery(db: Tx, ids: readonly number[]) {
  const padded = padToPowerOfTwo(ids);
  let statement = MESSAGES_FOR_DELIVERY.get(padded.length);
  if (!statement) MESSAGES_FOR_DELIVERY.set(padded.length, (statement = messagesForDelivery(padded.length)));
  const values: Record<string, number> = {};
  for (let i = 0; i < padded.length; i++) values[`id${i}`] = padded[i];
  const query = statement.with(db, values);
  preparedOnServer(query.sql);
  return (await db.executeQuery(query)).rows;
}

/**
 * What an event names of one message, without its payload (a transmission failed for the deaths
 * of its holders, domain/holder-deaths.ts: its payload may be what killed them): uid, unique id,
 * project and account, and whether it was accepted in sandbox mode. Undefined when the message is gone.
 */
export async function readMessageSubject(db: Tx, id: number) {
  return db
    .selectFrom('messages')
    .innerJoin('projects', 'projects.id', 'messages.project_id')
    .select(['messages.id as id', 'messages.uid as uid', 'messages.unique_id as unique_id', 'messages.sandbox as sandbox', 'projects.uid as project_uid', 'projects.account_id as account_id'])
    .where('messages.id', '=', id)
    .executeTakeFirst();
}

/** The statement of readMessagesForDelivery for `count` ids (a power of two), by count. */
const MESSAGES_FOR_DELIVERY = new Map<number, ReturnType<typeof messagesForDelivery>>();
const messagesForDelivery = (count: number) =>
  new CompiledStatement((db: Tx, value: (name: string) => never) =>
    db
      .selectFrom('messages')
      .innerJoin('projects', 'projects.id', 'messages.project_id')
      .select([
        'messages.id as id',
        'messages.uid as uid',
        'messages.unique_id as unique_id',
        'messages.project_id as project_id',
        'messages.created_at as created_at',
        'messages.sandbox as sandbox',
        'messages.payload as payload',
        'projects.uid as project_uid',
        'projects.account_id as account_id',
        'projects.settings as settings',
      ])
      .where('messages.id', 'in', Array.from({ length: count }, (_, i) => value(`id${i}`))),
  );

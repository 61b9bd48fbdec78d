// The transmissions table (the delivery queue): inserts at acceptance and simple lookups. Claiming
// and finishing deliveries is storage/delivery-queue.ts.
import { CompiledInsert } from './compiled-insert.ts';
import type { AcceptedTransmission } from './schema.ts';
import type { Tx } from './store.ts';

export type { AcceptedTransmission } from './schema.ts';

/** One copy of an accepted message: its transmission row is made by acceptedTransmissionRows. */
export interface AcceptedCopy {
  recipient: string;
  recipientName: string | null;
  /** the copy's own variables as JSON, or null */
  variables: string | null;
  /** the subject the copy is sent with where it differs from the message's, else null (domain/send-request.ts subjectsAsSent) */
  subject: string | null;
  /** completed at acceptance (deliver: false, null.postageapp.com) with this result; null: queued */
  completed: { code: string; message: string } | null;
}

/**
 * The transmission rows of a message's copies as acceptance writes them: queued and due at
 * `dueAt`, or completed now with their result. message_id is the message's id when the caller
 * knows it, else 0 until the message row exists.
 */
export function acceptedTransmissionRows(
  message: { project_id: number; created_at: number; id?: number },
  copies: readonly AcceptedCopy[],
  dueAt: number,
): AcceptedTransmission[] {
  const now = message.created_at;
  return copies.map((copy) => ({
    message_id: message.id ?? 0,
    project_id: message.project_id,
    recipient: copy.recipient,
    recipient_name: copy.recipientName,
    variables: copy.variables,
    subject: copy.subject,
    status: copy.completed ? 'completed' : 'queued',
    next_attempt_at: copy.completed ? now : dueAt,
    attempts: 0,
    created_at: now,
    updated_at: now,
    completed_at: copy.completed ? now : null,
    result_code: copy.completed ? copy.completed.code : null,
    result_message: copy.completed ? copy.completed.message : null,
  }));
}

const INSERT_TRANSMISSIONS = new CompiledInsert(
  'transmissions',
  ['message_id', 'project_id', 'recipient', 'recipient_name', 'variables', 'subject', 'status', 'next_attempt_at', 'attempts', 'created_at', 'updated_at', 'completed_at', 'result_code', 'result_message'],
  null,
);

/**
 * Rows per INSERT statement. 1000 rows of 14 columns stay under SQLite's 32,766 and PostgreSQL's
 * 65,535 bound parameters; the default recipient limit (1000) makes one statement per message.
 */
const ROWS_PER_INSERT = 1000;

/** Inserts the transmissions of one message, as few multi-row INSERTs as the parameter bounds allow. */
export async function insertTransmissions(db: Tx, rows: readonly AcceptedTransmission[]): Promise<void> {
  for (let start = 0; start < rows.length; start += ROWS_PER_INSERT) {
    await INSERT_TRANSMISSIONS.execute(db, rows.slice(start, start + ROWS_PER_INSERT));
  }
}

/**
 * Sets the first open (opened_at), click (clicked_at) or spam complaint (spammed_at) of a
 * transmission: true when this call set it, false when it was already set (or the transmission is gone).
 */
export async function setFirstTrackingTime(db: Tx, id: number, column: 'opened_at' | 'clicked_at' | 'spammed_at', now: number): Promise<boolean> {
  const updated = await db.updateTable('transmissions').set({ [column]: now }).where('id', '=', id).where(column, 'is', null).executeTakeFirst();
  return Number(updated.numUpdatedRows) === 1;
}

/** What an event about a transmission names: the transmission, its message and its project. */
export async function findTransmissionSubject(db: Tx, id: number) {
  return db
    .selectFrom('transmissions')
    .innerJoin('messages', 'messages.id', 'transmissions.message_id')
    .innerJoin('projects', 'projects.id', 'messages.project_id')
    .select([
      'transmissions.id as transmission_id',
      'transmissions.recipient',
      'messages.id as message_id',
      'messages.uid as message_uid',
      'messages.unique_id',
      'messages.sandbox',
      'projects.id as project_id',
      'projects.uid as project_uid',
      'projects.account_id',
    ])
    .where('transmissions.id', '=', id)
    .executeTakeFirst();
}

/** A message's transmissions that are completed: read back by send_message for the events of copies completed at acceptance. */
export async function listCompletedTransmissions(db: Tx, messageId: number) {
  return db
    .selectFrom('transmissions')
    .select(['id', 'recipient', 'result_code', 'result_message'])
    .where('message_id', '=', messageId)
    .where('status', '=', 'completed')
    .orderBy('id')
    .execute();
}

/**
 * Makes a copy waiting to retry (status retry) due now (operations/retry-now.ts): one guarded
 * UPDATE, so it and a worker's claim never both win. It takes the row only while no live lease
 * holds it (a lease holds until locked_until, exclusive, as the claim reads it) and clears an
 * expired one, as a cancel does (storage/cancellations.ts). Returns whether the row changed.
 */
export async function makeRetryDueNow(trx: Tx, input: { messageId: number; transmissionId: number; now: number }): Promise<boolean> {
  const rows = await trx
    .updateTable('transmissions')
    .set({ next_attempt_at: input.now, updated_at: input.now, locked_by: null, locked_until: null })
    .where('id', '=', input.transmissionId)
    .where('message_id', '=', input.messageId)
    .where('status', '=', 'retry')
    .where((eb) => eb.or([eb('locked_until', 'is', null), eb('locked_until', '<=', input.now)]))
    .returning('id')
    .execute();
  return rows.length > 0;
}

/** A copy's status and lease, when it is a copy of that message. */
export async function findCopyState(db: Tx, messageId: number, transmissionId: number) {
  return db
    .selectFrom('transmissions')
    .select(['id', 'recipient', 'status', 'locked_until'])
    .where('id', '=', transmissionId)
    .where('message_id', '=', messageId)
    .executeTakeFirst();
}

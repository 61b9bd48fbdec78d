// Cancelling transmissions that have not gone out (operations/cancel-message.ts).
//
// A transmission can be cancelled while it waits: status queued or retry and no live lease. One
// guarded UPDATE decides, so a worker's claim and a cancel never both win: the claim takes only
// rows whose lease is free (storage/delivery-queue.ts), and the cancel takes only rows whose lease
// is free and clears it, so a finish by a worker whose lease had expired matches nothing
// (`WHERE locked_by = me`). A row a worker holds under a live lease is being delivered right now:
// it is not cancelled (the send may already be on the wire) and is reported as in flight.
import { sql } from 'kysely';
import type { Tx } from './store.ts';

export interface CancellableMessage {
  id: number;
  uid: string;
  unique_id: string;
  /** 1 when the message was accepted in sandbox mode */
  sandbox: number;
  /** the accepted content (JSON): read for the recipient override of the events */
  payload: string;
}

/** The project's message by uid or by id; undefined when it has none such. */
export async function findProjectMessage(db: Tx, projectId: number, key: { uid?: string; id?: number }): Promise<CancellableMessage | undefined> {
  let query = db.selectFrom('messages').select(['id', 'uid', 'unique_id', 'sandbox', 'payload']).where('project_id', '=', projectId);
  if (key.id !== undefined) query = query.where('id', '=', key.id);
  if (key.uid !== undefined) query = query.where('uid', '=', key.uid);
  return query.executeTakeFirst();
}

export interface CancelledTransmission {
  id: number;
  recipient: string;
  attempts: number;
  created_at: number;
}

/**
 * Ends the message's waiting transmissions (all, or those whose recipient is one of `recipients`,
 * compared lower-cased) as failed with result CANCELLED; returns the rows it changed.
 */
export async function cancelWaitingTransmissions(
  trx: Tx,
  input: { messageId: number; recipients: readonly string[] | null; now: number; resultCode: string; resultMessage: string },
): Promise<CancelledTransmission[]> {
  if (input.recipients !== null && input.recipients.length === 0) return [];
  let query = trx
    .updateTable('transmissions')
    .set({
      status: 'failed',
      failed_at: input.now,
      updated_at: input.now,
      result_code: input.resultCode,
      result_message: input.resultMessage,
      locked_by: null,
      locked_until: null,
    })
    .where('message_id', '=', input.messageId)
    .where(sql<boolean>`status in ('queued', 'retry')`)
    // A lease holds until locked_until, exclusive (as the claim reads it).
    .where((eb) => eb.or([eb('locked_until', 'is', null), eb('locked_until', '<=', input.now)]));
  if (input.recipients !== null) {
    query = query.where(sql<string>`lower(recipient)`, 'in', input.recipients.map((r) => r.toLowerCase()));
  }
  return query.returning(['id', 'recipient', 'attempts', 'created_at']).execute();
}

export interface TransmissionState {
  id: number;
  recipient: string;
  status: string;
  locked_until: number | null;
}

/** Every transmission of the message, with its state (what a cancel reports for the rest). */
export async function listTransmissionStates(db: Tx, messageId: number): Promise<TransmissionState[]> {
  return db.selectFrom('transmissions').select(['id', 'recipient', 'status', 'locked_until']).where('message_id', '=', messageId).orderBy('id').execute();
}

// The transmission side of bounces that arrive by mail (operations/bounces.ts): find the
// transmission a VERP address names, and fail it.
import type { Tx } from './store.ts';

export interface BounceTarget {
  id: number;
  project_id: number;
  account_id: number;
  recipient: string;
  status: string;
  created_at: number;
  attempts: number;
  message_id: number;
  message_uid: string;
  unique_id: string;
  project_uid: string;
  /** 1 when the message was accepted in sandbox mode */
  sandbox: number;
  /** the accepted content (JSON): read for its recipient override */
  payload: string;
}

export async function findBounceTarget(db: Tx, transmissionId: number): Promise<BounceTarget | undefined> {
  return db
    .selectFrom('transmissions')
    .innerJoin('projects', 'projects.id', 'transmissions.project_id')
    .innerJoin('messages', 'messages.id', 'transmissions.message_id')
    .select([
      'transmissions.id',
      'transmissions.project_id',
      'projects.account_id',
      'transmissions.recipient',
      'transmissions.status',
      'transmissions.created_at',
      'transmissions.attempts',
      'messages.id as message_id',
      'messages.uid as message_uid',
      'messages.unique_id',
      'messages.sandbox',
      'projects.uid as project_uid',
      'messages.payload',
    ])
    .where('transmissions.id', '=', transmissionId)
    .executeTakeFirst();
}

/**
 * Marks a transmission failed by a bounce, whatever its status was (completed included). Clearing
 * the lease makes a worker that still holds the row lose its conditional finish (`WHERE locked_by
 * = me`): the bounce, which is later news, stands. completed_at, if set, is kept as the record of
 * the receiving server's acceptance.
 */
export async function failTransmissionByBounce(trx: Tx, id: number, result: { code: string; message: string; now: number }): Promise<void> {
  await trx
    .updateTable('transmissions')
    .set({
      status: 'failed',
      failed_at: result.now,
      updated_at: result.now,
      result_code: result.code,
      result_message: result.message,
      locked_by: null,
      locked_until: null,
    })
    .where('id', '=', id)
    .execute();
}

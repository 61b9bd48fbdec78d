// Inbound emails: one row per email the watcher took from a mailbox and handed to a postback. The
// row ties the IMAP position (uid_validity, imap_uid) to the outbound request; \Seen is set on the
// server only once that request is delivered (2xx).
import { sql } from 'kysely';
import { holdingRows } from './dialect.ts';
import type { InboundEmail } from './outbound-schema.ts';
import type { Tx } from './store.ts';

export async function insertInboundEmail(db: Tx, row: Omit<InboundEmail, 'id'>): Promise<boolean> {
  const result = await db
    .insertInto('inbound_emails')
    .values(row)
    .onConflict((oc) => oc.columns(['mailbox_id', 'uid_validity', 'imap_uid']).doNothing())
    .executeTakeFirst();
  return Number(result.numInsertedOrUpdatedRows ?? 0) === 1;
}

export async function listPostingInboundEmails(db: Tx, mailboxId: number, limit: number): Promise<InboundEmail[]> {
  const rows = await db.selectFrom('inbound_emails').selectAll().where('mailbox_id', '=', mailboxId).where('state', '=', 'posting').orderBy('id').limit(limit).execute();
  return rows.map((r) => ({ ...r, id: Number(r.id), imap_uid: Number(r.imap_uid), outbound_id: Number(r.outbound_id) }));
}

/**
 * The failed emails whose postback requests were put back in the queue are posting again, so the
 * watcher flags them \Seen once a retry is delivered (docs/mailboxes.md, "What the watcher does").
 */
export async function reopenInboundEmails(db: Tx, outboundIds: readonly number[], now: number): Promise<void> {
  if (outboundIds.length === 0) return;
  await db.updateTable('inbound_emails').set({ state: 'posting', updated_at: now }).where('outbound_id', 'in', outboundIds).where('state', '=', 'failed').execute();
}

/** Emails whose postback was delivered and whose \Seen flag is set on the server. */
export async function markInboundEmailsSeen(db: Tx, ids: readonly number[], now: number): Promise<void> {
  if (ids.length === 0) return;
  await db.updateTable('inbound_emails').set({ state: 'seen', updated_at: now }).where('id', 'in', ids).where('state', '=', 'posting').execute();
}

/**
 * Emails whose postback gave up: `failed`, but only while that request is still failed (or was
 * pruned) when this writes. The watcher read the request's state earlier, outside any transaction;
 * a retry_webhook_deliveries that came in between found the email still `posting` (so did not
 * reopen it) and put the request back in the queue: that requeue wins, and the email stays
 * `posting`, flagged \Seen once the retry is delivered (docs/mailboxes.md, "Failures").
 *
 * On PostgreSQL the requests are held first (holdingRows): a requeue still uncommitted is waited
 * for, and the UPDATE, with a snapshot taken after it, sees the request pending. Without the hold,
 * the UPDATE's snapshot could predate a requeue that commits before it reaches the email's row.
 */
export async function markInboundEmailsFailed(db: Tx, ids: readonly number[], now: number): Promise<void> {
  if (ids.length === 0) return;
  const requests = db.selectFrom('inbound_emails').select('outbound_id').where('id', 'in', ids);
  await holdingRows(db.selectFrom('outbound_requests').select('id').where('id', 'in', requests), db).execute();
  await db
    .updateTable('inbound_emails')
    .set({ state: 'failed', updated_at: now })
    .where('id', 'in', ids)
    .where('state', '=', 'posting')
    .where((eb) =>
      eb.not(
        eb.exists(
          eb
            .selectFrom('outbound_requests')
            .select(sql`1`.as('requeued'))
            .whereRef('outbound_requests.id', '=', 'inbound_emails.outbound_id')
            .where('outbound_requests.state', '<>', 'failed'),
        ),
      ),
    )
    .execute();
}

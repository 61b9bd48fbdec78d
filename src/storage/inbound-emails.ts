// Inbound emails: one row per email the watcher took from a mailbox and handed to a postback. The
// row ties the IMAP position (uid_validity, imap_uid) to the outbound request; \Seen is set on the
// server only once that request is delivered (2xx).
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

export async function setInboundEmailState(db: Tx, ids: readonly number[], state: 'seen' | 'failed', now: number): Promise<void> {
  if (ids.length === 0) return;
  await db.updateTable('inbound_emails').set({ state, updated_at: now }).where('id', 'in', ids).where('state', '=', 'posting').execute();
}

// The mailboxes table: inbound IMAP mailboxes of an account. The API (operations/mailboxes.ts)
// writes the configuration; the IMAP watcher (ingress/) claims due rows by next_check_at and
// records status, last_error and checked_at. password and postback_secret are stored sealed
// (domain/secret-box.ts) and never leave the service.
import type { Insertable, Updateable } from 'kysely';
import { skippingLocked } from './dialect.ts';
import type { Tx } from './store.ts';
import { insertedOrDuplicate, type Duplicate } from './duplicates.ts';
import type { Mailbox, MailboxesTable } from './schema.ts';

export type NewMailbox = Omit<Insertable<MailboxesTable>, 'id'>;
export type MailboxPatch = Omit<Updateable<MailboxesTable>, 'id' | 'account_id' | 'created_at'> & { updated_at: number };

/** The new row, or `{ duplicate: true }` when its unique key is taken (storage/duplicates.ts). */
export async function insertMailbox(db: Tx, row: NewMailbox): Promise<Mailbox | Duplicate> {
  return insertedOrDuplicate(db.insertInto('mailboxes').values(row).returningAll().executeTakeFirstOrThrow());
}

export async function findMailboxByUid(db: Tx, accountId: number, uid: string): Promise<Mailbox | undefined> {
  return db.selectFrom('mailboxes').selectAll().where('account_id', '=', accountId).where('uid', '=', uid).executeTakeFirst();
}

export async function listMailboxes(db: Tx, accountId: number): Promise<Mailbox[]> {
  return db.selectFrom('mailboxes').selectAll().where('account_id', '=', accountId).orderBy('id').execute();
}

export async function countMailboxes(db: Tx, accountId: number): Promise<number> {
  const row = await db
    .selectFrom('mailboxes')
    .select((eb) => eb.fn.countAll<number | string>().as('n'))
    .where('account_id', '=', accountId)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

export async function updateMailbox(db: Tx, id: number, patch: MailboxPatch): Promise<Mailbox | undefined> {
  return db.updateTable('mailboxes').set(patch).where('id', '=', id).returningAll().executeTakeFirst();
}

export async function deleteMailbox(db: Tx, id: number): Promise<void> {
  await db.deleteFrom('mailboxes').where('id', '=', id).execute();
}

/** The postback URLs of the named mailboxes (account ids and uids are matched separately: callers filter). */
export async function listPostbackUrls(
  db: Tx,
  accountIds: readonly number[],
  uids: readonly string[],
): Promise<Array<Pick<Mailbox, 'account_id' | 'uid' | 'postback_url'>>> {
  if (accountIds.length === 0 || uids.length === 0) return [];
  return db.selectFrom('mailboxes').select(['account_id', 'uid', 'postback_url']).where('account_id', 'in', accountIds).where('uid', 'in', uids).execute();
}

// ---- the watcher's lease (operations/ingress.ts) ----
// Every write below is guarded by `locked_by = worker`: a deleted or re-leased mailbox is left alone.

/** Columns the lease holder changes: polling state, position and the lease itself. */
export type LeasedMailboxPatch = Pick<
  Updateable<MailboxesTable>,
  'status' | 'last_error' | 'failures' | 'checked_at' | 'next_check_at' | 'locked_by' | 'locked_until'
>;

/** Leases up to `limit` due mailboxes (oldest next_check_at first): one UPDATE ... RETURNING. */
export async function claimDueMailboxRows(
  db: Tx,
  opts: { worker: string; now: number; leaseMs: number; limit: number },
): Promise<Mailbox[]> {
  const { worker, now, leaseMs, limit } = opts;
  // Picked once (MATERIALIZED): see claimDueOutbound in storage/outbound.ts for why.
  return db
    .with(
      (cte) => cte('due').materialized(),
      (qb) => {
        let due = qb
          .selectFrom('mailboxes')
          .select('id')
          .where('next_check_at', '<=', now)
          .where((eb) => eb.or([eb('locked_until', 'is', null), eb('locked_until', '<', now)]))
          .orderBy('next_check_at')
          .limit(limit);
        return skippingLocked(due, db);
      },
    )
    .updateTable('mailboxes')
    .set({ locked_by: worker, locked_until: now + leaseMs })
    .where('id', 'in', (eb) => eb.selectFrom('due').select('due.id'))
    .where((eb) => eb.or([eb('locked_until', 'is', null), eb('locked_until', '<', now)]))
    .returningAll()
    .execute();
}

/** The ids of the mailboxes `worker` holds (LeaseJob.heldBy). */
export async function mailboxesHeldBy(db: Tx, worker: string): Promise<number[]> {
  const rows = await db.selectFrom('mailboxes').select('id').where('locked_by', '=', worker).execute();
  return rows.map((r) => Number(r.id));
}

/** Moves the leases `worker` still holds to `lockedUntil`; returns how many. */
export async function extendMailboxLeases(db: Tx, ids: readonly number[], worker: string, lockedUntil: number): Promise<number> {
  if (ids.length === 0) return 0;
  const result = await db.updateTable('mailboxes').set({ locked_until: lockedUntil }).where('id', 'in', ids).where('locked_by', '=', worker).executeTakeFirst();
  return Number(result.numUpdatedRows);
}

/** The row while `worker` holds it; undefined when it was deleted or taken over. */
export async function findMailboxHeldBy(db: Tx, id: number, worker: string): Promise<Mailbox | undefined> {
  return db.selectFrom('mailboxes').selectAll().where('id', '=', id).where('locked_by', '=', worker).executeTakeFirst();
}

/** The failure count of a mailbox this worker holds; undefined when it does not hold it. */
export async function findLeasedMailboxFailures(db: Tx, id: number, worker: string): Promise<number | undefined> {
  const row = await db.selectFrom('mailboxes').select('failures').where('id', '=', id).where('locked_by', '=', worker).executeTakeFirst();
  return row ? Number(row.failures) : undefined;
}

export async function updateLeasedMailbox(db: Tx, id: number, worker: string, patch: LeasedMailboxPatch): Promise<void> {
  await db.updateTable('mailboxes').set(patch).where('id', '=', id).where('locked_by', '=', worker).execute();
}

/**
 * Moves the mailbox's IMAP position to `lastSeenUid` and returns where and how to post (read in
 * the same statement, so a changed URL or rotated secret applies at once); undefined when the
 * lease was lost.
 */
export async function advanceMailboxPosition(
  db: Tx,
  id: number,
  worker: string,
  position: { uidValidity: string; lastSeenUid: number },
): Promise<Pick<Mailbox, 'postback_url' | 'postback_secret'> | undefined> {
  return db
    .updateTable('mailboxes')
    .set({ uid_validity: position.uidValidity, last_seen_uid: position.lastSeenUid })
    .where('id', '=', id)
    .where('locked_by', '=', worker)
    .returning(['postback_url', 'postback_secret'])
    .executeTakeFirst();
}

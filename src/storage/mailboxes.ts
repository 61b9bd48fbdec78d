// The mailboxes table: inbound IMAP mailboxes of an account. The API (operations/mailboxes.ts)
// writes the configuration; the IMAP watcher (ingress/) claims due rows by next_check_at and
// records status, last_error and checked_at. password and postback_secret are stored sealed
// (domain/secret-box.ts) and never leave the service.
import type { Insertable, Updateable } from 'kysely';
import type { Tx } from './store.ts';
import type { Mailbox, MailboxesTable } from './schema.ts';

export type NewMailbox = Omit<Insertable<MailboxesTable>, 'id'>;
export type MailboxPatch = Omit<Updateable<MailboxesTable>, 'id' | 'account_id' | 'created_at'> & { updated_at: number };

export async function insertMailbox(db: Tx, row: NewMailbox): Promise<Mailbox> {
  return db.insertInto('mailboxes').values(row).returningAll().executeTakeFirstOrThrow();
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

// Sending domains of an account: name, DKIM selector and keys (the private key sealed with the
// service's SecretBox), and the last DNS check.
import type { Tx } from './store.ts';
import { insertedOrDuplicate, type Duplicate } from './duplicates.ts';
import type { Domain } from './schema.ts';

/** The new row, or `{ duplicate: true }` when its unique key is taken (storage/duplicates.ts). */
export async function insertDomain(
  db: Tx,
  row: { accountId: number; name: string; selector: string; sealedPrivateKey: string; publicKeyPem: string; now: number },
): Promise<Domain | Duplicate> {
  return insertedOrDuplicate(db
    .insertInto('domains')
    .values({
      account_id: row.accountId,
      name: row.name,
      dkim_selector: row.selector,
      dkim_private_key: row.sealedPrivateKey,
      dkim_public_key: row.publicKeyPem,
      last_check: null,
      checked_at: null,
      created_at: row.now,
    })
    .returningAll()
    .executeTakeFirstOrThrow());
}

export async function findDomain(db: Tx, accountId: number, name: string): Promise<Domain | undefined> {
  return db.selectFrom('domains').selectAll().where('account_id', '=', accountId).where('name', '=', name).executeTakeFirst();
}

/** The account's domains among `names` (a From domain and its parents, for DKIM). */
export async function findDomainsByName(db: Tx, accountId: number, names: readonly string[]): Promise<Domain[]> {
  if (names.length === 0) return [];
  return db.selectFrom('domains').selectAll().where('account_id', '=', accountId).where('name', 'in', names).execute();
}

export async function listDomains(db: Tx, accountId: number): Promise<Domain[]> {
  return db.selectFrom('domains').selectAll().where('account_id', '=', accountId).orderBy('name').execute();
}

export async function countDomains(db: Tx, accountId: number): Promise<number> {
  const row = await db.selectFrom('domains').select((eb) => eb.fn.countAll<number>().as('n')).where('account_id', '=', accountId).executeTakeFirstOrThrow();
  return Number(row.n);
}

export async function deleteDomain(db: Tx, accountId: number, name: string): Promise<boolean> {
  const rows = await db.deleteFrom('domains').where('account_id', '=', accountId).where('name', '=', name).returning('id').execute();
  return rows.length > 0;
}

export async function recordDomainCheck(db: Tx, id: number, check: string, now: number): Promise<Domain | undefined> {
  return db.updateTable('domains').set({ last_check: check, checked_at: now }).where('id', '=', id).returningAll().executeTakeFirst();
}

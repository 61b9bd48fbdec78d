import type { Tx } from './store.ts';
import { forgetKeyLookups } from './api-keys.ts';
import type { Account } from './schema.ts';

export async function insertAccount(db: Tx, row: { uid: string; name: string; now: number }): Promise<Account> {
  return db
    .insertInto('accounts')
    .values({ uid: row.uid, name: row.name, status: 'active', settings: '{}', created_at: row.now, updated_at: row.now })
    .returningAll()
    .executeTakeFirstOrThrow();
}

export async function findAccountByUid(db: Tx, uid: string): Promise<Account | undefined> {
  return db.selectFrom('accounts').selectAll().where('uid', '=', uid).executeTakeFirst();
}

export async function listAccounts(db: Tx): Promise<Account[]> {
  return db.selectFrom('accounts').selectAll().orderBy('id').execute();
}

export async function updateAccount(
  db: Tx,
  id: number,
  patch: Partial<Pick<Account, 'name' | 'status' | 'settings'>> & { updated_at: number },
): Promise<Account | undefined> {
  forgetKeyLookups(); // the key lookup carries the project and account (api-keys.ts)
  return db.updateTable('accounts').set(patch).where('id', '=', id).returningAll().executeTakeFirst();
}

export async function findAccountById(db: Tx, id: number): Promise<Account | undefined> {
  return db.selectFrom('accounts').selectAll().where('id', '=', id).executeTakeFirst();
}

// The dashboard's users and their sign-ins (migration 100), the sign-in throttle's counts (migration
// 170) and the one-time form tokens used (migration 220). Plain lookups and writes; the rules (hashing, expiry, scoping, limits) are
// operations/users.ts's.
import type { DashboardSession, DashboardUser } from './dashboard-schema.ts';
import type { Tx } from './store.ts';
import { insertedOrDuplicate, type Duplicate } from './duplicates.ts';

/** The new row, or `{ duplicate: true }` when its unique key is taken (storage/duplicates.ts). */
export async function insertUser(
  db: Tx,
  row: { accountId: number; projectId: number | null; email: string; passwordHash: string; now: number },
): Promise<DashboardUser | Duplicate> {
  return insertedOrDuplicate(db
    .insertInto('dashboard_users')
    .values({ account_id: row.accountId, project_id: row.projectId, email: row.email, password_hash: row.passwordHash, created_at: row.now, updated_at: row.now })
    .returningAll()
    .executeTakeFirstOrThrow());
}

export async function findUserByEmail(db: Tx, email: string): Promise<DashboardUser | undefined> {
  return db.selectFrom('dashboard_users').selectAll().where('email', '=', email).executeTakeFirst();
}

export async function findUserById(db: Tx, id: number): Promise<DashboardUser | undefined> {
  return db.selectFrom('dashboard_users').selectAll().where('id', '=', id).executeTakeFirst();
}

export async function updateUserPassword(db: Tx, id: number, passwordHash: string, now: number): Promise<void> {
  await db.updateTable('dashboard_users').set({ password_hash: passwordHash, updated_at: now }).where('id', '=', id).execute();
}

export async function markSignedIn(db: Tx, id: number, now: number): Promise<void> {
  await db.updateTable('dashboard_users').set({ signed_in_at: now }).where('id', '=', id).execute();
}

export async function insertSession(db: Tx, row: { userId: number; tokenHash: string; csrfToken: string; now: number; expiresAt: number }): Promise<void> {
  await db
    .insertInto('dashboard_sessions')
    .values({ user_id: row.userId, token_hash: row.tokenHash, csrf_token: row.csrfToken, created_at: row.now, expires_at: row.expiresAt })
    .execute();
}

/** The session with this token hash and its user, if it has not expired. */
export async function findLiveSession(db: Tx, tokenHash: string, now: number): Promise<{ session: DashboardSession; user: DashboardUser } | undefined> {
  const session = await db
    .selectFrom('dashboard_sessions')
    .selectAll()
    .where('token_hash', '=', tokenHash)
    .where('expires_at', '>', now)
    .executeTakeFirst();
  if (!session) return undefined;
  const user = await findUserById(db, Number(session.user_id));
  return user ? { session, user } : undefined;
}

export async function deleteSession(db: Tx, tokenHash: string): Promise<void> {
  await db.deleteFrom('dashboard_sessions').where('token_hash', '=', tokenHash).execute();
}

export async function deleteUserSessions(db: Tx, userId: number): Promise<void> {
  await db.deleteFrom('dashboard_sessions').where('user_id', '=', userId).execute();
}

/** Removes expired sessions (called at sign-in, so the table stays the size of the live ones). */
export async function deleteExpiredSessions(db: Tx, now: number): Promise<void> {
  await db.deleteFrom('dashboard_sessions').where('expires_at', '<=', now).execute();
}

/** The users of an account, by email. */
export async function listUsersOfAccount(db: Tx, accountId: number): Promise<DashboardUser[]> {
  return db.selectFrom('dashboard_users').selectAll().where('account_id', '=', accountId).orderBy('email').execute();
}

/** The failures counted for each of `keys` in windows that began after `windowStart`. */
export async function countSignInFailures(db: Tx, keys: readonly string[], windowStart: number): Promise<Map<string, number>> {
  const rows = await db.selectFrom('sign_in_failures').select(['key', 'count']).where('key', 'in', keys).where('since', '>', windowStart).execute();
  return new Map(rows.map((r) => [r.key, Number(r.count)]));
}

/**
 * One more failure for each key: counted in its window, or the first of a new window where the old
 * one began at or before `windowStart`. Rows of windows past are removed first, so the table holds
 * only the keys that failed within the last window.
 */
export async function recordSignInFailures(db: Tx, keys: readonly string[], now: number, windowStart: number): Promise<void> {
  await db.deleteFrom('sign_in_failures').where('since', '<=', windowStart).execute();
  for (const key of keys) {
    await db
      .insertInto('sign_in_failures')
      .values({ key, count: 1, since: now })
      .onConflict((oc) => oc.column('key').doUpdateSet({ count: (eb) => eb('sign_in_failures.count', '+', 1) }))
      .execute();
  }
}

export async function clearSignInFailures(db: Tx, key: string): Promise<void> {
  await db.deleteFrom('sign_in_failures').where('key', '=', key).execute();
}

/**
 * Records the use of a one-time form token: true when this is its first use, false when its nonce
 * was recorded before (the unique key decides, so two submissions at once cannot both be first).
 * Rows of tokens no longer accepted are removed first.
 */
export async function recordFormUse(db: Tx, row: { nonce: string; expiresAt: number }, now: number): Promise<boolean> {
  await db.deleteFrom('dashboard_form_uses').where('expires_at', '<=', now).execute();
  const result = await db
    .insertInto('dashboard_form_uses')
    .values({ nonce: row.nonce, expires_at: row.expiresAt })
    .onConflict((oc) => oc.column('nonce').doNothing())
    .executeTakeFirst();
  return Number(result.numInsertedOrUpdatedRows ?? 0) === 1;
}

/** Forgets a use: the submission changed nothing, so it may be sent again. */
export async function deleteFormUse(db: Tx, nonce: string): Promise<void> {
  await db.deleteFrom('dashboard_form_uses').where('nonce', '=', nonce).execute();
}

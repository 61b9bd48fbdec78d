// The dashboard's users and sessions (migration 100). Plain lookups and writes; the rules (hashing,
// expiry, scoping) are operations/users.ts's.
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

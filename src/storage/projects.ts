import type { Tx } from './store.ts';
import { forgetKeyLookups } from './api-keys.ts';
import { insertedOrDuplicate, type Duplicate } from './duplicates.ts';
import type { Project } from './schema.ts';

/** The new row, or `{ duplicate: true }` when its unique key is taken (storage/duplicates.ts). */
export async function insertProject(db: Tx, row: { accountId: number; uid: string; name: string; now: number; settings?: string }): Promise<Project | Duplicate> {
  return insertedOrDuplicate(db
    .insertInto('projects')
    .values({ account_id: row.accountId, uid: row.uid, name: row.name, status: 'active', settings: row.settings ?? '{}', created_at: row.now, updated_at: row.now })
    .returningAll()
    .executeTakeFirstOrThrow());
}

export async function findProjectByUid(db: Tx, accountId: number, uid: string): Promise<Project | undefined> {
  return db.selectFrom('projects').selectAll().where('account_id', '=', accountId).where('uid', '=', uid).executeTakeFirst();
}

export async function listProjects(db: Tx, accountId: number): Promise<Project[]> {
  return db.selectFrom('projects').selectAll().where('account_id', '=', accountId).orderBy('id').execute();
}

export async function updateProject(
  db: Tx,
  id: number,
  patch: Partial<Pick<Project, 'name' | 'status' | 'settings'>> & { updated_at: number },
): Promise<Project | undefined> {
  forgetKeyLookups(); // the key lookup carries the project and account (api-keys.ts)
  return db.updateTable('projects').set(patch).where('id', '=', id).returningAll().executeTakeFirst();
}

export async function findProjectById(db: Tx, id: number): Promise<Project | undefined> {
  return db.selectFrom('projects').selectAll().where('id', '=', id).executeTakeFirst();
}

export async function countProjects(db: Tx, accountId: number): Promise<number> {
  const row = await db
    .selectFrom('projects')
    .select((eb) => eb.fn.countAll<number | string>().as('n'))
    .where('account_id', '=', accountId)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/**
 * Active projects whose settings may turn tracking on (their stored JSON names `"tracking":true`;
 * the caller reads the settings to be sure), at most `limit`.
 */
export async function listProjectsNamingTracking(db: Tx, limit: number): Promise<Project[]> {
  return db.selectFrom('projects').selectAll().where('status', '=', 'active').where('settings', 'like', '%"tracking":true%').orderBy('id').limit(limit).execute();
}

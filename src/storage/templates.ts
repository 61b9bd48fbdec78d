import type { Tx } from './store.ts';
import { insertedOrDuplicate, type Duplicate } from './duplicates.ts';
import type { Template, TemplatesTable } from './schema.ts';
import type { Insertable } from 'kysely';

export type TemplateFields = Omit<Insertable<TemplatesTable>, 'id' | 'project_id' | 'created_at' | 'updated_at'>;

/** The new row, or `{ duplicate: true }` when its unique key is taken (storage/duplicates.ts). */
export async function insertTemplate(db: Tx, projectId: number, fields: TemplateFields, now: number): Promise<Template | Duplicate> {
  return insertedOrDuplicate(db
    .insertInto('templates')
    .values({ ...fields, project_id: projectId, created_at: now, updated_at: now })
    .returningAll()
    .executeTakeFirstOrThrow());
}

export async function findTemplate(db: Tx, projectId: number, slug: string): Promise<Template | undefined> {
  return db.selectFrom('templates').selectAll().where('project_id', '=', projectId).where('slug', '=', slug).executeTakeFirst();
}

export async function listTemplates(db: Tx, projectId: number): Promise<Template[]> {
  return db.selectFrom('templates').selectAll().where('project_id', '=', projectId).orderBy('slug').execute();
}

export async function updateTemplate(db: Tx, id: number, patch: Partial<TemplateFields>, now: number): Promise<Template | undefined> {
  return db.updateTable('templates').set({ ...patch, updated_at: now }).where('id', '=', id).returningAll().executeTakeFirst();
}

export async function deleteTemplate(db: Tx, id: number): Promise<void> {
  await db.deleteFrom('templates').where('id', '=', id).execute();
}

/** Slugs of the templates that name this one as their parent layout. */
export async function listChildSlugs(db: Tx, projectId: number, parentSlug: string): Promise<string[]> {
  const rows = await db
    .selectFrom('templates')
    .select('slug')
    .where('project_id', '=', projectId)
    .where('parent_slug', '=', parentSlug)
    .orderBy('slug')
    .execute();
  return rows.map((r) => r.slug);
}

/** Every template of the project, slug to parent slug: the project's layout graph. */
export async function listTemplateParents(db: Tx, projectId: number): Promise<Map<string, string | null>> {
  const rows = await db.selectFrom('templates').select(['slug', 'parent_slug']).where('project_id', '=', projectId).execute();
  return new Map(rows.map((r) => [r.slug, r.parent_slug]));
}

export async function countTemplates(db: Tx, projectId: number): Promise<number> {
  const row = await db
    .selectFrom('templates')
    .select((eb) => eb.fn.countAll<number | string>().as('n'))
    .where('project_id', '=', projectId)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

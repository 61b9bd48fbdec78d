// The dashboard's suppression search: a project's entries in address order, keyset-paged, optionally
// those containing a substring (suppressions_project_address serves the order).
import { sql, type SqlBool } from 'kysely';
import type { Suppression } from './schema.ts';
import type { Tx } from './store.ts';

export async function searchSuppressionsPage(db: Tx, q: { projectId: number; contains: string | null; after: string | null; limit: number }): Promise<Suppression[]> {
  let query = db.selectFrom('suppressions').selectAll().where('project_id', '=', q.projectId);
  if (q.after !== null) query = query.where('address', '>', q.after);
  if (q.contains !== null) {
    const pattern = `%${q.contains.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
    query = query.where(sql<SqlBool>`lower(address) like ${pattern} escape '\\'`);
  }
  return query.orderBy('address').limit(q.limit).execute();
}

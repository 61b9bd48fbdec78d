// The suppression list as the dashboard pages through it (adding and removing are
// operations/suppressions.ts's, shared with the API).
import { suppressionKey } from '../domain/suppression-policy.ts';
import type { Services } from '../services.ts';
import type { Project, Suppression } from '../storage/schema.ts';
import { searchSuppressionsPage } from '../storage/suppression-views.ts';
import { findSuppressions } from '../storage/suppressions.ts';

export const SUPPRESSION_PAGE_SIZE = 100;

export async function searchSuppressions(
  services: Services,
  project: Project,
  q: { contains?: string; after?: string },
): Promise<{ rows: Suppression[]; next: string | null }> {
  const contains = (q.contains ?? '').trim().slice(0, 320) || null;
  const after = (q.after ?? '').slice(0, 320) || null;
  const rows = await searchSuppressionsPage(services.store.db, { projectId: project.id, contains, after, limit: SUPPRESSION_PAGE_SIZE + 1 });
  const more = rows.length > SUPPRESSION_PAGE_SIZE;
  const page = rows.slice(0, SUPPRESSION_PAGE_SIZE);
  return { rows: page, next: more ? page[page.length - 1].address : null };
}

/** The project's entry for this address (any spelling of it: its suppressionKey), or null. */
export async function findSuppression(services: Services, project: Project, address: string): Promise<Suppression | null> {
  const [row] = await findSuppressions(services.store.db, project.id, [suppressionKey(address.trim().slice(0, 320))]);
  return row ?? null;
}

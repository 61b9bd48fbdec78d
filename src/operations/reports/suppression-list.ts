// get_suppression_list: the addresses this project will not send to now, keyed by address (the
// spelling each entry was first stored with).
import { formatIsoTime } from '../../domain/time.ts';
import { listActiveSuppressions } from '../../storage/reports.ts';
import { shownAddress } from '../suppressions.ts';
import type { Project } from '../../storage/schema.ts';
import type { Services } from '../../services.ts';

export interface SuppressionReport {
  /** rejected (permanent) | warning (blocked until blocked_until) */
  status: string;
  /** hard_bounce | soft_bounce | manual | ... */
  suppression_state: string;
  blocked_until: string | null;
  message: string | null;
}

/**
 * Every `rejected` entry and every `warning` still in force (a warning whose blocked_until has
 * passed no longer blocks and is left out). All of them unless a page is asked for.
 */
export async function getSuppressionList(
  services: Services,
  project: Project,
  page: { page: number; perPage: number } | null,
): Promise<Record<string, SuppressionReport>> {
  const rows = await listActiveSuppressions(
    services.store.db,
    project.id,
    services.clock.now(),
    page ? { offset: (page.page - 1) * page.perPage, limit: page.perPage } : null,
  );
  const out: Record<string, SuppressionReport> = {};
  for (const row of rows) {
    out[shownAddress(row)] = {
      status: row.status,
      suppression_state: row.suppression_state,
      blocked_until: formatIsoTime(row.blocked_until),
      message: row.message,
    };
  }
  return out;
}

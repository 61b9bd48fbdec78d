// get_project_info and get_account_info: name, url, transmission counts and users. The account
// form has the same shape, counted over all of the account's projects.
import { DAY_MS } from '../../domain/time.ts';
import { listUsersOfAccount } from '../../storage/dashboard-users.ts';
import { countTransmissionsCreated, listProjectIdsOfAccount } from '../../storage/reports.ts';
import type { Account, Project } from '../../storage/schema.ts';
import type { Services } from '../../services.ts';
import { projectUrl } from '../projects.ts';

export interface UsageInfo {
  uid: string;
  name: string;
  url: string;
  /** transmissions created today, this calendar month (UTC) and ever */
  transmissions: { today: number; this_month: number; overall: number };
  /**
   * email -> name of the dashboard users who see it (docs/dashboard.md): the account's users, and
   * for a project also those of that project alone. A user has no name of its own: the name is the
   * email.
   */
  users: Record<string, string>;
}

export function accountUrl(services: Services, account: Pick<Account, 'uid'>): string {
  return `${services.config.publicUrl}/accounts/${encodeURIComponent(account.uid)}`;
}

/**
 * A COUNT steps over every index entry it counts, so `overall` is this month plus what came
 * before it, and no row is stepped over twice except today's.
 */
async function countTransmissions(services: Services, projectIds: readonly number[]): Promise<UsageInfo['transmissions']> {
  const nowMs = services.clock.now();
  const now = new Date(nowMs);
  const db = services.store.db;
  const monthStart = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1);
  const thisMonth = await countTransmissionsCreated(db, projectIds, monthStart, null);
  const before = await countTransmissionsCreated(db, projectIds, null, monthStart);
  return {
    today: await countTransmissionsCreated(db, projectIds, Math.floor(nowMs / DAY_MS) * DAY_MS, null),
    this_month: thisMonth,
    overall: thisMonth + before,
  };
}

/** The users of the account (of `projectId` and account-wide only, when given), by email. */
async function usersOf(services: Services, accountId: number, projectId?: number): Promise<UsageInfo['users']> {
  const users: UsageInfo['users'] = {};
  for (const user of await listUsersOfAccount(services.store.db, accountId)) {
    if (projectId === undefined || user.project_id === null || user.project_id === projectId) users[user.email] = user.email;
  }
  return users;
}

export async function getProjectInfo(services: Services, project: Project): Promise<{ project: UsageInfo }> {
  return {
    project: {
      uid: project.uid,
      name: project.name,
      url: projectUrl(services, project),
      transmissions: await countTransmissions(services, [project.id]),
      users: await usersOf(services, project.account_id, project.id),
    },
  };
}

export async function getAccountInfo(services: Services, account: Account): Promise<{ account: UsageInfo }> {
  const projectIds = await listProjectIdsOfAccount(services.store.db, account.id);
  return {
    account: {
      uid: account.uid,
      name: account.name,
      url: accountUrl(services, account),
      transmissions: await countTransmissions(services, projectIds),
      users: await usersOf(services, account.id),
    },
  };
}

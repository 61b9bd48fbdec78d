// What the command files share: finding the account and project a command is about (--account,
// --project; either may be left out when there is exactly one), the caller an operation expects,
// and printing rows as an aligned table.
import type { Services } from '../services.ts';
import type { Account, Caller, Project, ProjectCaller } from '../operations/context.ts';
import { UsageError, type CommandFlags } from './types.ts';

export class NotFoundError extends Error {}

export async function resolveAccount(services: Services, flags: CommandFlags): Promise<Account> {
  const { listAccounts } = await import('../operations/accounts.ts');
  const uid = flags.text('account');
  const accounts = await listAccounts(services);
  if (uid !== undefined) {
    const account = accounts.find((a) => a.uid === uid);
    if (!account) throw new NotFoundError(`no account with uid ${uid}`);
    return account;
  }
  if (accounts.length === 1) return accounts[0];
  throw new UsageError(accounts.length === 0 ? 'there is no account yet (posthorn init)' : 'there are several accounts: name one with --account UID');
}

export async function resolveProject(services: Services, flags: CommandFlags): Promise<{ account: Account; project: Project }> {
  const account = await resolveAccount(services, flags);
  const { findAccountProject, listProjects } = await import('../operations/projects.ts');
  const uid = flags.text('project');
  if (uid !== undefined) return { account, project: await findAccountProject(services, account, uid) };
  const projects = await listProjects(services, account);
  if (projects.length === 1) return { account, project: projects[0].project };
  throw new UsageError(projects.length === 0 ? `account ${account.uid} has no project` : 'the account has several projects: name one with --project UID');
}

export function accountCaller(account: Account): Caller {
  return { keyKind: 'account', account, project: null };
}

export function projectCaller(account: Account, project: Project): ProjectCaller {
  return { keyKind: 'project', account, project };
}

/** Rows as columns padded to their widest cell; `empty` when there are none. */
export function table(header: readonly string[], rows: ReadonlyArray<ReadonlyArray<string | number | null>>, empty: string): string {
  if (rows.length === 0) return empty;
  const cells = [header, ...rows].map((r) => r.map((c) => (c === null ? '-' : String(c)).replace(/[\u0000-\u001f\u007f]/g, ' ')));
  const widths = header.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? '').length)));
  return cells.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]))).join('  ')).join('\n');
}

export function isoTime(ms: number | null | undefined): string | null {
  return ms === null || ms === undefined ? null : new Date(Number(ms)).toISOString();
}

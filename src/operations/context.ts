// What an API-facing operation knows of its caller: the key kind and what the key identified. The
// collaborators every operation receives are described in src/services.ts.
import type { Account, Project } from '../storage/schema.ts';

/** The records operations hand to edges (rows as storage reads them), named here so edges need no storage import. */
export type { Account, Mailbox, Project, Template } from '../storage/schema.ts';

export type KeyKind = 'account' | 'project';

export interface Caller {
  readonly keyKind: KeyKind;
  readonly account: Account;
  /** the key's project; null for an account key */
  readonly project: Project | null;
}

/** A caller known to hold a project key. */
export interface ProjectCaller extends Caller {
  readonly keyKind: 'project';
  readonly project: Project;
}

// What every operation receives: the collaborators (store, configuration, clock, secrets, log)
// and, for API calls, the caller that the key identified.
import type { Logger } from 'pino';
import type { Config } from '../config.ts';
import type { Clock } from '../domain/clock.ts';
import type { SecretBox } from '../domain/secret-box.ts';
import type { Account, Project } from '../storage/schema.ts';
import type { Store } from '../storage/store.ts';

export interface Services {
  readonly store: Store;
  readonly config: Readonly<Config>;
  readonly clock: Clock;
  readonly secrets: SecretBox;
  readonly log: Logger;
}

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

// The suppression list (issue 3, "Bounces and suppression"). STUB signatures: owned by the
// bounces/domains engineer, who implements them; delivery calls them.
import type { Tx } from './store.ts';
import type { Suppression } from './schema.ts';

/** An entry that blocks sending to `address` now: `rejected`, or `warning` with blocked_until > now. */
export async function findActiveSuppression(_db: Tx, _projectId: number, _address: string, _now: number): Promise<Suppression | undefined> {
  return undefined;
}

export interface BounceRecord {
  projectId: number;
  address: string;
  /** hard: permanent (5xx, user unknown); soft: a deferral that counts towards a warning */
  kind: 'hard' | 'soft';
  message: string;
  now: number;
}

/** Records a hard or soft bounce against the address (inside the caller's transaction). */
export async function recordBounce(_trx: Tx, _bounce: BounceRecord): Promise<void> {}

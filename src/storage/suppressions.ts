// The suppression list (docs/domains-and-bounces.md). Delivery calls findActiveSuppression
// before sending and recordBounce with each hard or soft failure; the API adds and removes entries.
// Rules (docs/domains-and-bounces.md): a hard bounce makes the address `rejected`/`hard_bounce`
// until removed; SOFT_BOUNCE_THRESHOLD soft failures within SOFT_BOUNCE_WINDOW_MS make it
// `warning`/`soft_bounce` with blocked_until = now + SOFT_BOUNCE_BLOCK_MS; a hard bounce upgrades
// a warning. Every entry is stored and looked up by its suppressionKey (case-insensitive, the local
// part included), and keeps the spelling it was first stored with in display_address.
//
// For the reports engineer (get_suppression_list): listSuppressions(db, projectId) returns the
// rows in insertion order; present blocked_until with formatIsoTime.
import { CompiledQuery, sql } from 'kysely';
import { CompiledStatement } from './compiled-statement.ts';
import { preparedOnServer, takesArrayParameters } from './dialect.ts';
import { normalizeAddress, SOFT_BOUNCE_BLOCK_MS, SOFT_BOUNCE_THRESHOLD, SOFT_BOUNCE_WINDOW_MS, suppressionKey } from '../domain/suppression-policy.ts';
import type { Tx } from './store.ts';
import type { Suppression } from './schema.ts';

/** An entry that blocks sending to `address` now: `rejected`, or `warning` with blocked_until > now. */
export async function findActiveSuppression(db: Tx, projectId: number, address: string, now: number): Promise<Suppression | undefined> {
  // Batched only outside a transaction: a pending lookup must not outlive the connection it runs on.
  if (!db.isTransaction) return lookupsOf(db).find(projectId, suppressionKey(address), now);
  const { rows } = await db.executeQuery(ACTIVE_SUPPRESSION.with(db, { projectId, address: suppressionKey(address), now }));
  return rows[0];
}

const ACTIVE_SUPPRESSION = new CompiledStatement<'projectId' | 'address' | 'now', Suppression>((db, value) =>
  db
    .selectFrom('suppressions')
    .selectAll()
    .where('project_id', '=', value('projectId'))
    .where('address', '=', value('address'))
    .where((eb) => eb.or([eb('status', '=', 'rejected'), eb.and([eb('status', '=', 'warning'), eb('blocked_until', '>', value('now'))])]))
    .limit(1),
);

interface PendingLookup {
  projectId: number;
  address: string;
  now: number;
  resolve: (row: Suppression | undefined) => void;
  reject: (error: unknown) => void;
}

/**
 * The lookups asked in one event-loop turn, answered by ONE query. Delivery asks once per
 * transmission, and the transmissions of a claimed batch ask in the same turn: on PostgreSQL one
 * round trip per batch instead of one per message; on SQLite one statement, and so one read
 * transaction (its WAL read lock taken and released, two fcntl calls), instead of one per message
 * (docs/decisions/0003-performance.md). The lookups travel as arrays where statements take them,
 * else as one JSON array of [project, address, now] read by json_each.
 */
class SuppressionLookups {
  private pending: PendingLookup[] = [];

  constructor(private readonly db: Tx) {}

  find(projectId: number, address: string, now: number): Promise<Suppression | undefined> {
    return new Promise((resolve, reject) => {
      this.pending.push({ projectId, address, now, resolve, reject });
      if (this.pending.length === 1) setImmediate(() => void this.flush());
    });
  }

  private async flush(): Promise<void> {
    const batch = this.pending;
    this.pending = [];
    try {
      const result = await this.db.executeQuery<Suppression & { lookup: number }>(
        takesArrayParameters(this.db)
          ? CompiledQuery.raw(LOOKUP_SQL, [batch.map((l) => l.projectId), batch.map((l) => l.address), batch.map((l) => l.now)])
          : CompiledQuery.raw(LOOKUP_JSON_SQL, [JSON.stringify(batch.map((l) => [l.projectId, l.address, l.now]))]),
      );
      const found = new Map<number, Suppression>();
      for (const { lookup, ...row } of result.rows) if (!found.has(Number(lookup))) found.set(Number(lookup), row);
      batch.forEach((l, i) => l.resolve(found.get(i + 1)));
    } catch (error) {
      for (const l of batch) l.reject(error);
    }
  }
}

// The columns are listed: a prepared statement's result type must not change under it (a column
// added by a migration while older processes still run).
const LOOKUP_SQL = preparedOnServer(`SELECT s.id, s.project_id, s.address, s.display_address, s.status, s.suppression_state, s.blocked_until, s.message,
  s.soft_failures, s.created_at, s.updated_at, q.lookup FROM unnest($1::bigint[], $2::text[], $3::bigint[]) WITH ORDINALITY AS q(project_id, address, now, lookup)
JOIN suppressions s ON s.project_id = q.project_id AND s.address = q.address
WHERE s.status = 'rejected' OR (s.status = 'warning' AND s.blocked_until > q.now)`);

// json_each numbers the array from 0 (its key); the lookups are numbered from 1, as WITH ORDINALITY does.
const LOOKUP_JSON_SQL = `SELECT s.id, s.project_id, s.address, s.display_address, s.status, s.suppression_state, s.blocked_until, s.message,
  s.soft_failures, s.created_at, s.updated_at, q.key + 1 AS lookup FROM json_each(?) AS q
JOIN suppressions s ON s.project_id = q.value ->> 0 AND s.address = q.value ->> 1
WHERE s.status = 'rejected' OR (s.status = 'warning' AND s.blocked_until > q.value ->> 2)`;

const lookups = new WeakMap<object, SuppressionLookups>();

function lookupsOf(db: Tx): SuppressionLookups {
  let batcher = lookups.get(db);
  if (!batcher) lookups.set(db, (batcher = new SuppressionLookups(db)));
  return batcher;
}

export interface BounceRecord {
  projectId: number;
  address: string;
  /** hard: permanent (5xx, user unknown); soft: a deferral that counts towards a warning */
  kind: 'hard' | 'soft';
  message: string;
  now: number;
  /**
   * Optional: the transmission the failure is about. Consecutive soft failures of the SAME
   * transmission (its retries) count once, so one slow message cannot suppress an address alone.
   */
  transmissionId?: number;
}

/** Records a hard or soft bounce against the address (inside the caller's transaction). */
export async function recordBounce(trx: Tx, bounce: BounceRecord): Promise<void> {
  const address = suppressionKey(bounce.address);
  const display = normalizeAddress(bounce.address);
  const message = bounce.message.slice(0, 1000);
  if (bounce.kind === 'hard') {
    // A hard bounce is the strongest word on an address: it replaces any entry.
    await putRejected(trx, { projectId: bounce.projectId, address, display, state: 'hard_bounce', message, now: bounce.now }, true);
    await clearSoftBounces(trx, bounce.projectId, address);
    return;
  }
  await recordSoftBounce(trx, { ...bounce, address, message }, display);
}

/** `bounce.address` is the key; `display` the spelling a new entry shows. */
async function recordSoftBounce(trx: Tx, bounce: BounceRecord, display: string): Promise<void> {
  const existing = await trx
    .selectFrom('suppressions')
    .select(['status'])
    .where('project_id', '=', bounce.projectId)
    .where('address', '=', bounce.address)
    .executeTakeFirst();
  // Already permanently suppressed: a soft failure adds nothing.
  if (existing?.status === 'rejected') return;

  const stale = bounce.now - SOFT_BOUNCE_WINDOW_MS;
  const tid = bounce.transmissionId ?? null;
  // One statement, so concurrent failures of one address (PostgreSQL) never lose a count.
  const counted = await trx
    .insertInto('soft_bounces')
    .values({
      project_id: bounce.projectId,
      address: bounce.address,
      failures: 1,
      first_failure_at: bounce.now,
      last_failure_at: bounce.now,
      last_transmission_id: tid,
    })
    .onConflict((oc) =>
      oc.columns(['project_id', 'address']).doUpdateSet({
        failures:
          tid === null
            ? sql<number>`case when soft_bounces.first_failure_at <= ${stale} then 1 else soft_bounces.failures + 1 end`
            : sql<number>`case
                when soft_bounces.first_failure_at <= ${stale} then 1
                when soft_bounces.last_transmission_id = ${tid} then soft_bounces.failures
                else soft_bounces.failures + 1 end`,
        first_failure_at: sql<number>`case when soft_bounces.first_failure_at <= ${stale} then ${bounce.now} else soft_bounces.first_failure_at end`,
        last_failure_at: bounce.now,
        last_transmission_id: tid,
      }),
    )
    .returning(['failures'])
    .executeTakeFirstOrThrow();
  if (counted.failures < SOFT_BOUNCE_THRESHOLD) return;

  const blockedUntil = bounce.now + SOFT_BOUNCE_BLOCK_MS;
  await trx
    .insertInto('suppressions')
    .values({
      project_id: bounce.projectId,
      address: bounce.address,
      display_address: display,
      status: 'warning',
      suppression_state: 'soft_bounce',
      blocked_until: blockedUntil,
      message: bounce.message,
      soft_failures: counted.failures,
      created_at: bounce.now,
      updated_at: bounce.now,
    })
    .onConflict((oc) =>
      oc
        .columns(['project_id', 'address'])
        .doUpdateSet({
          blocked_until: blockedUntil,
          message: bounce.message,
          soft_failures: sql<number>`suppressions.soft_failures + ${counted.failures}`,
          updated_at: bounce.now,
        })
        .where('suppressions.status', '=', 'warning'),
    )
    .execute();
  // The count starts again: another THRESHOLD failures after the block renew it.
  await clearSoftBounces(trx, bounce.projectId, bounce.address);
}

/**
 * Records a recipient's spam complaint (inside the caller's transaction): the address is
 * `rejected` / `complaint` from now on. An address already `rejected` keeps its entry (a hard
 * bounce or a manual entry says as much); a `warning` becomes the complaint.
 */
export async function recordComplaint(trx: Tx, complaint: { projectId: number; address: string; message: string; now: number }): Promise<void> {
  const address = suppressionKey(complaint.address);
  const display = normalizeAddress(complaint.address);
  await putRejected(trx, { projectId: complaint.projectId, address, display, state: 'complaint', message: complaint.message.slice(0, 1000), now: complaint.now }, false);
  await clearSoftBounces(trx, complaint.projectId, address);
}

/**
 * Puts an address (its key, and the spelling a new entry shows) on the list as `rejected` with
 * `state` (hard_bounce, complaint, manual). An entry already there becomes this one if it is a
 * `warning`, or whatever it is when `replacesRejected`; it keeps the spelling it was stored with.
 */
async function putRejected(
  trx: Tx,
  entry: { projectId: number; address: string; display: string; state: string; message: string | null; now: number },
  replacesRejected: boolean,
): Promise<void> {
  const update = { status: 'rejected', suppression_state: entry.state, blocked_until: null, message: entry.message, updated_at: entry.now };
  await trx
    .insertInto('suppressions')
    .values({
      project_id: entry.projectId,
      address: entry.address,
      display_address: entry.display,
      status: 'rejected',
      suppression_state: entry.state,
      blocked_until: null,
      message: entry.message,
      soft_failures: 0,
      created_at: entry.now,
      updated_at: entry.now,
    })
    .onConflict((oc) => {
      const set = oc.columns(['project_id', 'address']).doUpdateSet(update);
      return replacesRejected ? set : set.where('suppressions.status', '<>', 'rejected');
    })
    .execute();
}

/** Forgets the soft failures counted for an address (after a delivery succeeds, or a removal). */
export async function clearSoftBounces(trx: Tx, projectId: number, address: string): Promise<void> {
  await trx.deleteFrom('soft_bounces').where('project_id', '=', projectId).where('address', '=', suppressionKey(address)).execute();
}

/** The project's whole list, oldest first (get_suppression_list). */
export async function listSuppressions(db: Tx, projectId: number): Promise<Suppression[]> {
  return db.selectFrom('suppressions').selectAll().where('project_id', '=', projectId).orderBy('id').execute();
}

export async function findSuppressions(db: Tx, projectId: number, addresses: readonly string[]): Promise<Suppression[]> {
  if (addresses.length === 0) return [];
  return db
    .selectFrom('suppressions')
    .selectAll()
    .where('project_id', '=', projectId)
    .where('address', 'in', addresses.map(suppressionKey))
    .orderBy('id')
    .execute();
}

/**
 * Puts addresses on the list by hand (`rejected`, `manual`). An address already `rejected` keeps
 * its entry (a hard bounce stays a hard bounce); a `warning` becomes a permanent manual entry.
 */
export async function addManualSuppressions(trx: Tx, projectId: number, addresses: readonly string[], message: string | null, now: number): Promise<void> {
  for (const address of addresses) {
    await putRejected(trx, { projectId, address: suppressionKey(address), display: normalizeAddress(address), state: 'manual', message, now }, false);
  }
}

/** Removes entries (and their soft-failure counts); returns the keys (suppressionKey) of those removed. */
export async function removeSuppressions(trx: Tx, projectId: number, addresses: readonly string[]): Promise<string[]> {
  if (addresses.length === 0) return [];
  const normalized = addresses.map(suppressionKey);
  const removed = await trx
    .deleteFrom('suppressions')
    .where('project_id', '=', projectId)
    .where('address', 'in', normalized)
    .returning(['address'])
    .execute();
  await trx.deleteFrom('soft_bounces').where('project_id', '=', projectId).where('address', 'in', normalized).execute();
  return removed.map((r) => r.address);
}

// The outbound request queue (webhooks and postbacks) and its attempts. A request is claimed with
// one UPDATE ... RETURNING that sets the lease: while claimed, next_attempt_at is the lease expiry,
// so a crashed dispatcher's rows simply become due again. Finishes are guarded by the lease.
// Requests whose holders died twice in a row (holder_deaths >= 2, domain/holder-deaths.ts) are
// never claimed with others: claimDueOutbound with `suspects` takes one, by its own partial index.
import { sql, type Compilable } from 'kysely';
import type { OutboundAttempt, OutboundRequest, OutboundRequestsTable } from './outbound-schema.ts';
import type { Insertable } from 'kysely';
import { claimsByFunction, skippingLocked } from './dialect.ts';
import type { Tx } from './store.ts';

export type NewOutboundRow = Omit<Insertable<OutboundRequestsTable>, 'id'>;

/** A webhook request due now: for an event row (fan-out) or a test event (eventId null). */
export function webhookRequestRow(r: {
  accountId: number;
  projectId: number | null;
  webhookId: number;
  url: string;
  /** the events row, null for a test event */
  eventId: number | null;
  /** the id receivers de-duplicate on (X-Posthorn-Event-Id) */
  eventKey: string;
  eventType: string;
  body: string;
  /** the transmission whose variables the dispatcher adds to `body` (outbound-schema.ts), or null */
  variablesOf?: number | null;
  now: number;
}): NewOutboundRow {
  return {
    account_id: r.accountId,
    project_id: r.projectId,
    kind: 'webhook',
    webhook_id: r.webhookId,
    event_id: r.eventId,
    event_type: r.eventType,
    url: r.url,
    headers: JSON.stringify({ 'x-posthorn-event-id': r.eventKey, 'x-posthorn-event': r.eventType }),
    ref: null,
    state: 'pending',
    attempts: 0,
    next_attempt_at: r.now,
    created_at: r.now,
    updated_at: r.now,
    variables_of: r.variablesOf ?? null,
    body: r.body,
  };
}

export async function insertOutbound(db: Tx, row: NewOutboundRow): Promise<number> {
  const inserted = await db.insertInto('outbound_requests').values(row).returning('id').executeTakeFirstOrThrow();
  return Number(inserted.id);
}

export async function insertOutboundMany(db: Tx, rows: NewOutboundRow[]): Promise<void> {
  // Bounded chunks keep each statement under SQLite's bound-parameter limit.
  for (let i = 0; i < rows.length; i += 200) {
    await db.insertInto('outbound_requests').values(rows.slice(i, i + 200)).execute();
  }
}

export interface OutboundClaimOptions {
  worker: string;
  now: number;
  leaseUntil: number;
  limit: number;
  /** only requests whose holders died twice in a row (the caller asks for one) */
  suspects?: boolean;
}

/**
 * Claims up to `limit` due pending requests for `worker` until `leaseUntil`: those whose holders
 * died less than twice in a row, or with `suspects` only the others (the caller asks for one).
 */
export async function claimDueOutbound(db: Tx, opts: OutboundClaimOptions): Promise<OutboundRequest[]> {
  const { rows } = await db.executeQuery(outboundClaimQuery(db, opts).compile());
  return rows.map(normalise);
}

/** The claim statement claimDueOutbound runs (exported for the plan's test). */
export function outboundClaimQuery(db: Tx, opts: OutboundClaimOptions): Compilable<OutboundRequest> {
  if (!opts.suspects && claimsByFunction(db)) {
    // PostgreSQL: the same claim by migration 320's function, whose one plan walks the due index.
    return db
      .selectFrom(sql<OutboundRequest>`posthorn_claim_outbound_requests(${opts.now}, ${opts.limit}, ${opts.worker}, ${opts.leaseUntil})`.as('claimed'))
      .selectAll();
  }
  // The due rows are picked once, in a MATERIALIZED CTE: as a plain `IN (subquery)` PostgreSQL may
  // run the subquery again per row (a SubPlan), see the rows this very UPDATE already moved out of
  // the due range, and claim past the LIMIT (seen: 40 claimed for a limit of 32).
  return db
    .with(
      (cte) => cte('due').materialized(),
      (qb) => {
        const due = qb
          .selectFrom('outbound_requests')
          .select('id')
          .where('state', '=', 'pending')
          // A literal, as the partial index outbound_requests_suspect says it (2 is SUSPECT_AFTER_DEATHS).
          .where(sql.raw<boolean>(opts.suspects ? 'holder_deaths >= 2' : 'holder_deaths < 2'))
          .where('next_attempt_at', '<=', opts.now)
          .orderBy('next_attempt_at')
          .orderBy('id')
          .limit(opts.limit);
        return skippingLocked(due, db);
      },
    )
    .updateTable('outbound_requests')
    .set({
      locked_by: opts.worker,
      locked_until: opts.leaseUntil,
      next_attempt_at: opts.leaseUntil,
      attempts: sql`attempts + 1`,
      updated_at: opts.now,
    })
    .where('id', 'in', (eb) => eb.selectFrom('due').select('due.id'))
    .where('state', '=', 'pending')
    .returningAll();
}

/**
 * Extends the leases `worker` holds on pending requests (the runner renews while they are posted);
 * answers the ids extended: those `worker` still holds (the lease runner's fence).
 */
export async function renewOutboundLeases(db: Tx, worker: string, ids: readonly number[], leaseUntil: number): Promise<number[]> {
  if (ids.length === 0) return [];
  const rows = await db
    .updateTable('outbound_requests')
    .set({ locked_until: leaseUntil, next_attempt_at: leaseUntil })
    .where('id', 'in', ids)
    .where('locked_by', '=', worker)
    .where('state', '=', 'pending')
    .returning('id')
    .execute();
  return rows.map((r) => Number(r.id));
}

/**
 * Gives back requests still held at a graceful stop: due at once, unlocked. The attempt the claim
 * charged stays charged (the request may have gone out).
 */
export async function releaseOutbound(db: Tx, worker: string, ids: readonly number[], now: number): Promise<number> {
  if (ids.length === 0) return 0;
  const result = await db
    .updateTable('outbound_requests')
    .set({ locked_by: null, locked_until: null, next_attempt_at: now, updated_at: now })
    .where('id', 'in', ids)
    .where('locked_by', '=', worker)
    .where('state', '=', 'pending')
    .executeTakeFirst();
  return Number(result.numUpdatedRows);
}

/** The ids of the pending requests `worker` holds (LeaseJob.heldBy). */
export async function outboundHeldBy(db: Tx, worker: string): Promise<number[]> {
  const rows = await db.selectFrom('outbound_requests').select('id').where('state', '=', 'pending').where('locked_by', '=', worker).execute();
  return rows.map((r) => Number(r.id));
}

export interface OutboundFinish {
  id: number;
  worker: string;
  now: number;
  state: 'pending' | 'delivered' | 'failed';
  nextAttemptAt: number;
  statusCode: number | null;
  error: string | null;
  /** where the attempt went (the endpoint's or mailbox's current URL) */
  url: string;
}

/** Records the outcome under the lease; false when the lease was lost (another worker has it). */
export async function finishOutbound(db: Tx, f: OutboundFinish): Promise<boolean> {
  const result = await db
    .updateTable('outbound_requests')
    .set({
      state: f.state,
      next_attempt_at: f.nextAttemptAt,
      locked_by: null,
      locked_until: null,
      // An attempt recorded: a process worked the request and lived.
      holder_deaths: 0,
      last_status_code: f.statusCode,
      last_error: f.error,
      url: f.url,
      updated_at: f.now,
      // A delivered postback's body is the raw email, still on the IMAP server: not kept twice.
      ...(f.state === 'delivered' ? { delivered_at: f.now, body: sql<string>`case when kind = 'postback' then '' else body end` } : {}),
      ...(f.state === 'failed' ? { failed_at: f.now } : {}),
    })
    .where('id', '=', f.id)
    .where('locked_by', '=', f.worker)
    .where('state', '=', 'pending')
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

export interface DestinationHold {
  accountId: number;
  /** the endpoint, for webhook requests */
  webhookId: number | null;
  /** the URL, for postbacks (webhookId null) */
  url: string | null;
  until: number;
  now: number;
}

/** Moves the destination's unclaimed due requests to `until` (not charged an attempt). */
export async function holdBackDestination(db: Tx, hold: DestinationHold): Promise<void> {
  let q = db
    .updateTable('outbound_requests')
    .set({ next_attempt_at: hold.until, updated_at: hold.now })
    .where('account_id', '=', hold.accountId)
    .where('state', '=', 'pending')
    .where('locked_by', 'is', null)
    .where('next_attempt_at', '<', hold.until);
  if (hold.webhookId !== null) q = q.where('webhook_id', '=', hold.webhookId);
  else if (hold.url !== null) q = q.where('webhook_id', 'is', null).where('url', '=', hold.url);
  else return;
  await q.execute();
}

/** Whether some pending request is due at `now`. */
export async function hasDueOutbound(db: Tx, now: number): Promise<boolean> {
  const rows = await db.selectFrom('outbound_requests').select('id').where('state', '=', 'pending').where('next_attempt_at', '<=', now).limit(1).execute();
  return rows.length > 0;
}

export async function insertOutboundAttempt(db: Tx, row: Omit<OutboundAttempt, 'id'>): Promise<void> {
  await db.insertInto('outbound_attempts').values(row).execute();
}

export async function findOutboundStates(db: Tx, ids: readonly number[]): Promise<Array<{ id: number; state: string }>> {
  const out: Array<{ id: number; state: string }> = [];
  for (let i = 0; i < ids.length; i += 500) {
    const rows = await db.selectFrom('outbound_requests').select(['id', 'state']).where('id', 'in', ids.slice(i, i + 500)).execute();
    for (const r of rows) out.push({ id: Number(r.id), state: r.state });
  }
  return out;
}

export interface OutboundListing {
  accountId: number;
  webhookId?: number;
  kind?: string;
  state?: string;
  /** rows with id below this (paging backwards from the newest) */
  beforeId?: number;
  limit: number;
}

export async function listOutbound(db: Tx, q: OutboundListing): Promise<OutboundRequest[]> {
  let query = db.selectFrom('outbound_requests').selectAll().where('account_id', '=', q.accountId);
  if (q.webhookId !== undefined) query = query.where('webhook_id', '=', q.webhookId);
  if (q.kind !== undefined) query = query.where('kind', '=', q.kind);
  if (q.state !== undefined) query = query.where('state', '=', q.state);
  if (q.beforeId !== undefined) query = query.where('id', '<', q.beforeId);
  const rows = await query.orderBy('id', 'desc').limit(q.limit).execute();
  return rows.map(normalise);
}

export async function listOutboundAttempts(db: Tx, requestIds: readonly number[]): Promise<OutboundAttempt[]> {
  if (requestIds.length === 0) return [];
  const rows = await db.selectFrom('outbound_attempts').selectAll().where('request_id', 'in', requestIds).orderBy('id').execute();
  return rows.map((r) => ({ ...r, id: Number(r.id), request_id: Number(r.request_id), started_at: Number(r.started_at) }));
}

/**
 * Deletes finished requests (and their attempts) that ended before the given times, at most
 * `limit` per call so each transaction stays short; returns how many went.
 */
export async function pruneOutbound(db: Tx, opts: { deliveredBefore: number; failedBefore: number; limit: number }): Promise<number> {
  const old = await db
    .selectFrom('outbound_requests')
    .select('id')
    .where((eb) =>
      eb.or([
        eb.and([eb('state', '=', 'delivered'), eb('delivered_at', '<', opts.deliveredBefore)]),
        eb.and([eb('state', '=', 'failed'), eb('failed_at', '<', opts.failedBefore)]),
      ]),
    )
    .limit(opts.limit)
    .execute();
  const ids = old.map((r) => Number(r.id));
  if (ids.length === 0) return 0;
  await db.deleteFrom('outbound_attempts').where('request_id', 'in', ids).execute();
  await db.deleteFrom('outbound_requests').where('id', 'in', ids).execute();
  return ids.length;
}

/** Puts the account's failed requests among `ids` back in the queue (an operator's or user's "retry now"); returns the ids requeued. */
export async function requeueFailedOutbound(db: Tx, accountId: number, ids: readonly number[], now: number): Promise<number[]> {
  if (ids.length === 0) return [];
  const rows = await db
    .updateTable('outbound_requests')
    .set({ state: 'pending', next_attempt_at: now, attempts: 0, holder_deaths: 0, created_at: now, failed_at: null, updated_at: now })
    .where('account_id', '=', accountId)
    .where('state', '=', 'failed')
    .where('id', 'in', ids)
    .returning('id')
    .execute();
  return rows.map((r) => Number(r.id));
}

// PostgreSQL's bigint columns come back as strings from pg unless parsed; make ids and times numbers.
function normalise(r: OutboundRequest): OutboundRequest {
  return {
    ...r,
    id: Number(r.id),
    account_id: Number(r.account_id),
    project_id: r.project_id === null ? null : Number(r.project_id),
    webhook_id: r.webhook_id === null ? null : Number(r.webhook_id),
    event_id: r.event_id === null ? null : Number(r.event_id),
    next_attempt_at: Number(r.next_attempt_at),
    holder_deaths: Number(r.holder_deaths),
    created_at: Number(r.created_at),
    updated_at: Number(r.updated_at),
    delivered_at: r.delivered_at === null ? null : Number(r.delivered_at),
    failed_at: r.failed_at === null ? null : Number(r.failed_at),
    variables_of: r.variables_of === null || r.variables_of === undefined ? null : Number(r.variables_of),
  };
}

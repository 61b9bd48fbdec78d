// Webhook endpoints, and the fan-out's claim on the events outbox.
import type { Insertable, Updateable } from 'kysely';
import type { Webhook, WebhooksTable } from './outbound-schema.ts';
import { skippingLocked } from './dialect.ts';
import type { Tx } from './store.ts';
import { insertedOrDuplicate, type Duplicate } from './duplicates.ts';

/** The new row, or `{ duplicate: true }` when its unique key is taken (storage/duplicates.ts). */
export async function insertWebhook(db: Tx, row: Omit<Insertable<WebhooksTable>, 'id'>): Promise<Webhook | Duplicate> {
  return insertedOrDuplicate(db.insertInto('webhooks').values(row).returningAll().executeTakeFirstOrThrow());
}

export async function findWebhookByUid(db: Tx, accountId: number, uid: string): Promise<Webhook | undefined> {
  return db.selectFrom('webhooks').selectAll().where('account_id', '=', accountId).where('uid', '=', uid).executeTakeFirst();
}

export async function countWebhooks(db: Tx, accountId: number): Promise<number> {
  const row = await db
    .selectFrom('webhooks')
    .select((eb) => eb.fn.countAll<number | string>().as('n'))
    .where('account_id', '=', accountId)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

export async function findWebhooksByIds(db: Tx, ids: readonly number[]): Promise<Webhook[]> {
  if (ids.length === 0) return [];
  return db.selectFrom('webhooks').selectAll().where('id', 'in', ids).execute();
}

export async function listWebhooks(db: Tx, accountId: number): Promise<Webhook[]> {
  return db.selectFrom('webhooks').selectAll().where('account_id', '=', accountId).orderBy('id').execute();
}

export async function updateWebhook(
  db: Tx,
  id: number,
  patch: Omit<Updateable<WebhooksTable>, 'id' | 'account_id' | 'uid' | 'created_at'> & { updated_at: number },
): Promise<Webhook | undefined> {
  return db.updateTable('webhooks').set(patch).where('id', '=', id).returningAll().executeTakeFirst();
}

export async function deleteWebhook(db: Tx, id: number): Promise<void> {
  await db.deleteFrom('webhooks').where('id', '=', id).execute();
}

/** Active endpoints of the given accounts: the fan-out's routing table for one batch of events. */
export async function listActiveWebhooksOf(db: Tx, accountIds: readonly number[]): Promise<Webhook[]> {
  if (accountIds.length === 0) return [];
  return db.selectFrom('webhooks').selectAll().where('account_id', 'in', accountIds).where('status', '=', 'active').execute();
}

export interface ClaimedEvent {
  id: number;
  account_id: number;
  project_id: number | null;
  type: string;
  payload: string;
  created_at: number;
}

/**
 * Stamps up to `limit` not-yet-dispatched events (oldest first) and returns them: one statement, so
 * with the outbound inserts in the same transaction an event is fanned out exactly once.
 */
export async function claimUndispatchedEvents(db: Tx, opts: { now: number; limit: number }): Promise<ClaimedEvent[]> {
  // Picked once (MATERIALIZED): see claimDueOutbound in storage/outbound.ts for why.
  const rows = await db
    .with(
      (cte) => cte('batch').materialized(),
      (qb) => {
        let pending = qb.selectFrom('events').select('id').where('dispatched_at', 'is', null).orderBy('id').limit(opts.limit);
        return skippingLocked(pending, db);
      },
    )
    .updateTable('events')
    .set({ dispatched_at: opts.now })
    .where('id', 'in', (eb) => eb.selectFrom('batch').select('batch.id'))
    .where('dispatched_at', 'is', null)
    .returning(['id', 'account_id', 'project_id', 'type', 'payload', 'created_at'])
    .execute();
  return rows
    .map((r) => ({
      id: Number(r.id),
      account_id: Number(r.account_id),
      project_id: r.project_id === null ? null : Number(r.project_id),
      type: r.type,
      payload: r.payload,
      created_at: Number(r.created_at),
    }))
    .sort((a, b) => a.id - b.id);
}

export async function findProjectUids(db: Tx, ids: readonly number[]): Promise<Map<number, string>> {
  if (ids.length === 0) return new Map();
  const rows = await db.selectFrom('projects').select(['id', 'uid']).where('id', 'in', ids).execute();
  return new Map(rows.map((r) => [Number(r.id), r.uid]));
}

/**
 * The transmissions whose variables webhook requests carry (outbound_requests.variables_of): each
 * one's own variables (JSON) and its message. A transmission purged since is not among them.
 */
export async function findVariablesOfTransmissions(db: Tx, ids: readonly number[]): Promise<Array<{ id: number; message_id: number; variables: string | null }>> {
  if (ids.length === 0) return [];
  const rows = await db.selectFrom('transmissions').select(['id', 'message_id', 'variables']).where('id', 'in', ids).execute();
  return rows.map((r) => ({ id: Number(r.id), message_id: Number(r.message_id), variables: r.variables }));
}

/** Messages' accepted payloads (JSON), by id: read for their global variables. */
export async function findMessagePayloads(db: Tx, ids: readonly number[]): Promise<Map<number, string>> {
  if (ids.length === 0) return new Map();
  const rows = await db.selectFrom('messages').select(['id', 'payload']).where('id', 'in', ids).execute();
  return new Map(rows.map((r) => [Number(r.id), r.payload]));
}

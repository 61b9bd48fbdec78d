// The deletes of the retention purge (operations/retention.ts), one bounded batch per call so each
// transaction stays short: the caller commits each batch on its own and yields between batches,
// so ingest and delivery writes interleave with the purge instead of waiting behind it.
//
// What is never deleted, whatever its age:
// - a message with a transmission still live (queued or retry): it is purged once it is final;
// - a message one of whose transmissions a pending webhook request takes its variables from
//   (outbound_requests.variables_of, migration 300): it is purged once the request is settled;
// - an event not yet fanned out to webhooks (dispatched_at null);
// - an outbound request still pending, and a postback that an inbound email row refers to (that
//   row is what keeps the email from being posted twice, docs/mailboxes.md).
import { sql } from 'kysely';
import type { Tx } from './store.ts';

export interface PurgeScope {
  /** the project whose rows are purged; null: rows of no project (account webhooks, postbacks) */
  projectId: number | null;
  /** rows created before this instant (epoch ms) are due */
  cutoff: number;
  /** most parent rows one call deletes */
  limit: number;
}

export interface PurgedCounts {
  messages: number;
  transmissions: number;
  attempts: number;
  events: number;
  outbound_requests: number;
  outbound_attempts: number;
}

export function emptyPurgedCounts(): PurgedCounts {
  return { messages: 0, transmissions: 0, attempts: 0, events: 0, outbound_requests: 0, outbound_attempts: 0 };
}

function deletedRows(result: { numDeletedRows: bigint }): number {
  return Number(result.numDeletedRows);
}

/** Deletes up to `limit` due messages with their transmissions and attempts; returns what it deleted. */
export async function purgeMessagesBatch(trx: Tx, scope: PurgeScope & { projectId: number }): Promise<PurgedCounts> {
  const out = emptyPurgedCounts();
  const rows = await trx
    .selectFrom('messages')
    .select('id')
    .where('project_id', '=', scope.projectId)
    .where('created_at', '<', scope.cutoff)
    // A scheduled message's retention counts from its send_at (never before acceptance): the range
    // on created_at still walks messages_project_created; send_at only filters what it finds.
    .where((eb) => eb.or([eb('send_at', 'is', null), eb('send_at', '<', scope.cutoff)]))
    .where((eb) =>
      eb.not(
        eb.exists(
          eb
            .selectFrom('transmissions')
            .select(sql`1`.as('live'))
            .whereRef('transmissions.message_id', '=', 'messages.id')
            .where(sql<boolean>`status in ('queued', 'retry')`),
        ),
      ),
    )
    .where((eb) =>
      eb.not(
        eb.exists(
          // outbound_requests_variables (migration 300) holds exactly these requests: the literal
          // predicate lets SQLite use the partial index.
          eb
            .selectFrom('transmissions as t')
            .innerJoin('outbound_requests as o', 'o.variables_of', 't.id')
            .select(sql`1`.as('waiting'))
            .whereRef('t.message_id', '=', 'messages.id')
            .where(sql<boolean>`o.state = 'pending' and o.variables_of is not null`),
        ),
      ),
    )
    .orderBy('created_at')
    .limit(scope.limit)
    .execute();
  if (rows.length === 0) return out;
  const ids = rows.map((r) => r.id);
  out.attempts = deletedRows(
    await trx
      .deleteFrom('attempts')
      .where('transmission_id', 'in', (eb) => eb.selectFrom('transmissions').select('id').where('message_id', 'in', ids))
      .executeTakeFirst(),
  );
  out.transmissions = deletedRows(await trx.deleteFrom('transmissions').where('message_id', 'in', ids).executeTakeFirst());
  out.messages = deletedRows(await trx.deleteFrom('messages').where('id', 'in', ids).executeTakeFirst());
  return out;
}

/** Deletes up to `limit` due events that were fanned out. */
export async function purgeEventsBatch(trx: Tx, scope: PurgeScope): Promise<number> {
  const due = trx
    .selectFrom('events')
    .select('id')
    .where('project_id', scope.projectId === null ? 'is' : '=', scope.projectId)
    .where('created_at', '<', scope.cutoff)
    .where('dispatched_at', 'is not', null)
    .limit(scope.limit);
  const ids = (await due.execute()).map((r) => r.id);
  if (ids.length === 0) return 0;
  return deletedRows(await trx.deleteFrom('events').where('id', 'in', ids).executeTakeFirst());
}

/** Deletes up to `limit` due outbound requests that are finished, with their attempts. */
export async function purgeOutboundBatch(trx: Tx, scope: PurgeScope): Promise<{ requests: number; attempts: number }> {
  const rows = await trx
    .selectFrom('outbound_requests')
    .select('id')
    .where('project_id', scope.projectId === null ? 'is' : '=', scope.projectId)
    .where('created_at', '<', scope.cutoff)
    .where('state', '<>', 'pending')
    .where((eb) => eb.not(eb.exists(eb.selectFrom('inbound_emails').select(sql`1`.as('kept')).whereRef('inbound_emails.outbound_id', '=', 'outbound_requests.id'))))
    .orderBy('created_at')
    .limit(scope.limit)
    .execute();
  if (rows.length === 0) return { requests: 0, attempts: 0 };
  const ids = rows.map((r) => r.id);
  const attempts = deletedRows(await trx.deleteFrom('outbound_attempts').where('request_id', 'in', ids).executeTakeFirst());
  const requests = deletedRows(await trx.deleteFrom('outbound_requests').where('id', 'in', ids).executeTakeFirst());
  return { requests, attempts };
}

/** Every project's id and settings (the purge reads each one's retention). */
export async function listProjectRetentionRows(db: Tx): Promise<Array<{ id: number; settings: string }>> {
  return db.selectFrom('projects').select(['id', 'settings']).orderBy('id').execute();
}

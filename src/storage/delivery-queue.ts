// The transmissions table as a delivery queue: claim due rows under a lease in one statement,
// finish them under that lease. graphile-worker's shape (getJobs / completeJobs / failJobs).
//
// Invariants:
// - A claim is ONE statement, `WITH due AS MATERIALIZED (SELECT ... LIMIT n) UPDATE ... WHERE id
//   IN due RETURNING`: two workers can never both hold a row (SQLite serialises writers; PostgreSQL adds FOR UPDATE SKIP LOCKED so
//   concurrent claimers pass over each other's rows instead of waiting). On PostgreSQL the same
//   claim runs in posthorn_claim_transmissions (migration 320), planned to walk the due index:
//   a claim costs about the rows it takes, not the length of the queue, whatever the statistics.
// - Claiming also moves next_attempt_at to the lease's end. The due index is ordered by
//   next_attempt_at, so rows in flight leave the front of the index (claims never rescan them),
//   and a row whose worker died is due again exactly when its lease expires.
// - A finish changes the row only `WHERE id = ? AND locked_by = me`; zero rows means the lease was
//   lost (it expired and someone else claimed the row) and the caller records nothing. A recorded
//   finish sets holder_deaths back to 0: a process worked the row and lived.
// - Rows whose holders died twice in a row (holder_deaths >= 2, domain/holder-deaths.ts) are never
//   claimed with others: claimSuspectTransmission takes one, by its own partial index.
import { CompiledQuery, sql } from 'kysely';
import type { Transmission } from './schema.ts';
import { claimsByFunction, preparedOnServer, skippingLocked, takesArrayParameters } from './dialect.ts';
import { CompiledInsert } from './compiled-insert.ts';
import { CompiledStatement, padToPowerOfTwo } from './compiled-statement.ts';
import type { Tx } from './store.ts';

/** The columns a claim returns (its RETURNING list). */
export type ClaimedTransmission = Pick<
  Transmission,
  'id' | 'message_id' | 'project_id' | 'recipient' | 'recipient_name' | 'variables' | 'status' | 'attempts' | 'created_at' | 'holder_deaths'
>;

export interface ClaimOptions {
  worker: string;
  now: number;
  leaseMs: number;
  limit: number;
}

export async function claimDueTransmissions(trx: Tx, opts: ClaimOptions): Promise<ClaimedTransmission[]> {
  const query = claimQuery(trx, opts);
  // The text is the same for every claim (the limit is a parameter): planned once per connection.
  preparedOnServer(query.sql);
  const { rows } = await trx.executeQuery(query);
  // RETURNING order is unspecified: deliver oldest first anyway.
  return rows.sort((a, b) => a.id - b.id);
}

/** The claim statement claimDueTransmissions runs (exported for the plan's test). */
export function claimQuery(trx: Tx, opts: ClaimOptions): CompiledQuery<ClaimedTransmission> {
  return CLAIM.with(trx, { now: opts.now, limit: opts.limit, worker: opts.worker, leaseEnd: opts.now + opts.leaseMs });
}

/**
 * Claims the first due suspect (a row whose holders died twice in a row), alone: the caller works
 * it with no other suspect (domain/holder-deaths.ts). Nothing when none is due.
 */
export async function claimSuspectTransmission(trx: Tx, opts: Omit<ClaimOptions, 'limit'>): Promise<ClaimedTransmission[]> {
  const { rows } = await trx.executeQuery(CLAIM_SUSPECT.with(trx, { now: opts.now, limit: 1, worker: opts.worker, leaseEnd: opts.now + opts.leaseMs }));
  return rows;
}

// The status test is a literal (not bound parameters) so the planner can match it against the
// partial index transmissions_due, whose WHERE is the same text; the holder_deaths tests are
// literals for the same reason (2 is SUSPECT_AFTER_DEATHS, in migration 260's transmissions_suspect).
// The due rows are picked once, in a MATERIALIZED CTE: as a plain `IN (subquery)` PostgreSQL
// may run the subquery again per row (a SubPlan), see the rows this very UPDATE already moved out
// of the due range, and claim past the LIMIT.
const CLAIMED_COLUMNS = ['id', 'message_id', 'project_id', 'recipient', 'recipient_name', 'variables', 'status', 'attempts', 'created_at', 'holder_deaths'] as const;
const claimStatement = (suspects: boolean) =>
  new CompiledStatement<'now' | 'limit' | 'worker' | 'leaseEnd', ClaimedTransmission>((trx, value) => {
    if (!suspects && claimsByFunction(trx)) {
      // PostgreSQL: the same claim by migration 320's function, whose one plan walks the due index.
      return trx
        .selectFrom(sql<Transmission>`posthorn_claim_transmissions(${value('now')}, ${value('limit')}, ${value('worker')}, ${value('leaseEnd')})`.as('claimed'))
        .select(CLAIMED_COLUMNS);
    }
    return trx
      .with(
        (cte) => cte('due').materialized(),
        (qb) => {
          const due = qb
            .selectFrom('transmissions')
            .select('id')
            .where(sql.raw<boolean>(suspects ? 'holder_deaths >= 2' : 'holder_deaths < 2'))
            .where(sql<boolean>`status in ('queued', 'retry')`)
            .where('next_attempt_at', '<=', value('now'))
            // A lease holds until locked_until, exclusive: at that instant the row is due again.
            .where((eb) => eb.or([eb('locked_until', 'is', null), eb('locked_until', '<=', value('now'))]))
            .orderBy('next_attempt_at')
            .orderBy('id')
            .limit(value('limit'));
          return skippingLocked(due, trx);
        },
      )
      .updateTable('transmissions')
      .set({ locked_by: value('worker'), locked_until: value('leaseEnd'), next_attempt_at: value('leaseEnd') })
      .where('id', 'in', (eb) => eb.selectFrom('due').select('due.id'))
      .returning(CLAIMED_COLUMNS);
  });
const CLAIM = claimStatement(false);
const CLAIM_SUSPECT = claimStatement(true);

export type FinishState =
  | { status: 'completed'; at: number }
  | { status: 'failed'; at: number }
  | { status: 'retry'; nextAttemptAt: number };

export interface FinishInput {
  id: number;
  worker: string;
  now: number;
  state: FinishState;
  resultCode: string;
  resultMessage: string;
  /** the attempt row */
  attempt: {
    startedAt: number;
    durationMs: number;
    mxHost: string | null;
    outcome: 'sent' | 'deferred' | 'failed';
    /** whether the SMTP session used TLS; null when unknown (no session) */
    tls?: boolean | null;
  };
}

/**
 * Writes the outcome of one attempt under the lease: the transmission's new state and its attempt
 * row. Returns the new attempt count, or null when the lease was lost (nothing written).
 */
export async function finishTransmission(trx: Tx, input: FinishInput): Promise<number | null> {
  const attempts = await updateUnderLease(trx, input);
  if (attempts === null) return null;
  await INSERT_ATTEMPTS.execute(trx, [attemptRow(input)]);
  return attempts;
}

/** The transmission's new state, only while `input.worker` holds the lease: the new attempt count, or null. */
async function updateUnderLease(trx: Tx, input: FinishInput): Promise<number | null> {
  const result = await trx.executeQuery(
    FINISH_BY_STATUS[input.state.status].with(trx, {
      id: input.id,
      worker: input.worker,
      now: input.now,
      code: input.resultCode,
      message: input.resultMessage,
      at: input.state.status === 'retry' ? input.state.nextAttemptAt : input.state.at,
    }),
  );
  const row = result.rows[0];
  return row ? Number(row.attempts) : null;
}

// The finish UPDATE runs once per delivered message: built and compiled once per status
// (storage/compiled-statement.ts).
const finishStatement = (status: FinishState['status']) =>
  new CompiledStatement<'id' | 'worker' | 'now' | 'code' | 'message' | 'at', { attempts: number }>((trx, value) =>
    trx
      .updateTable('transmissions')
      .set((eb) => ({
        status,
        attempts: eb('attempts', '+', 1),
        holder_deaths: 0,
        locked_by: null,
        locked_until: null,
        updated_at: value('now'),
        result_code: value('code'),
        result_message: value('message'),
        ...(status === 'completed' ? { completed_at: value('at') } : {}),
        ...(status === 'failed' ? { failed_at: value('at') } : {}),
        ...(status === 'retry' ? { next_attempt_at: value('at') } : {}),
      }))
      .where('id', '=', value('id'))
      .where('locked_by', '=', value('worker'))
      .returning('attempts'),
  );
const FINISH_BY_STATUS = { completed: finishStatement('completed'), failed: finishStatement('failed'), retry: finishStatement('retry') };

function attemptRow(input: FinishInput) {
  return {
    transmission_id: input.id,
    started_at: input.attempt.startedAt,
    duration_ms: input.attempt.durationMs,
    mx_host: input.attempt.mxHost,
    outcome: input.attempt.outcome,
    result_code: input.resultCode,
    result_message: input.resultMessage,
    worker: input.worker,
    tls: input.attempt.tls == null ? null : input.attempt.tls ? 1 : 0,
  };
}

/** The attempt rows' INSERT, compiled once per row count (storage/compiled-insert.ts). */
const INSERT_ATTEMPTS = new CompiledInsert('attempts', ['transmission_id', 'started_at', 'duration_ms', 'mx_host', 'outcome', 'result_code', 'result_message', 'worker', 'tls'], null);

/**
 * finishTransmission for many transmissions in one transaction: each row's state under its own
 * lease guard, then the attempt rows of those still held in multi-row INSERTs. Returns, in input
 * order, each one's new attempt count, or null where the lease was lost.
 */
export async function finishTransmissions(trx: Tx, inputs: readonly FinishInput[]): Promise<Array<number | null>> {
  if (inputs.length > 1 && new Set(inputs.map((i) => i.id)).size === inputs.length) return finishAllUnderLeases(trx, inputs);
  const results: Array<number | null> = [];
  const held: FinishInput[] = [];
  for (const input of inputs) {
    const attempts = await updateUnderLease(trx, input);
    results.push(attempts);
    if (attempts !== null) held.push(input);
  }
  await INSERT_ATTEMPTS.execute(trx, held.map(attemptRow));
  return results;
}

/**
 * A batch of finishes: every transmission's new state in ONE `UPDATE ... FROM` the batch's values
 * (PostgreSQL: unnest of arrays; SQLite: json_each of one JSON array), each row still guarded by
 * its own lease (`locked_by` = its worker), then every attempt row (PostgreSQL: one INSERT; SQLite:
 * multi-row INSERTs): two statements for the batch instead of two per finish
 * (docs/decisions/0003-performance.md). The same columns as updateUnderLease: the new status,
 * attempts + 1, the lease cleared, the result; completed_at, failed_at or next_attempt_at from
 * `at` by status, the others kept. The text never changes with the batch's size.
 */
async function finishAllUnderLeases(trx: Tx, inputs: readonly FinishInput[]): Promise<Array<number | null>> {
  const at = (s: FinishState) => (s.status === 'retry' ? s.nextAttemptAt : s.at);
  const arrays = takesArrayParameters(trx);
  const updated = await trx.executeQuery<{ id: number; attempts: number }>(
    arrays
      ? CompiledQuery.raw(FINISH_BATCH_SQL, [
          inputs.map((i) => i.id),
          inputs.map((i) => i.worker),
          inputs.map((i) => i.now),
          inputs.map((i) => i.state.status),
          inputs.map((i) => i.resultCode),
          inputs.map((i) => i.resultMessage),
          inputs.map((i) => at(i.state)),
        ])
      : CompiledQuery.raw(FINISH_BATCH_SQLITE, [
          JSON.stringify(inputs.map((i) => [i.id, i.worker, i.now, i.state.status, i.resultCode, i.resultMessage, at(i.state)])),
        ]),
  );
  const attemptsById = new Map(updated.rows.map((r) => [Number(r.id), Number(r.attempts)]));
  const held = inputs.filter((i) => attemptsById.has(i.id));
  const rows = held.map(attemptRow);
  if (!arrays) await INSERT_ATTEMPTS.execute(trx, rows);
  else if (rows.length > 0) {
    const column = <K extends keyof (typeof rows)[number]>(key: K) => rows.map((r) => r[key] ?? null);
    await trx.executeQuery(
      CompiledQuery.raw(INSERT_ATTEMPTS_SQL, [
        column('transmission_id'), column('started_at'), column('duration_ms'), column('mx_host'), column('outcome'),
        column('result_code'), column('result_message'), column('worker'), column('tls'),
      ]),
    );
  }
  return inputs.map((i) => attemptsById.get(i.id) ?? null);
}

/** A batch's new states, from the rows `f` (id, worker, now, status, code, message, at) of each dialect's FROM. */
const FINISH_BATCH_SET = `UPDATE transmissions AS t SET
  status = f.status,
  attempts = t.attempts + 1,
  holder_deaths = 0,
  locked_by = NULL,
  locked_until = NULL,
  updated_at = f.now,
  result_code = f.code,
  result_message = f.message,
  completed_at = CASE WHEN f.status = 'completed' THEN f.at ELSE t.completed_at END,
  failed_at = CASE WHEN f.status = 'failed' THEN f.at ELSE t.failed_at END,
  next_attempt_at = CASE WHEN f.status = 'retry' THEN f.at ELSE t.next_attempt_at END`;

// Not prepared on the server, unlike the other statements of the delivery loop: a prepared
// statement's generic plan is made once, with the table's size at that moment, and kept. Made
// while transmissions was small (a new deployment, the first minutes of a run), it joined the
// batch to the table by hashing a sequential scan of the whole table, and kept doing so for every
// batch as the table grew, until an ANALYZE replaced it (counted in a 20,000-message run: one
// scan per batch, ~190 rows read per delivered message). Planned at each execution, with the
// batch's real size and the table's, it is the primary key lookup it should be; the planning costs
// its backend tens of µs per batch (test/storage/finish-batch.test.ts grows the table under it).
const FINISH_BATCH_SQL = `${FINISH_BATCH_SET}
FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::bigint[]) AS f(id, worker, now, status, code, message, at)
WHERE t.id = f.id AND t.locked_by = f.worker
RETURNING t.id, t.attempts`;

// SQLite: the batch as one JSON array of [id, worker, now, status, code, message, at]; ->> gives
// each value its SQL type (integers stay integers), and the join looks each row up by its id.
// RETURNING names the updated table's columns only (SQLite's rule for UPDATE ... FROM).
const FINISH_BATCH_SQLITE = `${FINISH_BATCH_SET}
FROM (SELECT value ->> 0 AS id, value ->> 1 AS worker, value ->> 2 AS now, value ->> 3 AS status, value ->> 4 AS code, value ->> 5 AS message, value ->> 6 AS at FROM json_each(?)) AS f
WHERE t.id = f.id AND t.locked_by = f.worker
RETURNING id, attempts`;

const INSERT_ATTEMPTS_SQL = preparedOnServer(`INSERT INTO attempts (transmission_id, started_at, duration_ms, mx_host, outcome, result_code, result_message, worker, tls)
SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::integer[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::integer[])`);

/**
 * Extends the leases this worker still holds (a slow SMTP conversation must not outlive its lease:
 * another worker would send the same message meanwhile). `ids` is padded to a power of two so
 * the statement keeps a few shapes. Returns the ids extended: those this worker still holds.
 */
export async function renewLeases(trx: Tx, worker: string, ids: readonly number[], now: number, leaseMs: number): Promise<number[]> {
  if (ids.length === 0) return [];
  const rows = await trx
    .updateTable('transmissions')
    .set({ locked_until: now + leaseMs, next_attempt_at: now + leaseMs })
    .where('id', 'in', padToPowerOfTwo(ids))
    .where('locked_by', '=', worker)
    .returning('id')
    .execute();
  return rows.map((r) => Number(r.id));
}

/**
 * Gives claimed rows back (graceful stop with work still in flight): due at once, unlocked, so the
 * next process takes them without waiting for the lease. Only rows this worker still holds.
 */
export async function releaseTransmissions(trx: Tx, worker: string, ids: readonly number[], now: number): Promise<number> {
  if (ids.length === 0) return 0;
  const result = await trx
    .updateTable('transmissions')
    .set({ locked_by: null, locked_until: null, next_attempt_at: now })
    .where('id', 'in', ids)
    .where('locked_by', '=', worker)
    .executeTakeFirst();
  return Number(result.numUpdatedRows);
}

/** The ids of the pending rows `worker` holds (LeaseJob.heldBy): a scan of the due index. */
export async function transmissionsHeldBy(db: Tx, worker: string): Promise<number[]> {
  const rows = await db.selectFrom('transmissions').select('id').where(sql<boolean>`status in ('queued', 'retry')`).where('locked_by', '=', worker).execute();
  return rows.map((r) => Number(r.id));
}

/** The attempts of one transmission, oldest first (tests, get_message_transmissions details). */
export async function listAttempts(db: Tx, transmissionId: number) {
  return db.selectFrom('attempts').selectAll().where('transmission_id', '=', transmissionId).orderBy('id').execute();
}

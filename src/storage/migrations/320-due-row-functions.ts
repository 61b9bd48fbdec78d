// PostgreSQL: the two big queues (transmissions, outbound requests) are claimed by a function whose
// only affordable plan walks the queue's partial due index in order, stops at the claim's limit,
// and updates the rows taken by their primary key: a claim costs about the rows it takes, however
// long the queue and whatever the statistics say (docs/decisions/0003-performance.md, "A claim's
// plan must not depend on statistics").
//
// The plain statement (kept for suspects and for SQLite) is planned from the table's statistics. A
// table never analyzed (a new database, or autovacuum off) takes the default 0.5% for
// `status = 'queued'`: the planner expected a handful of due rows and read them all with a bitmap
// scan, then sorted them (33 ms per claim of 90 rows with 30,000 waiting, measured, against 0.2 ms
// by the index), and a prepared statement's generic plan, made while the table was small, kept
// updating the rows taken through a sequential scan of the whole table as it grew. PostgreSQL has
// no plan hints; a function's SET clause is the planner setting of its own body. enable_* = off
// does not forbid a plan, it prices it out: the index walk and the key lookups are what is left.
//
// Suspects (holder_deaths >= 2, their own small partial indexes) are still claimed by the plain
// statement: those queues are empty unless processes died. SQLite plans without statistics (it is
// never ANALYZEd) and walks the due index already (test/perf-shape/claim-plans.test.ts).
import { sql, type Kysely } from 'kysely';
import type { StoreDialect } from '../dialect.ts';

export async function up(db: Kysely<any>, d: StoreDialect): Promise<void> {
  if (d.name !== 'postgres') return;
  // The conditions and the updates are the plain claims' (storage/delivery-queue.ts,
  // storage/outbound.ts), the status literals as the partial indexes say them; the rows come back
  // whole, the caller picks its columns. ROWS is the planner's guess for the caller, about a claim.
  // Parameters are p_-prefixed so that no column, now or added later, shares a name with one.
  await sql`
    CREATE FUNCTION posthorn_claim_transmissions(p_due_at bigint, p_limit integer, p_worker text, p_lease_end bigint)
    RETURNS SETOF transmissions LANGUAGE plpgsql VOLATILE ROWS 100
    SET enable_bitmapscan = off SET enable_sort = off SET enable_seqscan = off
    AS $$
    BEGIN
      RETURN QUERY
      WITH due AS MATERIALIZED (
        SELECT q.id FROM transmissions q
        WHERE q.holder_deaths < 2 AND q.status IN ('queued', 'retry') AND q.next_attempt_at <= p_due_at
          AND (q.locked_until IS NULL OR q.locked_until <= p_due_at)
        ORDER BY q.next_attempt_at, q.id
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
      )
      UPDATE transmissions t SET locked_by = p_worker, locked_until = p_lease_end, next_attempt_at = p_lease_end
      WHERE t.id IN (SELECT due.id FROM due)
      RETURNING t.*;
    END
    $$`.execute(db);
  await sql`
    CREATE FUNCTION posthorn_claim_outbound_requests(p_due_at bigint, p_limit integer, p_worker text, p_lease_end bigint)
    RETURNS SETOF outbound_requests LANGUAGE plpgsql VOLATILE ROWS 100
    SET enable_bitmapscan = off SET enable_sort = off SET enable_seqscan = off
    AS $$
    BEGIN
      RETURN QUERY
      WITH due AS MATERIALIZED (
        SELECT q.id FROM outbound_requests q
        WHERE q.state = 'pending' AND q.holder_deaths < 2 AND q.next_attempt_at <= p_due_at
        ORDER BY q.next_attempt_at, q.id
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
      )
      UPDATE outbound_requests r SET locked_by = p_worker, locked_until = p_lease_end, next_attempt_at = p_lease_end,
        attempts = r.attempts + 1, updated_at = p_due_at
      WHERE r.id IN (SELECT due.id FROM due) AND r.state = 'pending'
      RETURNING r.*;
    END
    $$`.execute(db);
}

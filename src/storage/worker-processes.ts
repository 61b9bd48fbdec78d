// The registry of live worker processes and the release of a dead one's claims
// (docs/decisions/0008-lease-runner.md, docs/reliability.md "When a process is dead").
//
// Invariants:
// - Every claim a registered process makes (transmissions, outbound requests, mailboxes) is
//   locked_by its registry id, so "everything a process held" is one indexed predicate per table.
// - A process is forgotten, and its claims released, only if its row still holds the heartbeat the
//   one judging saw: one transaction deletes the row `WHERE heartbeat_at = <seen>` and releases the
//   claims of the rows it deleted. A heartbeat recorded meanwhile (the process was alive, only
//   slow) wins, and nothing is released; a heartbeat that comes after finds its row gone and knows
//   its claims were taken (workers/process-registry.ts).
// - Releasing only touches rows still locked_by a dead id: a row the dead process never finished
//   becomes due again with no attempt charged (an outbound request keeps the attempt its claim
//   charged: it may have been posted), its holder_deaths counted (domain/holder-deaths.ts):
//   after its first death at the front of the queue (next attempt = its creation: it was already
//   being worked on, and must not wait behind the backlog queued since), after more behind what is
//   due; and a finish arriving late from a process wrongly presumed dead fails its lease guard and
//   records nothing.
// - heartbeat_at is wall-clock time (Date.now()), whatever clock the services run on: liveness is
//   physical, while the released rows' due times follow the services' clock. It only ever grows
//   for one process, so a changed value means a new heartbeat.
import { sql, type Insertable, type Selectable } from 'kysely';
import { SUSPECT_DELAY_MS } from '../domain/holder-deaths.ts';
import type { Tx } from './store.ts';
import type { WorkerProcessesTable } from './schema.ts';

export type WorkerProcess = Selectable<WorkerProcessesTable>;
export type NewWorkerProcess = Insertable<WorkerProcessesTable>;

export async function registerWorkerProcess(db: Tx, row: NewWorkerProcess): Promise<void> {
  await db.deleteFrom('worker_processes').where('id', '=', row.id).execute();
  await db.insertInto('worker_processes').values(row).execute();
}

/** Records a heartbeat; false when the row is gone (another process presumed this one dead). */
export async function recordHeartbeat(db: Tx, id: string, at: number): Promise<boolean> {
  const result = await db.updateTable('worker_processes').set({ heartbeat_at: at }).where('id', '=', id).executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

export async function listWorkerProcesses(db: Tx): Promise<WorkerProcess[]> {
  const rows = await db.selectFrom('worker_processes').selectAll().execute();
  return rows.map((r) => ({
    ...r,
    pid: Number(r.pid),
    pid_start: r.pid_start === null ? null : Number(r.pid_start),
    started_at: Number(r.started_at),
    heartbeat_at: Number(r.heartbeat_at),
  }));
}

export async function unregisterWorkerProcess(db: Tx, id: string): Promise<void> {
  await db.deleteFrom('worker_processes').where('id', '=', id).execute();
}

export interface ReleasedClaims {
  /** the processes forgotten (those that recorded no heartbeat since they were judged) */
  processes: string[];
  transmissions: number;
  outbound: number;
  mailboxes: number;
}

/** A process judged dead, with the heartbeat it was judged on. */
export interface DeadProcess {
  id: string;
  heartbeat_at: number;
}

/**
 * Forgets the given (dead) processes whose rows still hold the heartbeat they were judged on, and
 * gives back everything those held, due by `now`. One transaction: a process is either still
 * registered with its claims, or gone with them released. Returns the ids forgotten and the counts.
 */
export async function releaseClaimsOf(db: Tx, dead: readonly DeadProcess[], now: number): Promise<ReleasedClaims> {
  if (dead.length === 0) return { processes: [], transmissions: 0, outbound: 0, mailboxes: 0 };
  // First, and guarded: a process that recorded a heartbeat since it was judged keeps its row and
  // its claims (on PostgreSQL the DELETE waits for a heartbeat's UPDATE in progress and sees it).
  const gone = await db
    .deleteFrom('worker_processes')
    .where((eb) => eb.or(dead.map((p) => eb.and([eb('id', '=', p.id), eb('heartbeat_at', '=', p.heartbeat_at)]))))
    .returning('id')
    .execute();
  const ids = gone.map((r) => r.id);
  if (ids.length === 0) return { processes: [], transmissions: 0, outbound: 0, mailboxes: 0 };
  // The first death: due at once, at the front. More: behind what is due, after a delay, and worked
  // alone (domain/holder-deaths.ts). The right-hand holder_deaths is the value before this update.
  const transmissions = await db
    .updateTable('transmissions')
    .set((eb) => ({
      locked_by: null,
      locked_until: null,
      holder_deaths: eb('holder_deaths', '+', 1),
      next_attempt_at: sql<number>`case when holder_deaths = 0 then ${earlier('created_at', now)} else ${now + SUSPECT_DELAY_MS} end`,
    }))
    .where('locked_by', 'in', ids)
    .executeTakeFirst();
  // Outbound requests alike (domain/holder-deaths.ts): a request that kills its worker must not do
  // so for ever either.
  const outbound = await db
    .updateTable('outbound_requests')
    .set((eb) => ({
      locked_by: null,
      locked_until: null,
      holder_deaths: eb('holder_deaths', '+', 1),
      next_attempt_at: sql<number>`case when holder_deaths = 0 then ${earlier('created_at', now)} else ${now + SUSPECT_DELAY_MS} end`,
      updated_at: now,
    }))
    .where('locked_by', 'in', ids)
    .where('state', '=', 'pending')
    .executeTakeFirst();
  const mailboxes = await db
    .updateTable('mailboxes')
    .set({ locked_by: null, locked_until: null, next_check_at: now })
    .where('locked_by', 'in', ids)
    .executeTakeFirst();
  return {
    processes: ids,
    transmissions: Number(transmissions.numUpdatedRows),
    outbound: Number(outbound.numUpdatedRows),
    mailboxes: Number(mailboxes.numUpdatedRows),
  };
}

/** The earlier of a column and a time (least() is PostgreSQL's, min() SQLite's: CASE is both's). */
function earlier(column: 'created_at', at: number) {
  return sql<number>`case when ${sql.ref(column)} < ${at} then ${sql.ref(column)} else ${at} end`;
}

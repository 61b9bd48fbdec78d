// When a registered worker process started, as the kernel counts it (the 22nd field of
// /proc/<pid>/stat: clock ticks since boot). With the host (which names the boot) and the pid it
// names one process: a pid reused by another process after the registered one died has another
// start time, so it is not mistaken for the registered process still running
// (docs/reliability.md, "When a process is dead"). NULL where there is no /proc, and in rows written
// before.
import type { Kysely } from 'kysely';
import type { StoreDialect } from '../dialect.ts';

export async function up(db: Kysely<any>, d: StoreDialect): Promise<void> {
  await db.schema.alterTable('worker_processes').addColumn('pid_start', d.bigintType).execute();
}

// The registry of live worker processes (docs/decisions/0008-lease-runner.md): one row per running
// process that claims work, with the time of its last heartbeat. Every claim a process makes is
// locked_by its id, so when a process is seen dead (no heartbeat for a while, or, on the same host,
// its pid gone) any live process releases everything it held at once instead of waiting for the
// leases to run out.
import type { Kysely } from 'kysely';
import type { StoreDialect } from '../dialect.ts';

export async function up(db: Kysely<any>, d: StoreDialect): Promise<void> {
  await db.schema
    .createTable('worker_processes')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('host', 'text', (c) => c.notNull())
    .addColumn('pid', 'integer', (c) => c.notNull())
    .addColumn('started_at', d.bigintType, (c) => c.notNull())
    .addColumn('heartbeat_at', d.bigintType, (c) => c.notNull())
    .execute();
}

// How many times in a row a process died holding a transmission (docs/reliability.md, "A message
// that kills its worker"): released from a dead holder it counts one more; any recorded attempt
// sets it back to 0. From 2 the transmission is worked alone, at 3 it fails with WORKER_CRASHED, so
// one message that crashes its worker cannot stop delivery. The partial index finds those worked
// alone without looking at the rest of the queue: it is empty unless processes died.
import { sql, type Kysely } from 'kysely';
import type { StoreDialect } from '../dialect.ts';

export async function up(db: Kysely<any>, _d: StoreDialect): Promise<void> {
  await db.schema.alterTable('transmissions').addColumn('holder_deaths', 'integer', (c) => c.notNull().defaultTo(0)).execute();
  await db.schema
    .createIndex('transmissions_suspect')
    .on('transmissions')
    .columns(['next_attempt_at', 'id'])
    .where(sql<boolean>`holder_deaths >= 2 and status in ('queued', 'retry')`)
    .execute();
}

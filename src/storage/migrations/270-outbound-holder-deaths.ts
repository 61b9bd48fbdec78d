// How many times in a row a process died holding an outbound request, a webhook or a postback
// (docs/reliability.md, "A request that kills its worker"), as migration 260 counts them for
// transmissions: released from a dead holder it counts one more; any recorded attempt sets it back
// to 0. From 2 the request is posted alone, at 3 it fails with WORKER_CRASHED without being posted.
// The partial index finds those posted alone without looking at the rest of the queue: it is
// empty unless processes died.
import { sql, type Kysely } from 'kysely';
import type { StoreDialect } from '../dialect.ts';

export async function up(db: Kysely<any>, _d: StoreDialect): Promise<void> {
  await db.schema.alterTable('outbound_requests').addColumn('holder_deaths', 'integer', (c) => c.notNull().defaultTo(0)).execute();
  await db.schema
    .createIndex('outbound_requests_suspect')
    .on('outbound_requests')
    .columns(['next_attempt_at', 'id'])
    .where(sql<boolean>`holder_deaths >= 2 and state = 'pending'`)
    .execute();
}

// A webhook request of an event carries the event's `variables` (the message's global variables
// with the recipient's own over them, docs/webhooks.md), but its stored body no longer holds a copy
// of them: outbound_requests.variables_of names the transmission whose variables (and its message's)
// the dispatcher adds when it posts the request (webhooks/dispatch-outbound.ts). A copy per request
// cost recipients x variables in storage. Rows written before keep their whole body and a null
// here: they are posted as stored.
//
// The partial index finds the pending requests that still need a transmission's variables, so the
// retention purge keeps their message until they are sent (storage/retention.ts); it holds only
// pending rows, so it stays small however much history accumulates.
import { sql, type Kysely } from 'kysely';
import type { StoreDialect } from '../dialect.ts';

export async function up(db: Kysely<any>, d: StoreDialect): Promise<void> {
  await db.schema.alterTable('outbound_requests').addColumn('variables_of', d.bigintType).execute();
  await db.schema
    .createIndex('outbound_requests_variables')
    .on('outbound_requests')
    .column('variables_of')
    .where(sql<boolean>`state = 'pending' and variables_of is not null`)
    .execute();
}

// The index the retention purge walks (storage/retention.ts): one project's outbound requests in
// creation order, so deleting the oldest batch reads only that batch. Messages are walked by
// messages_project_created (001) and events by events_project_created (100).
import type { Kysely } from 'kysely';
import type { StoreDialect } from '../dialect.ts';

export async function up(db: Kysely<any>, _d: StoreDialect): Promise<void> {
  await db.schema.createIndex('outbound_requests_project_created').on('outbound_requests').columns(['project_id', 'created_at']).execute();
}

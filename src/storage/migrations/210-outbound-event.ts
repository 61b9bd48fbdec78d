// A message's page lists the webhook deliveries its events caused, a page at a time
// (storage/message-views.ts, listMessageWebhookDeliveries): events_message (migration 160) finds the
// events, this index their requests, so a page never scans the whole request table. Postbacks
// carry no event: the index holds only the requests that do.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createIndex('outbound_requests_event')
    .on('outbound_requests')
    .columns(['event_id', 'id'])
    .where(sql<boolean>`event_id is not null`)
    .execute();
}

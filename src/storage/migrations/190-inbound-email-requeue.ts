// A postback that gave up leaves its email `failed`; retry_webhook_deliveries puts the request back
// in the queue and its email back to `posting` (docs/mailboxes.md, "Failures"), found by the
// request's id. Failed emails are few: a partial index keeps that lookup off the rest.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createIndex('inbound_emails_failed')
    .on('inbound_emails')
    .columns(['outbound_id'])
    .where(sql<boolean>`state = 'failed'`)
    .execute();
}

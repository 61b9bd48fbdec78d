// A copy's subject as it was sent, where it differs from its message's (messages.subject, the
// first copy's): a subject with {{variables}} rendered with a recipient's own variables
// (domain/send-request.ts subjectsAsSent). NULL for nearly every row, and for rows written before,
// whose message keeps the subject it was stored with. The message search looks for a subject in
// these too, through a partial index that holds only the rows that have one (docs/dashboard.md).
import { sql, type Kysely } from 'kysely';
import type { StoreDialect } from '../dialect.ts';

export async function up(db: Kysely<any>, d: StoreDialect): Promise<void> {
  await db.schema.alterTable('transmissions').addColumn('subject', d.textType).execute();
  await db.schema
    .createIndex('transmissions_message_subject')
    .on('transmissions')
    .columns(['message_id'])
    .where(sql<boolean>`subject is not null`)
    .execute();
}

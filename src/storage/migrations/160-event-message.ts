// Events name the message they report (events.message_id, from the payload's message_id), so a
// message's page lists the webhook deliveries it caused by one index seek, however late an event
// came (a bounce mail hours after the delivery). Rows written before are filled in here, in
// batches, from their payloads.
import type { Kysely } from 'kysely';
import type { StoreDialect } from '../dialect.ts';

const BATCH = 1000;

export async function up(db: Kysely<any>, d: StoreDialect): Promise<void> {
  await db.schema.alterTable('events').addColumn('message_id', d.bigintType).execute();
  await db.schema.createIndex('events_message').on('events').column('message_id').execute();
  let afterId = 0;
  for (;;) {
    const rows: Array<{ id: number; payload: string }> = await db
      .selectFrom('events')
      .select(['id', 'payload'])
      .where('id', '>', afterId)
      .orderBy('id')
      .limit(BATCH)
      .execute();
    if (rows.length === 0) return;
    for (const row of rows) {
      const messageId = messageIdOf(row.payload);
      if (messageId !== null) await db.updateTable('events').set({ message_id: messageId }).where('id', '=', row.id).execute();
    }
    afterId = Number(rows[rows.length - 1].id);
  }
}

function messageIdOf(payload: string): number | null {
  try {
    const id = (JSON.parse(payload) as { message_id?: unknown }).message_id;
    return typeof id === 'number' && Number.isSafeInteger(id) ? id : null;
  } catch {
    return null;
  }
}

// messages.send_at: when a message scheduled with send_at (docs/api/send-message.md, "Scheduled
// sends") is due, written at acceptance; NULL for a message due at acceptance (nearly every one).
// The listings (get_messages) read it beside the other columns instead of the payload, which they
// never read (storage/schema.ts). Rows written before are filled in here, in batches, from the
// payloads that name a sendAt (the pattern keeps the others from being parsed).
import { sql, type Kysely } from 'kysely';
import type { StoreDialect } from '../dialect.ts';

const BATCH = 1000;

export async function up(db: Kysely<any>, d: StoreDialect): Promise<void> {
  await db.schema.alterTable('messages').addColumn('send_at', d.bigintType).execute();
  let afterId = 0;
  for (;;) {
    const rows: Array<{ id: number; created_at: number; payload: string }> = await db
      .selectFrom('messages')
      .select(['id', 'created_at', 'payload'])
      .where('id', '>', afterId)
      .where(sql<boolean>`payload like '%"sendAt":%'`)
      .orderBy('id')
      .limit(BATCH)
      .execute();
    if (rows.length === 0) return;
    for (const row of rows) {
      const sendAt = sendAtOf(row.payload);
      // As domain/message-payload.ts scheduledSendAt: a send_at not after acceptance was now.
      if (sendAt !== null && sendAt > Number(row.created_at)) await db.updateTable('messages').set({ send_at: sendAt }).where('id', '=', row.id).execute();
    }
    afterId = Number(rows[rows.length - 1].id);
  }
}

function sendAtOf(payload: string): number | null {
  try {
    const sendAt = (JSON.parse(payload) as { sendAt?: unknown }).sendAt;
    return typeof sendAt === 'number' && Number.isSafeInteger(sendAt) ? sendAt : null;
  } catch {
    return null;
  }
}

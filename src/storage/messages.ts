// The messages table: one row per accepted send_message. Inserts and simple lookups; the listings
// of reports live with them (storage/reports.ts).
import type { Message, NewMessage } from './schema.ts';
import type { Tx } from './store.ts';

/**
 * Inserts a message and returns its id. A second message with the same (project_id, uid) violates
 * messages_project_uid: the caller maps that to the duplicate-uid error (no SELECT beforehand:
 * this is the ingest hot path, and only the constraint is race-free).
 */
export async function insertMessage(db: Tx, row: NewMessage): Promise<number> {
  const inserted = await db.insertInto('messages').values(row).returning('id').executeTakeFirstOrThrow();
  return Number(inserted.id);
}

export async function findMessageById(db: Tx, id: number): Promise<Message | undefined> {
  return db.selectFrom('messages').selectAll().where('id', '=', id).executeTakeFirst();
}

export async function findMessageByProjectUid(db: Tx, projectId: number, uid: string): Promise<Message | undefined> {
  return db.selectFrom('messages').selectAll().where('project_id', '=', projectId).where('uid', '=', uid).executeTakeFirst();
}

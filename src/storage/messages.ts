// The messages table: one row per accepted send_message. Inserts and simple lookups; the listings
// of reports live with them (storage/reports.ts).
import { CompiledInsert } from './compiled-insert.ts';
import type { NewMessage } from './schema.ts';
import type { Tx } from './store.ts';

const INSERT_MESSAGE = new CompiledInsert(
  'messages',
  ['project_id', 'uid', 'unique_id', 'template', 'subject', 'from_address', 'recipient_count', 'deliver', 'created_at', 'payload'],
  true,
);

/** A message row as send_message writes it (every column but the id). */
export type MessageRow = Required<Omit<NewMessage, 'id'>>;

/**
 * Inserts a message and returns its id. A second message with the same (project_id, uid) violates
 * messages_project_uid: the caller maps that to the duplicate-uid error (no SELECT beforehand:
 * this is the ingest hot path, and only the constraint is race-free).
 */
export async function insertMessage(db: Tx, row: MessageRow): Promise<number> {
  const [inserted] = await INSERT_MESSAGE.execute(db, [row]);
  return Number(inserted.id);
}

// The messages table: one row per accepted send_message. Inserts and simple lookups; the listings
// of reports live with them (storage/reports.ts).
import { CompiledInsert } from './compiled-insert.ts';
import { isUniqueViolationError } from './dialect.ts';
import type { NewMessage } from './schema.ts';
import type { Tx } from './store.ts';

const INSERT_MESSAGE = new CompiledInsert(
  'messages',
  ['project_id', 'uid', 'unique_id', 'template', 'subject', 'from_address', 'recipient_count', 'deliver', 'created_at', 'payload'],
  true,
);

/** A message row as send_message writes it (every column but the id). */
export type MessageRow = Required<Omit<NewMessage, 'id'>>;

/** The message's id, or `duplicate`: its (project_id, uid) is taken. */
export type InsertedMessage = { duplicate: false; id: number } | { duplicate: true };

/**
 * Inserts a message. A second message with the same (project_id, uid) violates
 * messages_project_uid and comes back as `{ duplicate: true }` (no SELECT beforehand: this is the
 * ingest hot path, and only the constraint is race-free). After a duplicate the transaction takes
 * no further statement (PostgreSQL has aborted it): the caller ends its unit with its own error.
 */
export async function insertMessage(db: Tx, row: MessageRow): Promise<InsertedMessage> {
  try {
    const [inserted] = await INSERT_MESSAGE.execute(db, [row]);
    return { duplicate: false, id: Number(inserted.id) };
  } catch (error) {
    if (isUniqueViolationError(error)) return { duplicate: true };
    throw error;
  }
}

// The transmissions table (the delivery queue): inserts at acceptance and simple lookups. Claiming
// and finishing deliveries is storage/delivery-queue.ts.
import { CompiledInsert } from './compiled-insert.ts';
import type { NewTransmission, Transmission } from './schema.ts';
import type { Tx } from './store.ts';

/** A transmission as acceptance writes it: the lease, attempt and tracking columns start empty. */
export type AcceptedTransmission = Required<
  Pick<
    NewTransmission,
    | 'message_id' | 'project_id' | 'recipient' | 'recipient_name' | 'variables' | 'status' | 'next_attempt_at'
    | 'attempts' | 'created_at' | 'updated_at' | 'completed_at' | 'result_code' | 'result_message'
  >
>;

const INSERT_TRANSMISSIONS = new CompiledInsert(
  'transmissions',
  ['message_id', 'project_id', 'recipient', 'recipient_name', 'variables', 'status', 'next_attempt_at', 'attempts', 'created_at', 'updated_at', 'completed_at', 'result_code', 'result_message'],
  false,
);

/**
 * Rows per INSERT statement. 1000 rows of 13 columns stay under SQLite's 32,766 and PostgreSQL's
 * 65,535 bound parameters; the default recipient limit (1000) makes one statement per message.
 */
const ROWS_PER_INSERT = 1000;

/** Inserts the transmissions of one message, as few multi-row INSERTs as the parameter bounds allow. */
export async function insertTransmissions(db: Tx, rows: readonly AcceptedTransmission[]): Promise<void> {
  for (let start = 0; start < rows.length; start += ROWS_PER_INSERT) {
    await INSERT_TRANSMISSIONS.execute(db, rows.slice(start, start + ROWS_PER_INSERT));
  }
}

export async function listTransmissionsByMessage(db: Tx, messageId: number): Promise<Transmission[]> {
  return db.selectFrom('transmissions').selectAll().where('message_id', '=', messageId).orderBy('id').execute();
}

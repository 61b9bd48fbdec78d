// The columns acceptance writes, in the order both dialects' acceptance statements take them
// (dialects/postgres-acceptance.ts, dialects/sqlite-acceptance.ts): every column of an accepted
// message, and every column of its transmissions but message_id (the message's new id).
import type { AcceptedTransmission, MessageRow } from '../schema.ts';

export const MESSAGE_COLUMNS = ['project_id', 'uid', 'unique_id', 'template', 'subject', 'from_address', 'recipient_count', 'deliver', 'created_at', 'send_at', 'sandbox', 'payload'] as const satisfies readonly (keyof MessageRow)[];
export const TRANSMISSION_COLUMNS = [
  'project_id', 'recipient', 'recipient_name', 'variables', 'subject', 'status', 'next_attempt_at', 'attempts', 'created_at', 'updated_at', 'completed_at', 'result_code', 'result_message',
] as const satisfies readonly (keyof AcceptedTransmission)[];

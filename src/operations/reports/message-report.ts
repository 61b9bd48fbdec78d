// Reports about one message, looked up by its uid within the caller's project: the receipt, the
// per-recipient transmissions, and the legacy status summaries. An unknown uid is 404 not_found.
import { ApiError } from '../../domain/errors.ts';
import { deliveredAddressOf, parsePayload, scheduledSendAt, type MessagePayload } from '../../domain/message-payload.ts';
import { formatApiTime } from '../../domain/time.ts';
import { findMessageByUid, findMessagePayload, listTransmissionsOfMessage, type MessageSummary } from '../../storage/reports.ts';
import type { Project, Transmission } from '../../storage/schema.ts';
import type { Services } from '../../services.ts';
import { messageUrl } from '../send-message.ts';

/** The API's four transmission statuses, in lifecycle order. */
export const TRANSMISSION_STATUSES = ['queued', 'retry', 'completed', 'failed'] as const;

async function findMessageOrFail(services: Services, project: Project, uid: string): Promise<MessageSummary> {
  const message = await findMessageByUid(services.store.db, project.id, uid);
  if (!message) throw new ApiError('not_found', `Message with uid ${uid} was not found in this project.`);
  return message;
}

async function loadMessage(services: Services, project: Project, uid: string): Promise<{ message: MessageSummary; transmissions: Transmission[] }> {
  const message = await findMessageOrFail(services, project, uid);
  const transmissions = await listTransmissionsOfMessage(services.store.db, message.id);
  return { message, transmissions };
}

export interface MessageReceipt {
  message: { id: number; url: string };
}

export async function getMessageReceipt(services: Services, project: Project, uid: string): Promise<MessageReceipt> {
  const message = await findMessageOrFail(services, project, uid);
  return { message: { id: Number(message.id), url: messageUrl(services, Number(message.id)) } };
}

export interface TransmissionReport {
  status: string;
  created_at: string | null;
  failed_at: string | null;
  opened_at: string | null;
  clicked_at: string | null;
  result_code: string | null;
  result_message: string | null;
  /** the same text as result_message: the vendor's docs name one, three clients read the other */
  error_message: string | null;
  /** where the copy really went: the message's recipient_override, or the recipient */
  delivered_to: string;
}

export interface MessageTransmissions {
  /** send_at: when a scheduled message is due (null when it was due at acceptance) */
  message: { id: number; send_at: string | null };
  transmissions: Record<string, TransmissionReport>;
}

/**
 * Keyed by recipient address, as clients expect. An address that appears more than once in one
 * message keeps its first transmission under the plain address; the later ones are keyed
 * "address#2", "address#3", ... in the order they were written, so nothing is hidden and a client
 * looking up the plain address still finds it.
 */
export function keyByRecipient<T>(transmissions: readonly Transmission[], present: (t: Transmission) => T): Record<string, T> {
  const out: Record<string, T> = {};
  const seen = new Map<string, number>();
  for (const t of transmissions) {
    const n = (seen.get(t.recipient) ?? 0) + 1;
    seen.set(t.recipient, n);
    out[n === 1 ? t.recipient : `${t.recipient}#${n}`] = present(t);
  }
  return out;
}

export async function getMessageTransmissions(services: Services, project: Project, uid: string): Promise<MessageTransmissions> {
  const { message, transmissions } = await loadMessage(services, project, uid);
  // Fields beside those PostageApp's clients read (docs/api/reports.md): the schedule and the override.
  const json = await findMessagePayload(services.store.db, Number(message.id));
  const payload: Pick<MessagePayload, 'recipientOverride' | 'sendAt'> = json === undefined ? { recipientOverride: null } : parsePayload(json);
  return {
    message: { id: Number(message.id), send_at: formatApiTime(scheduledSendAt(payload, Number(message.created_at))) },
    transmissions: keyByRecipient(transmissions, (t) => ({
      status: t.status,
      created_at: formatApiTime(t.created_at),
      failed_at: formatApiTime(t.failed_at),
      opened_at: formatApiTime(t.opened_at),
      clicked_at: formatApiTime(t.clicked_at),
      result_code: t.result_code,
      result_message: t.result_message,
      error_message: t.result_message,
      delivered_to: deliveredAddressOf(payload, t.recipient),
    })),
  };
}

/** Legacy message_status: how many of the message's transmissions are in each status (all four). */
export async function getMessageStatusCounts(services: Services, project: Project, uid: string): Promise<Record<string, number>> {
  const { transmissions } = await loadMessage(services, project, uid);
  const counts: Record<string, number> = Object.fromEntries(TRANSMISSION_STATUSES.map((s) => [s, 0]));
  for (const t of transmissions) counts[t.status] = (counts[t.status] ?? 0) + 1;
  return counts;
}

export type MessageDeliveryStatus = 'queued' | 'failed' | 'completed';

/**
 * The status of a message as a whole: `queued` while any transmission is queued or retry (or the
 * message has none yet); once all are final, `completed` when every one completed, else `failed`
 * (at least one failed: the per-recipient list says which).
 */
export function summariseDeliveryStatus(statuses: readonly string[]): MessageDeliveryStatus {
  if (statuses.length === 0 || statuses.some((s) => s !== 'completed' && s !== 'failed')) return 'queued';
  return statuses.every((s) => s === 'completed') ? 'completed' : 'failed';
}

export interface DeliveryStatusReport {
  overall: MessageDeliveryStatus;
  recipients: Array<{ unique_id: string; recipient: string; status: string }>;
}

export async function getMessageDeliveryStatus(services: Services, project: Project, uid: string): Promise<DeliveryStatusReport> {
  const { message, transmissions } = await loadMessage(services, project, uid);
  return {
    overall: summariseDeliveryStatus(transmissions.map((t) => t.status)),
    recipients: transmissions.map((t) => ({ unique_id: message.unique_id, recipient: t.recipient, status: t.status })),
  };
}

/** Legacy get_recipients_list: the message's recipient addresses, in the order they were given. */
export async function getRecipientsList(services: Services, project: Project, uid: string): Promise<string[]> {
  const { transmissions } = await loadMessage(services, project, uid);
  return transmissions.map((t) => t.recipient);
}

// cancel_message: stop a message (or some of its recipients) that has not gone out yet.
//
//   find the message (by uid or id, in the caller's project; 404) -> ONE transaction: cancel the
//   waiting transmissions (storage/cancellations.ts) + one `cancelled` event each -> report the rest
//
// A cancelled transmission ends as the API's `failed` with result code CANCELLED (docs/api/
// cancel-message.md): history, receipts and get_message_transmissions show it like any other end.
// What cannot be cancelled is reported, not refused: completed and failed copies have ended, and a
// copy a worker holds under a live lease is being delivered now (it may already be on the wire).
import { cutText } from '../domain/args.ts';
import { ApiError, callError } from '../domain/errors.ts';
import { addressKey } from '../domain/recipients.ts';
import { buildEventPayload, readAcceptedPayload } from '../domain/events.ts';
import type { Services } from '../services.ts';
import { cancelWaitingTransmissions, findProjectMessage, listTransmissionStates } from '../storage/cancellations.ts';
import { recordEvent } from '../storage/events.ts';
import type { ProjectCaller } from './context.ts';

export const RESULT_CANCELLED = { code: 'CANCELLED', message: 'Cancelled by cancel_message before it was sent.' } as const;

/** Why a recipient was not cancelled. */
export type NotCancelledReason = 'completed' | 'failed' | 'in_flight' | 'not_a_recipient';

export interface CancelInput {
  /** the message's uid (as send_message took or derived it) */
  uid?: string;
  /** or its id (as send_message answered data.message.id) */
  id?: number;
  /** only these recipients' copies; all when absent */
  recipients?: readonly string[];
}

export interface CancelResult {
  message: { id: number; uid: string };
  /** recipients whose copy was cancelled by this call */
  cancelled: string[];
  /** the others named (or all the others), with why */
  notCancelled: Record<string, NotCancelledReason>;
}

export async function cancelMessage(services: Services, caller: ProjectCaller, input: CancelInput): Promise<CancelResult> {
  if (input.uid === undefined && input.id === undefined) throw new ApiError('bad_request', 'Missing required argument "uid" (or "id"): the message to cancel.');
  const project = caller.project;
  // By id when given, else by uid; given both, they must name the same message: acting on one of
  // two that disagree could cancel the wrong mail.
  const message = await findProjectMessage(services.store.db, project.id, input.id !== undefined ? { id: input.id } : { uid: input.uid });
  if (!message) throw new ApiError('not_found', `Message ${input.id ?? JSON.stringify(cutText(input.uid ?? '', 200))} not found in this project.`);
  if (input.id !== undefined && input.uid !== undefined && message.uid !== input.uid) {
    throw callError(`arguments "uid" (${JSON.stringify(cutText(input.uid, 200))}) and "id" (${input.id}) name different messages; give one of them, or both of the same message`);
  }
  const only = input.recipients ? [...new Set(input.recipients.map((r) => addressKey(r.trim())))] : null;

  const now = services.clock.now();
  const { cancelled, states } = await services.store.write(async (trx) => {
    const rows = await cancelWaitingTransmissions(trx, { messageId: message.id, recipients: only, now, resultCode: RESULT_CANCELLED.code, resultMessage: RESULT_CANCELLED.message });
    const { recipientOverride } = readAcceptedPayload(message.payload);
    for (const row of rows) {
      const payload = buildEventPayload(
        {
          transmissionId: row.id,
          messageId: message.id,
          messageUid: message.uid,
          uniqueId: message.unique_id,
          projectUid: project.uid,
          recipient: row.recipient,
          sandbox: Number(message.sandbox) === 1,
        },
        {
          kind: 'cancelled',
          deliveredTo: recipientOverride ?? row.recipient,
          status: 'failed',
          outcome: 'cancelled',
          resultCode: RESULT_CANCELLED.code,
          resultMessage: RESULT_CANCELLED.message,
          host: null,
          attempts: Number(row.attempts),
          createdAt: Number(row.created_at),
          nextAttemptAt: null,
        },
        now,
      );
      await recordEvent(trx, { accountId: caller.account.id, projectId: project.id, type: 'cancelled', payload, now });
    }
    return { cancelled: rows, states: await listTransmissionStates(trx, message.id) };
  });

  const cancelledIds = new Set(cancelled.map((r) => r.id));
  const notCancelled: Record<string, NotCancelledReason> = {};
  const known = new Set<string>();
  for (const s of states) {
    known.add(addressKey(s.recipient));
    if (cancelledIds.has(s.id) || (only !== null && !only.includes(addressKey(s.recipient)))) continue;
    notCancelled[s.recipient] = s.status === 'completed' ? 'completed' : s.status === 'failed' ? 'failed' : 'in_flight';
  }
  for (const r of only ?? []) if (!known.has(r)) notCancelled[r] = 'not_a_recipient';
  return { message: { id: message.id, uid: message.uid }, cancelled: cancelled.map((r) => r.recipient), notCancelled };
}


// send_message: accept a message for delivery. The ingest hot path (docs/decisions/0003-performance.md: ~10,000 durable
// requests/s on SQLite), so it does exactly this much I/O: one template-chain query (only when a
// template is named), then the message and its transmissions stored atomically by
// storage/messages.ts storeAcceptedMessage (ONE statement on PostgreSQL, one unit of the group
// commit on SQLite). A duplicate uid is found by the unique constraint, not a SELECT.
//
//   [the edge reads the request (400, 406)] -> template and its layouts (412) -> recipients, addresses (412)
//   -> uid (given, or the hash of the arguments) -> store message + transmissions -> wake delivery
//
// What is accepted is what will be sent: the template chain is merged into the stored payload now,
// so later template edits never change this message.
import { ApiError } from '../domain/errors.ts';
import type { MessagePayload } from '../domain/message-payload.ts';
import { messageIdFor, uniqueIdFor } from '../domain/message-uid.ts';
import { acceptMessage, deliveryAddress, isNullSink, subjectsAsSent, type AcceptedMessage, type SendRequest } from '../domain/send-request.ts';
import { checkLayoutChain, MAX_LAYOUT_CHAIN, type TemplateLevel } from '../domain/templates.ts';
import { storeAcceptedMessage, type AcceptedCopy } from '../storage/messages.ts';
import { findTemplateChain } from '../storage/template-layouts.ts';
import { listCompletedTransmissions } from '../storage/transmissions.ts';
import { isDuplicate } from '../storage/duplicates.ts';
import { recordEvent } from '../storage/events.ts';
import type { Tx } from '../storage/store.ts';
import { buildEventPayload } from '../domain/events.ts';
import { parseSendAt } from '../domain/send-at.ts';
import { acceptsInSandbox, defaultFromOf } from './projects.ts';
import type { ProjectCaller } from './context.ts';
import type { Services } from '../services.ts';
import { recordMessageAccepted } from '../observability/attempts.ts';

export interface SentMessage {
  id: number;
  url: string;
  uid: string;
}

export const RESULT_NOT_SENT = { code: 'NOT_SENT', message: 'Not sent: the message was accepted with deliver: false.' } as const;
export const RESULT_NULL_SINK = {
  code: 'SMTP_250',
  message: '2.0.0 Accepted: null.postageapp.com is a test address; the message was completed without being sent.',
} as const;

/** A message's own URL, as send_message answers it. */
export function messageUrl(services: Services, id: number): string {
  return `${services.config.publicUrl}/messages/${id}`;
}

/**
 * Accepts `request` (read from the wire by the edge: domain/send-request.ts readSendRequest) for
 * the caller's project. acceptMessage checks the merged content and every address.
 */
export async function sendMessage(services: Services, caller: ProjectCaller, request: SendRequest): Promise<SentMessage> {
  const now = services.clock.now();
  // send_at (406 when malformed or too far ahead): the copies are due then, not now.
  const sendAt = parseSendAt(request.sendAt, now, services.config.maxScheduleAheadMs);
  const chain = request.template === null ? null : await loadTemplateChain(services, caller.project.id, request.template);
  const accepted = acceptMessage(request, chain, { maxRecipients: services.config.maxRecipients, defaultFrom: defaultFromOf(services, caller.project) });
  const uid = request.uid;
  // Everything but the inserts is computed before the transaction: on SQLite the transactions of
  // concurrent requests share one commit, and time spent inside delays all of them.
  const payload = JSON.stringify(buildPayload(accepted, request, messageIdFor(uid, services.config.mailerHost), sendAt));
  // The subject as sent, for the message list and search; the payload keeps it as accepted.
  const subjects = subjectsAsSent(accepted.subject, request.variables, accepted.copies);
  const copies = acceptedCopies(accepted, request.deliver, subjects.copies);
  const completedNow = copies.some((copy) => copy.completed !== null);
  const uniqueId = uniqueIdFor(uid, services.config.mailerHost);
  // The mode is the message's own from now on, whatever the project's setting later (docs/sandbox.md).
  const sandbox = acceptsInSandbox(caller.project);
  const stored = await storeAcceptedMessage(
    services.store,
    {
      message: {
        project_id: caller.project.id,
        uid,
        unique_id: uniqueId,
        template: request.template,
        subject: subjects.message,
        from_address: accepted.from,
        deliver: request.deliver ? 1 : 0,
        created_at: now,
        // As scheduledSendAt reads the payload (domain/message-payload.ts): a time not ahead was now.
        send_at: sendAt !== null && sendAt > now ? sendAt : null,
        sandbox: sandbox ? 1 : 0,
        payload,
      },
      copies,
      dueAt: sendAt ?? now,
    },
    // Copies completed here (null.postageapp.com, deliver: false) get the event a delivery would
    // write, in the same transaction (docs/sandbox.md). Not on the common path: only then is it read back.
    completedNow
      ? (trx, messageId) => recordAcceptanceEvents(trx, caller, { id: messageId, uid, uniqueId, sandbox }, { variables: request.variables, recipientOverride: accepted.recipientOverride }, now)
      : undefined,
  );
  if (isDuplicate(stored)) throw duplicateMessageUid(uid);
  const id = stored.id;
  // Workers are told only when there is something to deliver (a wake is a NOTIFY on PostgreSQL).
  if (copies.some((copy) => copy.completed === null)) services.store.wake('transmissions');
  recordMessageAccepted(services, copies.length);
  return { id, url: messageUrl(services, id), uid };
}

/** send_message's own duplicate-uid answer: it says more than domain/errors' duplicateUid (compatibility.md). */
function duplicateMessageUid(uid: string): ApiError {
  return new ApiError('bad_request', `Uid ${uid} already exists. Assuming message duplication.`);
}

async function loadTemplateChain(services: Services, projectId: number, slug: string): Promise<TemplateLevel[]> {
  const rows = await findTemplateChain(services.store.db, projectId, slug, MAX_LAYOUT_CHAIN);
  return checkLayoutChain(slug, rows);
}

function buildPayload(accepted: AcceptedMessage, request: SendRequest, messageId: string, sendAt: number | null): MessagePayload {
  return {
    v: 1,
    syntax: 'handlebars',
    // undefined (left out of the stored JSON) rather than a conditional spread: domain/objects.ts.
    sendAt: sendAt ?? undefined,
    messageId,
    from: accepted.from,
    subject: accepted.subject,
    text: accepted.text,
    html: accepted.html,
    headers: accepted.headers,
    variables: request.variables,
    attachments: request.attachments,
    recipientOverride: accepted.recipientOverride,
    tracking: request.tracking,
  };
}

/**
 * One transmission per copy. deliver: false completes every copy as NOT_SENT; a copy whose
 * delivery address (after recipient_override) is at null.postageapp.com completes now as SMTP_250
 * without leaving the machine; every other copy is queued, due at once (or at send_at). `subjects`:
 * each copy's own subject where it differs from the message's (subjectsAsSent), or null.
 */
function acceptedCopies(accepted: AcceptedMessage, deliver: boolean, subjects: ReadonlyArray<string | null> | null): AcceptedCopy[] {
  return accepted.copies.map((copy, i) => ({
    recipient: copy.address,
    recipientName: copy.name,
    variables: copy.variables && Object.keys(copy.variables).length > 0 ? JSON.stringify(copy.variables) : null,
    subject: subjects === null ? null : subjects[i],
    completed: !deliver ? RESULT_NOT_SENT : isNullSink(deliveryAddress(copy, accepted.recipientOverride)) ? RESULT_NULL_SINK : null,
  }));
}

/**
 * The `delivered` event of every copy completed at acceptance (null.postageapp.com, deliver:
 * false), as the delivery path writes it: for send_message and SMTP submission alike.
 */
export async function recordAcceptanceEvents(
  trx: Tx,
  caller: ProjectCaller,
  message: { id: number; uid: string; uniqueId: string; sandbox: boolean },
  sent: { variables: MessagePayload['variables']; recipientOverride: string | null },
  now: number,
): Promise<void> {
  for (const row of await listCompletedTransmissions(trx, message.id)) {
    const delivered = row.result_code !== RESULT_NOT_SENT.code;
    const payload = buildEventPayload(
      {
        transmissionId: row.id,
        messageId: message.id,
        messageUid: message.uid,
        uniqueId: message.uniqueId,
        projectUid: caller.project.uid,
        recipient: row.recipient,
        sandbox: message.sandbox,
      },
      {
        kind: 'delivered',
        deliveredTo: sent.recipientOverride ?? row.recipient,
        status: 'completed',
        outcome: delivered ? 'sent' : 'not_sent',
        resultCode: row.result_code,
        resultMessage: row.result_message,
        host: null,
        attempts: 0,
        createdAt: now,
        nextAttemptAt: null,
      },
      now,
    );
    await recordEvent(trx, { accountId: caller.account.id, projectId: caller.project.id, type: 'delivered', payload, now });
  }
}

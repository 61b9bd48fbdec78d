// What the dashboard (and the get_message_content / get_message_source API methods) show of
// messages: a keyset-paged search of one project's messages, and one message with its content,
// schedule (send_at) and recipient override, per-recipient timeline (attempts, opens, clicks,
// bounce, suppression) and the webhook deliveries it caused, both keyset-paged (docs/dashboard.md,
// "One message"). The raw MIME is composed by the same composer delivery uses (domain/compose-mime.ts);
// a message submitted over SMTP is stored as MIME, and its content is read from it
// (domain/mime-content.ts).
import { ApiError } from '../domain/errors.ts';
import { suppressionKey } from '../domain/suppression-policy.ts';
import { deliveredAddressOf, parsePayload, scheduledSendAt, type MessagePayload } from '../domain/message-payload.ts';
import { readMimeContent, type MimeContent } from '../domain/mime-content.ts';
import { mergeVariables, TemplateRenderError, type PartKind, type Variables } from '../domain/variables.ts';
import { addressedMime, composeMime, payloadRenderer } from '../domain/compose-mime.ts';
import type { Services } from '../services.ts';
import {
  findFirstMessageTransmission,
  findMessageTransmission,
  findMessageUidInProject,
  findMessageWithPayload,
  listAttemptsOf,
  listMessageTransmissionsPage,
  listMessageWebhookDeliveries,
  searchMessagesPage,
  tallyMessageStatuses,
  type Attempt,
  type MessageCursor,
  type MessageRow,
} from '../storage/message-views.ts';
import { findProjectById } from '../storage/projects.ts';
import type { Message, Project, Suppression, Transmission } from '../storage/schema.ts';
import { findSuppressions } from '../storage/suppressions.ts';
import { TRANSMISSION_STATUSES } from './reports/message-report.ts';
import { viewerSeesProject, type Viewer } from './users.ts';

/** Messages per page, and messages one filtered page looks through at most (storage/message-views.ts). */
export const MESSAGE_PAGE_SIZE = 50;
export const MESSAGE_SCAN_LIMIT = 5000;
/** Copies of one message shown with their timelines on one page (a message may have up to thousands). */
export const TIMELINE_PAGE_SIZE = 100;
/** Webhook deliveries of one message on one page (a few per copy: delivered, opened, clicked, bounced). */
export const WEBHOOK_DELIVERIES_PAGE_SIZE = 50;

export interface MessageFilters {
  recipient?: string;
  uid?: string;
  subject?: string;
  template?: string;
  status?: string;
  fromMs?: number | null;
  untilMs?: number | null;
  /** the opaque cursor of a previous page */
  cursor?: string;
}

export interface MessageListItem {
  message: MessageRow;
  /** copies per status */
  statuses: Record<string, number>;
  firstRecipient: string | null;
  /**
   * When its queued copies are due, while that is still ahead: a send scheduled with send_at
   * (docs/api/send-message.md, "Scheduled sends"); null otherwise
   */
  scheduledFor: number | null;
  /** accepted in sandbox mode: its copies are answered by the sandbox, whatever the project's setting now (docs/sandbox.md) */
  sandbox: boolean;
}

export interface MessageSearchResult {
  items: MessageListItem[];
  /** the next page's cursor, or null */
  next: string | null;
}

export function encodeCursor(c: MessageCursor): string {
  return `${c.createdAt}.${c.id}`;
}

function decodeCursor(text: string | undefined): MessageCursor | null {
  if (!text) return null;
  const m = /^(\d{1,16})\.(\d{1,16})$/.exec(text);
  if (!m) throw new ApiError('call_error', 'Request could not be processed: the page cursor is malformed.');
  return { createdAt: Number(m[1]), id: Number(m[2]) };
}

function optional(text: string | undefined, max: number): string | null {
  const t = (text ?? '').trim();
  if (t === '') return null;
  return t.slice(0, max);
}

/** One page of the project's messages, newest first, filtered. */
export async function searchMessages(services: Services, project: Project, filters: MessageFilters): Promise<MessageSearchResult> {
  const db = services.store.db;
  const status = optional(filters.status, 20);
  if (status !== null && !(TRANSMISSION_STATUSES as readonly string[]).includes(status)) {
    throw new ApiError('call_error', `Request could not be processed: status must be one of ${TRANSMISSION_STATUSES.join(', ')}.`);
  }
  const uid = optional(filters.uid, 500);
  let rows: MessageRow[];
  let next: MessageCursor | null;
  if (uid !== null) {
    // A uid names at most one message: the unique index answers, whatever the other filters.
    const row = await findMessageUidInProject(db, project.id, uid);
    rows = row ? [row] : [];
    next = null;
  } else {
    ({ rows, next } = await searchMessagesPage(db, {
      projectId: project.id,
      before: decodeCursor(filters.cursor),
      fromMs: filters.fromMs ?? null,
      untilMs: filters.untilMs ?? null,
      recipient: optional(filters.recipient, 300),
      subject: optional(filters.subject, 300),
      template: optional(filters.template, 100),
      status,
      limit: MESSAGE_PAGE_SIZE,
      scanLimit: MESSAGE_SCAN_LIMIT,
    }));
  }
  const tallies = await tallyMessageStatuses(db, rows.map((r) => Number(r.id)));
  const now = services.clock.now();
  const items = rows.map((message) => {
    const mine = tallies.filter((t) => t.message_id === Number(message.id));
    const statuses: Record<string, number> = {};
    for (const t of mine) statuses[t.status] = t.count;
    const firstRecipient = mine.map((t) => t.first_recipient).sort()[0] ?? null;
    // A queued copy no worker holds is due at send_at (or now): nothing else moves it ahead.
    const due = mine.find((t) => t.status === 'queued')?.next_due ?? null;
    return { message, statuses, firstRecipient, scheduledFor: due !== null && due > now ? due : null, sandbox: Number(message.sandbox) === 1 };
  });
  return { items, next: next ? encodeCursor(next) : null };
}

/** A message and its project, if the viewer may see it; not_found otherwise (never telling which). */
export async function findViewerMessage(services: Services, viewer: Viewer, idText: string): Promise<{ message: Message; project: Project }> {
  const id = messageIdOf(idText);
  const notFound = new ApiError('not_found', id !== null ? `Message ${id} not found.` : `No message has the id ${JSON.stringify(idText.slice(0, 40))}: ids are whole numbers.`);
  if (id === null) throw notFound;
  const message = await findMessageWithPayload(services.store.db, id);
  if (!message) throw notFound;
  const project = await findProjectById(services.store.db, Number(message.project_id));
  if (!project || !viewerSeesProject(viewer, project)) throw notFound;
  return { message, project };
}

/** A project's message by uid (the API's way to name one), or not_found. */
export async function findProjectMessage(services: Services, project: Project, uid: string): Promise<Message> {
  const row = await findMessageUidInProject(services.store.db, project.id, uid);
  const message = row ? await findMessageWithPayload(services.store.db, Number(row.id)) : undefined;
  if (!message) throw new ApiError('not_found', `Message ${uid} not found.`);
  return message;
}

/** A message id written as text (a URL's, a command's argument), or null when it is none. */
function messageIdOf(text: string): number | null {
  const id = /^\d{1,15}$/.test(text) ? Number(text) : 0;
  return id > 0 ? id : null;
}

/**
 * A project's message by uid or, when no uid is that text, by the id the API, the dashboard's URL
 * and SMTP submission's reply give (`queued as 4`): the CLI's way to name one (docs/cli.md).
 */
export async function findProjectMessageByUidOrId(services: Services, project: Project, text: string): Promise<Message> {
  try {
    return await findProjectMessage(services, project, text);
  } catch (error) {
    const id = messageIdOf(text);
    if (!(error instanceof ApiError) || id === null) throw error;
    const message = await findMessageWithPayload(services.store.db, id);
    if (!message || Number(message.project_id) !== project.id) throw error;
    return message;
  }
}

export interface MessageContent {
  subject: string | null;
  from: string | null;
  headers: Record<string, string>;
  text: string | null;
  /** attacker-controlled markup: show only in a sandboxed frame */
  html: string | null;
  attachments: Array<{ filename: string; contentType: string; sizeBytes: number }>;
  /** the recipient whose variables were rendered in, or null for the message's global ones */
  renderedFor: string | null;
  /**
   * where that copy was really sent: the message's recipient_override when it has one, else the
   * recipient (null when no copy was rendered and there is no override)
   */
  deliveredTo: string | null;
  /** the Message-ID header value delivery writes, brackets included (fixed at acceptance) */
  messageId: string;
}

/** The content as the given copy (or the first) received it: variables rendered, tracking not applied. */
export async function getMessageContent(services: Services, message: Message, recipient?: string): Promise<MessageContent> {
  const payload = parsePayload(message.payload);
  const copy = await findCopy(services, message, recipient);
  if (payload.raw !== undefined) return submittedContent(services, message, payload, payload.raw, copy);
  const variables = variablesFor(payload, copy);
  // As delivery renders them (domain/compose-mime.ts): the HTML part HTML-escaped, the message's syntax.
  const renderAs = payloadRenderer(payload, variables);
  const render = (t: string | null, kind: PartKind, part: string) => renderAs(t, kind, part) ?? null;
  return asShown(message, copy, () => {
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(payload.headers ?? {})) headers[name] = renderAs(value, 'header', `${name} header`)!;
    return {
      subject: render(payload.subject, 'header', 'Subject header'),
      from: render(payload.from, 'header', 'From header'),
      headers,
      text: render(payload.text, 'text', 'text part'),
      html: render(payload.html, 'html', 'HTML part'),
      attachments: (payload.attachments ?? []).map((a) => ({ filename: a.filename, contentType: a.contentType, sizeBytes: base64Bytes(a.content) })),
      renderedFor: copy?.recipient ?? null,
      deliveredTo: deliveredAddress(payload, copy),
      messageId: payload.messageId,
    };
  });
}

/**
 * A copy whose content cannot be rendered with its variables (delivery failed it with
 * RENDER_FAILED: a value that cannot be printed, a render past the limits of docs/templates.md)
 * cannot be shown as received either: a 412 that says why, not a defect.
 */
async function asShown<T>(message: Message, copy: Transmission | undefined, show: () => T | Promise<T>): Promise<T> {
  try {
    return await show();
  } catch (error) {
    if (!(error instanceof TemplateRenderError)) throw error;
    throw new ApiError('precondition_failed', `Message ${message.uid} cannot be shown${copy ? ` as composed for ${copy.recipient}` : ''}: ${error.message}`);
  }
}

/** The copy to this exact address (any of the message's, not only a first page), or the first copy. */
async function findCopy(services: Services, message: Message, recipient: string | undefined): Promise<Transmission | undefined> {
  const db = services.store.db;
  return recipient ? findMessageTransmission(db, Number(message.id), recipient) : findFirstMessageTransmission(db, Number(message.id));
}

/** Where a copy really goes (domain/message-payload.ts); with no copy, the override or null. */
function deliveredAddress(payload: MessagePayload, copy: Pick<Transmission, 'recipient'> | undefined): string | null {
  return copy ? deliveredAddressOf(payload, copy.recipient) : (payload.recipientOverride ?? null);
}

/**
 * A message submitted over SMTP (docs/smtp-submission.md): what its stored MIME says, read only
 * when a view asks for it. Every copy is those bytes, and they are the message as submitted, before
 * tracking rewrites each copy's HTML at delivery: the HTML the sender wrote, as for API messages.
 * The Message-ID is the one in those bytes (the sender's, or the one added at acceptance). MIME
 * that mailparser fails on shows as no content (subject and From as recorded at acceptance), not
 * as an error.
 */
async function submittedContent(services: Services, message: Message, payload: MessagePayload, raw: string, copy: Transmission | undefined): Promise<MessageContent> {
  let read: MimeContent | null = null;
  try {
    read = await readMimeContent(Buffer.from(raw, 'base64'));
  } catch (error) {
    services.log.warn({ err: error, message: Number(message.id) }, 'the stored MIME of a submitted message could not be read');
  }
  return {
    subject: read ? read.subject : payload.subject,
    from: read ? read.from : payload.from,
    headers: read?.headers ?? {},
    text: read?.text ?? null,
    html: read?.html ?? null,
    attachments: read?.attachments ?? [],
    renderedFor: copy?.recipient ?? null,
    deliveredTo: deliveredAddress(payload, copy),
    messageId: payload.messageId,
  };
}

/** Decoded size of base64 text (whitespace already removed at acceptance), without decoding it. */
function base64Bytes(b64: string): number {
  const padding = b64.endsWith('==') ? 2 : b64.endsWith('=') ? 1 : 0;
  return Math.floor((b64.length * 3) / 4) - padding;
}

function variablesFor(payload: MessagePayload, copy: Transmission | undefined): Variables {
  let own: Variables | null = null;
  if (copy?.variables) {
    try {
      own = JSON.parse(copy.variables) as Variables;
    } catch {
      own = null;
    }
  }
  return mergeVariables(payload.variables ?? {}, own);
}

/**
 * The MIME source of one copy as delivery composes it (the same composer, the same fixed Date and
 * Message-ID); without the DKIM signature and tracking rewrites, which are added at sending.
 */
export async function getMessageSource(services: Services, message: Message, recipient?: string): Promise<{ recipient: string | null; deliveredTo: string | null; mime: Buffer }> {
  const payload = parsePayload(message.payload);
  const copy = await findCopy(services, message, recipient);
  if (recipient && !copy) throw new ApiError('not_found', `Message ${message.uid} has no recipient ${recipient}.`);
  const composed = await asShown(message, copy, () => composeMime(payload, variablesFor(payload, copy), { date: new Date(Number(message.created_at)) }));
  if (!copy) return { recipient: null, deliveredTo: null, mime: composed.mime };
  const address = deliveredAddressOf(payload, copy.recipient);
  const parts = addressedMime(composed, address, copy.recipient_name);
  return { recipient: copy.recipient, deliveredTo: address, mime: Array.isArray(parts) ? Buffer.concat(parts) : parts };
}

export interface TimelineEntry {
  at: number;
  /** `due`: when a waiting copy (queued or retry) may next be sent: send_at, or its next retry */
  kind: 'accepted' | 'attempt' | 'opened' | 'clicked' | 'spammed' | 'completed' | 'failed' | 'bounced' | 'due';
  attempt?: Attempt;
  text?: string;
}

export interface RecipientTimeline {
  transmission: Transmission;
  /** where the copy really goes: the recipient_override, or the recipient */
  deliveredTo: string;
  entries: TimelineEntry[];
  suppression: Suppression | null;
}

export interface WebhookDeliveryItem {
  id: number;
  eventType: string | null;
  /** the endpoint's URL; only its origin when `urlReduced` */
  url: string;
  /**
   * the endpoint is account-wide (or deleted) and the view is a project-scoped user's: the URL is
   * reduced to its origin, since paths and queries carry tokens (docs/dashboard.md, "One message")
   */
  urlReduced: boolean;
  state: string;
  attempts: number;
  lastStatusCode: number | null;
  lastError: string | null;
  createdAt: number;
  recipient: string | null;
}

/** Which page of a message's copies and of its webhook deliveries to show. */
export interface MessageViewQuery {
  /**
   * only the copies whose address starts with this, case-insensitively (a whole address finds
   * itself), and the webhook deliveries of their events
   */
  recipient?: string;
  /** the copies' page: the `nextRecipients` of the page before */
  cursor?: string;
  /** the webhook deliveries' page: the `nextWebhookDeliveries` of the page before */
  webhooksCursor?: string;
  /**
   * who looks: a project-scoped dashboard user sees the full URL of its own project's endpoints
   * only, an account-wide endpoint's as its origin; absent (the operator's CLI), every URL in full
   */
  viewer?: Viewer;
}

export interface MessageView {
  message: Message;
  project: Project;
  /** send_at, when the message was scheduled for later than its acceptance; null otherwise */
  sendAt: number | null;
  /** the address every copy went to instead of its recipient, or null */
  recipientOverride: string | null;
  /** accepted in sandbox mode: its copies are answered by the sandbox, whatever the project's setting now (docs/sandbox.md) */
  sandbox: boolean;
  /** every copy of the message (not only this page's) per status */
  statuses: Record<string, number>;
  /** this page of copies, in recipient order */
  recipients: RecipientTimeline[];
  /** the recipient filter in force (trimmed), or null: it applies to the copies and to the webhook deliveries */
  recipientFilter: string | null;
  /** the cursor of the next page of copies, or null when this is the last */
  nextRecipients: string | null;
  /** this page of webhook deliveries, oldest first */
  webhookDeliveries: WebhookDeliveryItem[];
  nextWebhookDeliveries: string | null;
}

/** A keyset cursor of the message page: the id of the last row shown, as digits. */
function decodeIdCursor(text: string | undefined): number | null {
  if (!text) return null;
  if (!/^\d{1,15}$/.test(text)) throw new ApiError('call_error', 'Request could not be processed: the page cursor is malformed.');
  return Number(text);
}

/** A page of rows read with one more than shown: the rows shown and the next page's cursor. */
function pageOf<T extends { id: number | string }>(rows: T[], size: number): { shown: T[]; next: string | null } {
  const shown = rows.slice(0, size);
  return { shown, next: rows.length > size ? String(Number(shown[shown.length - 1].id)) : null };
}

export async function getMessageView(services: Services, message: Message, project: Project, query: MessageViewQuery = {}): Promise<MessageView> {
  const db = services.store.db;
  const payload = parsePayload(message.payload);
  const recipientFilter = optional(query.recipient, 300);
  const [copyRows, tallies] = await Promise.all([
    listMessageTransmissionsPage(db, { messageId: Number(message.id), afterId: decodeIdCursor(query.cursor), recipientPrefix: recipientFilter, limit: TIMELINE_PAGE_SIZE + 1 }),
    tallyMessageStatuses(db, [Number(message.id)]),
  ]);
  const { shown, next: nextRecipients } = pageOf(copyRows, TIMELINE_PAGE_SIZE);
  const [attempts, suppressions] = await Promise.all([
    listAttemptsOf(db, shown.map((t) => Number(t.id))),
    findSuppressions(db, project.id, [...new Set(shown.map((t) => suppressionKey(t.recipient)))]),
  ]);
  // An entry's address is its key (storage/suppressions.ts): found by any spelling of the recipient.
  const suppressionOf = new Map(suppressions.map((s) => [s.address, s]));
  const recipients = shown.map((t) => {
    const entries: TimelineEntry[] = [{ at: Number(t.created_at), kind: 'accepted' }];
    for (const a of attempts.filter((x) => Number(x.transmission_id) === Number(t.id))) {
      entries.push({ at: Number(a.started_at), kind: 'attempt', attempt: a });
    }
    if (t.opened_at !== null) entries.push({ at: Number(t.opened_at), kind: 'opened' });
    if (t.clicked_at !== null) entries.push({ at: Number(t.clicked_at), kind: 'clicked' });
    if (t.completed_at !== null) entries.push({ at: Number(t.completed_at), kind: 'completed', text: `${t.result_code ?? ''} ${t.result_message ?? ''}`.trim() });
    if (t.failed_at !== null) {
      const bounced = /bounce/i.test(t.result_code ?? '') || /bounce/i.test(t.result_message ?? '');
      entries.push({ at: Number(t.failed_at), kind: bounced ? 'bounced' : 'failed', text: `${t.result_code ?? ''} ${t.result_message ?? ''}`.trim() });
    }
    // After the delivery it is about (same instant in the sandbox: the sort is stable).
    if (t.spammed_at !== null) entries.push({ at: Number(t.spammed_at), kind: 'spammed', text: 'the recipient reported it as spam' });
    // A waiting copy no worker holds (a held one's next_attempt_at is its lease's end).
    if ((t.status === 'queued' || t.status === 'retry') && t.locked_by === null) entries.push({ at: Number(t.next_attempt_at), kind: 'due' });
    entries.sort((a, b) => a.at - b.at);
    return { transmission: t, deliveredTo: deliveredAddressOf(payload, t.recipient), entries, suppression: suppressionOf.get(suppressionKey(t.recipient)) ?? null };
  });
  const hookRows = await listMessageWebhookDeliveries(db, {
    messageId: Number(message.id),
    afterId: decodeIdCursor(query.webhooksCursor),
    recipientPrefix: recipientFilter,
    limit: WEBHOOK_DELIVERIES_PAGE_SIZE + 1,
  });
  // The page and its cursor are those of the rows read; a row the storage's pattern matched through
  // a variable, not its recipient, is then left out (storage/message-views.ts).
  const hooks = pageOf(hookRows, WEBHOOK_DELIVERIES_PAGE_SIZE);
  const aboutFilter = (r: { event_payload: string }) => recipientFilter === null || (recipientOfEvent(r.event_payload) ?? '').toLowerCase().startsWith(recipientFilter.toLowerCase());
  const scope = query.viewer?.scopeProject ?? null;
  const webhookDeliveries = hooks.shown.filter(aboutFilter).map((r) => {
    const reduced = scope !== null && r.webhook_project_id !== Number(scope.id);
    return {
      id: r.id,
      eventType: r.event_type,
      url: reduced ? originOf(r.url) : r.url,
      urlReduced: reduced,
      state: r.state,
      attempts: r.attempts,
      lastStatusCode: r.last_status_code,
      lastError: r.last_error,
      createdAt: r.created_at,
      recipient: recipientOfEvent(r.event_payload),
    };
  });
  const statuses: Record<string, number> = {};
  for (const t of tallies) statuses[t.status] = t.count;
  return {
    message,
    project,
    sendAt: scheduledSendAt(payload, Number(message.created_at)),
    recipientOverride: payload.recipientOverride ?? null,
    sandbox: Number(message.sandbox) === 1,
    statuses,
    recipients,
    recipientFilter,
    nextRecipients,
    webhookDeliveries,
    nextWebhookDeliveries: hooks.next,
  };
}

/** A URL's scheme, host and port, without credentials, path or query ('' when it is no URL). */
function originOf(url: string): string {
  try {
    const origin = new URL(url).origin;
    return origin === 'null' ? '' : origin;
  } catch {
    return '';
  }
}

function recipientOfEvent(payload: string): string | null {
  try {
    const recipient = (JSON.parse(payload) as { recipient?: unknown }).recipient;
    return typeof recipient === 'string' ? recipient : null;
  } catch {
    return null;
  }
}

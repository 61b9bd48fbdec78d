// What the dashboard (and the get_message_content / get_message_source API methods) show of
// messages: a keyset-paged search of one project's messages, and one message with its content,
// per-recipient timeline (attempts, opens, clicks, bounce, suppression) and the webhook deliveries
// it caused. The raw MIME is composed by the same composer delivery uses (domain/compose-mime.ts);
// a message submitted over SMTP is stored as MIME, and its content is read from it
// (domain/mime-content.ts).
import { ApiError } from '../domain/errors.ts';
import { parsePayload, type MessagePayload } from '../domain/message-payload.ts';
import { readMimeContent, type MimeContent } from '../domain/mime-content.ts';
import { mergeVariables, TemplateRenderError, type PartKind, type Variables } from '../domain/variables.ts';
import { addressedMime, composeMime, payloadRenderer } from '../domain/compose-mime.ts';
import type { Services } from '../services.ts';
import {
  findMessageUidInProject,
  findMessageWithPayload,
  listAttemptsOf,
  listMessageTransmissions,
  listOutboundOfEvents,
  listMessageEvents,
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
/** Copies of one message shown with their timelines (a message may have up to thousands). */
export const MAX_TIMELINE_RECIPIENTS = 200;
/** Events of one message read for its webhook deliveries (a few per copy: delivered, opened, clicked, bounced). */
const MAX_MESSAGE_EVENTS = 2000;

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
  const items = rows.map((message) => {
    const mine = tallies.filter((t) => t.message_id === Number(message.id));
    const statuses: Record<string, number> = {};
    for (const t of mine) statuses[t.status] = t.count;
    const firstRecipient = mine.map((t) => t.first_recipient).sort()[0] ?? null;
    return { message, statuses, firstRecipient };
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
  /** the Message-ID header value delivery writes, brackets included (fixed at acceptance) */
  messageId: string;
}

/** The content as the given copy (or the first) received it: variables rendered, tracking not applied. */
export async function getMessageContent(services: Services, message: Message, recipient?: string): Promise<MessageContent> {
  const payload = parsePayload(message.payload);
  const copies = await listMessageTransmissions(services.store.db, Number(message.id), MAX_TIMELINE_RECIPIENTS);
  const copy = recipient ? copies.find((t) => t.recipient === recipient) : copies[0];
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
export async function getMessageSource(services: Services, message: Message, recipient?: string): Promise<{ recipient: string | null; mime: Buffer }> {
  const payload = parsePayload(message.payload);
  const copies = await listMessageTransmissions(services.store.db, Number(message.id), MAX_TIMELINE_RECIPIENTS);
  const copy = recipient ? copies.find((t) => t.recipient === recipient) : copies[0];
  if (recipient && !copy) throw new ApiError('not_found', `Message ${message.uid} has no recipient ${recipient}.`);
  const composed = await asShown(message, copy, () => composeMime(payload, variablesFor(payload, copy), { date: new Date(Number(message.created_at)) }));
  if (!copy) return { recipient: null, mime: composed.mime };
  const address = payload.recipientOverride ?? copy.recipient;
  const parts = addressedMime(composed, address, copy.recipient_name);
  return { recipient: copy.recipient, mime: Array.isArray(parts) ? Buffer.concat(parts) : parts };
}

export interface TimelineEntry {
  at: number;
  kind: 'accepted' | 'attempt' | 'opened' | 'clicked' | 'spammed' | 'completed' | 'failed' | 'bounced';
  attempt?: Attempt;
  text?: string;
}

export interface RecipientTimeline {
  transmission: Transmission;
  entries: TimelineEntry[];
  suppression: Suppression | null;
}

export interface WebhookDeliveryItem {
  id: number;
  eventType: string | null;
  url: string;
  state: string;
  attempts: number;
  lastStatusCode: number | null;
  lastError: string | null;
  createdAt: number;
  recipient: string | null;
}

export interface MessageView {
  message: Message;
  project: Project;
  recipients: RecipientTimeline[];
  /** copies beyond MAX_TIMELINE_RECIPIENTS are not shown */
  truncated: boolean;
  webhookDeliveries: WebhookDeliveryItem[];
}

export async function getMessageView(services: Services, message: Message, project: Project): Promise<MessageView> {
  const db = services.store.db;
  const copies = await listMessageTransmissions(db, Number(message.id), MAX_TIMELINE_RECIPIENTS + 1);
  const truncated = copies.length > MAX_TIMELINE_RECIPIENTS;
  const shown = copies.slice(0, MAX_TIMELINE_RECIPIENTS);
  const [attempts, suppressions] = await Promise.all([
    listAttemptsOf(db, shown.map((t) => Number(t.id))),
    findSuppressions(db, project.id, [...new Set(shown.map((t) => t.recipient.toLowerCase()))]),
  ]);
  const suppressionOf = new Map(suppressions.map((s) => [s.address.toLowerCase(), s]));
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
    entries.sort((a, b) => a.at - b.at);
    return { transmission: t, entries, suppression: suppressionOf.get(t.recipient.toLowerCase()) ?? null };
  });
  const events = await listMessageEvents(db, Number(message.id), MAX_MESSAGE_EVENTS);
  const recipientOfEvent = new Map(events.map((e) => [Number(e.id), (JSON.parse(e.payload) as { recipient?: string }).recipient ?? null]));
  const outbound = await listOutboundOfEvents(db, events.map((e) => Number(e.id)));
  const webhookDeliveries = outbound.map((r) => ({
    id: Number(r.id),
    eventType: r.event_type,
    url: r.url,
    state: r.state,
    attempts: Number(r.attempts),
    lastStatusCode: r.last_status_code,
    lastError: r.last_error,
    createdAt: Number(r.created_at),
    recipient: recipientOfEvent.get(Number(r.event_id)) ?? null,
  }));
  return { message, project, recipients, truncated, webhookDeliveries };
}

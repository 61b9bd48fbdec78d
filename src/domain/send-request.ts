// send_message's arguments, read and checked in the API's order (compatibility.md):
//   readSendRequest()  arguments missing or empty (400), then every type and value check (406);
//   [the operation looks the template up: unknown is 412, before recipients]
//   acceptMessage()    the merged content, then recipients and other addresses (412).
// Duplicate uids (400) are found last, by the database's unique constraint.
// Both functions are pure: the operation (operations/send-message.ts) does the I/O around them.
import type { Args, Json } from './args.ts';
import { isPlainObject, wrongType } from './args.ts';
import { parseAttachments } from './attachments.ts';
import { ApiError, callError } from './errors.ts';
import { checkHeaderValue, isHeaderValue, parseHeaders, type MessageHeaders } from './headers.ts';
import type { PayloadAttachment } from './message-payload.ts';
import { deriveUid, readGivenUid } from './message-uid.ts';
import {
  addressKey,
  collectRecipientEntries,
  invalidAddress,
  parseMailbox,
  singleMailboxProblem,
  resolveRecipients,
  splitAddressList,
  tooManyGiven,
  type Recipient,
  type RecipientEntry,
} from './recipients.ts';
import { mergeLevels, type ContentLevel, type MergedContent, type TemplateLevel } from './templates.ts';
import { parseVariableValues, variableNamesIn, type VariableValues } from './variable-values.ts';
import { findPartSizeProblem, findTemplateSyntaxError, hasLoop, mergeVariables, renderVariables, TemplateRenderError } from './variables.ts';
import { withFields } from './objects.ts';

/** The domain of the clients' test sink: copies to it complete at acceptance, nothing is sent. */
export const NULL_SINK_DOMAIN = 'null.postageapp.com';

/**
 * A send request as every edge hands it to the send_message operation (operations/send-message.ts):
 * the API reads it from the wire with readSendRequest; other edges build it themselves.
 */
export interface SendRequest {
  /** the uid the caller gave, else the hash of the arguments (message-uid.ts: a retried call is the same message) */
  uid: string;
  template: string | null;
  /** the call's own content (content, or its alias message); null when none */
  content: ContentLevel | null;
  headers: MessageHeaders;
  recipients: RecipientEntry[];
  variables: VariableValues;
  attachments: PayloadAttachment[];
  /** as given (arguments first, else top level); validated in acceptMessage */
  recipientOverride: string | null;
  deliver: boolean;
  /** open/click tracking for this message: true or false, or null to follow the project's setting */
  tracking: boolean | null;
  /** send_at as given: when the message is due (domain/send-at.ts reads it); null or absent: now */
  sendAt?: string | null;
}

const CONTENT_PARTS = new Set(['text/plain', 'text/html', 'text/css']);

function readContent(value: Json | undefined, field: string): ContentLevel | null {
  if (value === undefined || value === null) return null;
  if (typeof value === 'string') return { subject: null, from: null, text: value, html: null, css: null };
  if (!isPlainObject(value)) {
    throw wrongType(field, 'a string or an object {"text/plain", "text/html", "text/css"}', value);
  }
  for (const key of Object.keys(value)) {
    if (!CONTENT_PARTS.has(key)) throw callError(`argument "${field}" has an unknown part ${JSON.stringify(key)} (expected text/plain, text/html or text/css)`);
  }
  const part = (key: string): string | null => {
    const v = value[key];
    if (v === undefined || v === null) return null;
    if (typeof v !== 'string') throw wrongType(`${field}.${key}`, 'a string', v);
    return v;
  };
  return { subject: null, from: null, text: part('text/plain'), html: part('text/html'), css: part('text/css') };
}

/**
 * How many addresses a request may give per address a message may have (--max-recipients),
 * duplicates included: the list is refused as soon as it passes this many, before it is all read
 * (a 20 MiB body holds millions of short addresses). No real list repeats each address ten times.
 */
export const GIVEN_PER_RECIPIENT = 10;

/** Reads the whole request; throws 400 for missing arguments and 406 for any malformed value. */
export function readSendRequest(args: Args, topLevel: { uid: Json | undefined; recipientOverride: Json | undefined; maxRecipients?: number }): SendRequest {
  if (!Object.values(args.raw).some((v) => v !== null && v !== undefined)) {
    throw new ApiError('bad_request', 'Missing arguments: send_message needs "arguments" with recipients and content or a template.');
  }
  const givenUid = readGivenUid(topLevel.uid);
  const template = args.string('template') ?? null;
  if (args.has('content') && args.has('message')) throw callError('give "content" or its alias "message", not both');
  const contentField = args.has('message') ? 'message' : 'content';
  const content = readContent(args.value(contentField), `arguments.${contentField}`);
  const headers = parseHeaders(args.value('headers'));
  const recipients = collectRecipientEntries(args.value('recipients'), 'arguments.recipients', (topLevel.maxRecipients ?? Infinity) * GIVEN_PER_RECIPIENT);
  const variables = parseVariableValues(args.value('variables'), 'arguments.variables');
  const attachments = parseAttachments(args.value('attachments'));
  let recipientOverride = args.string('recipient_override') ?? null;
  if (recipientOverride === null || recipientOverride.trim() === '') {
    const top = topLevel.recipientOverride;
    if (top !== undefined && top !== null && typeof top !== 'string') throw callError('"recipient_override" must be a string');
    recipientOverride = top ?? null;
  }
  if (recipientOverride !== null && recipientOverride.trim() === '') recipientOverride = null;
  const deliver = args.bool('deliver', true);
  const tracking = args.has('tracking') ? args.bool('tracking', false) : null;
  // arguments.subject and arguments.from: shorthands for the headers (the npm client's README
  // shows them); a header given in `headers` wins.
  for (const [field, header] of [['subject', 'subject'], ['from', 'from']] as const) {
    const value = args.string(field);
    if (value !== undefined && value !== '' && headers[header] === null) headers[header] = checkHeaderValue(`argument "${field}"`, value);
  }
  const sendAt = args.string('send_at') ?? null;
  const uid = givenUid ?? deriveUid(args.raw, topLevel.recipientOverride);
  return { uid, template: template === '' ? null : template, content, headers, recipients, variables, attachments, recipientOverride, deliver, tracking, sendAt };
}

/** One copy to send: a recipient, a Cc or a Bcc address. */
export type MessageCopy = Recipient;

export interface AcceptedMessage extends MergedContent {
  /** headers for the wire except From and Subject (Reply-To, Cc, custom) */
  headers: Record<string, string>;
  /** one entry per transmission, in request order: recipients, then Cc, then Bcc addresses */
  copies: MessageCopy[];
  /** the override's address, or null */
  recipientOverride: string | null;
}

function checkMailboxList(what: string, value: string | null, maxItems = Infinity): Recipient[] {
  if (value === null) return [];
  const items = splitAddressList(value, maxItems);
  if (items.length > maxItems) throw tooManyGiven(`arguments.headers.${what.toLowerCase()}`, maxItems);
  return resolveRecipients(items.map((text) => ({ text, variables: null })), what);
}

function checkSingleMailbox(what: string, value: string | null): void {
  // A From that holds {{variables}} is only known per recipient; it is checked for line breaks below.
  if (value === null || value.includes('{{')) return;
  const problem = singleMailboxProblem(value);
  if (problem !== null) throw invalidAddress(what, value, problem);
}

/**
 * A variable substituted into a header (Subject, From, or any other header: delivery renders
 * variables in every header value) must not bring a line break into it (header injection through
 * variables): 406 naming the variable.
 */
function checkHeaderVariables(headers: ReadonlyArray<readonly [string, string | null]>, global: VariableValues, recipients: readonly RecipientEntry[]): void {
  for (const [header, text] of headers) {
    for (const name of variableNamesIn(text)) {
      for (const v of [global[name], ...recipients.map((r) => r.variables?.[name])]) {
        // Nested values render in headers too; composition checks the rendered text (domain/compose-mime.ts).
        if (typeof v === 'string') checkHeaderValue(`variable ${JSON.stringify(name)} (used in the ${header} header)`, v);
      }
    }
  }
}

/**
 * Everything after the template lookup: merges the content into the template chain (given
 * innermost first, or null without a template), then checks recipients and the other addresses.
 */
export function acceptMessage(
  request: SendRequest,
  chain: readonly TemplateLevel[] | null,
  limits: { maxRecipients: number; /** the project's default From (operations/projects.ts defaultFromOf) */ defaultFrom: string },
): AcceptedMessage {
  const levels: ContentLevel[] = [];
  if (request.content) levels.push(request.content);
  if (chain) levels.push(...chain);
  const merged = mergeLevels(levels);
  // Headers given in the call win over the template's subject and from.
  if (request.headers.subject !== null) merged.subject = request.headers.subject;
  if (request.headers.from !== null) merged.from = request.headers.from;
  // A message always has a From: its headers, its template, or the project's default.
  merged.from ??= limits.defaultFrom;

  const headerTexts: Array<readonly [string, string | null]> = [['Subject', merged.subject], ['From', merged.from], ['Reply-To', request.headers.replyTo], ...Object.entries(request.headers.custom)];
  checkHeaderVariables(headerTexts, request.variables, request.recipients);
  const recipients = resolveRecipients(request.recipients);
  if (recipients.length === 0) throw new ApiError('precondition_failed', 'No recipients: give at least one address in "recipients".');
  for (const r of recipients) if (r.name !== null) checkHeaderValue(`the display name of recipient ${r.address}`, r.name);

  // Cc and Bcc addresses each get a copy of their own (a transmission), so none is dropped; an
  // address that is already a recipient keeps its one copy.
  const copies: MessageCopy[] = [...recipients];
  const seen = new Set(recipients.map((r) => addressKey(r.address)));
  const maxGiven = limits.maxRecipients * GIVEN_PER_RECIPIENT;
  for (const extra of [...checkMailboxList('Cc', request.headers.cc, maxGiven), ...checkMailboxList('Bcc', request.headers.bcc, maxGiven)]) {
    const key = addressKey(extra.address);
    if (seen.has(key)) continue;
    seen.add(key);
    // A Cc or Bcc copy is the main recipient's message: it renders with the first recipient's variables.
    copies.push(withFields(extra, { variables: recipients[0].variables }));
  }
  if (copies.length > limits.maxRecipients) {
    throw new ApiError(
      'precondition_failed',
      `Too many recipients: ${copies.length} addresses (Cc and Bcc included), at most ${limits.maxRecipients} per message.`,
    );
  }

  let recipientOverride: string | null = null;
  if (request.recipientOverride !== null) {
    const parsed = parseMailbox(request.recipientOverride);
    if (!parsed.ok) throw invalidAddress('recipient_override', request.recipientOverride, parsed.reason);
    recipientOverride = parsed.mailbox.address;
  }
  checkSingleMailbox('From', merged.from);
  // A Reply-To that holds {{variables}} is, like such a From, checked per copy once rendered (domain/compose-mime.ts).
  if (!request.headers.replyTo?.includes('{{')) checkMailboxList('Reply-To', request.headers.replyTo);

  // With deliver: false nothing is composed: a message without content is accepted (and completed).
  // Empty or blank texts say nothing either: `content: ""` is as empty as no content.
  const blank = (text: string | null) => text === null || text.trim() === '';
  if (request.deliver && blank(merged.subject) && blank(merged.text) && blank(merged.html) && request.attachments.length === 0) {
    throw new ApiError('precondition_failed', 'The message is empty: give "content" (or a template) with a subject, a text or an HTML part.');
  }

  const headers: Record<string, string> = {};
  checkTemplateSyntax([['subject', merged.subject], ['from', merged.from], ['text', merged.text], ['html', merged.html], ...Object.entries(request.headers.custom)]);
  if (request.headers.replyTo !== null) headers['Reply-To'] = request.headers.replyTo;
  if (request.headers.cc !== null) headers['Cc'] = request.headers.cc;
  Object.assign(headers, request.headers.custom);
  return withFields(merged, { headers, copies, recipientOverride });
}

/** The subject as the copies are sent with it: see subjectsAsSent. */
export interface SubjectsAsSent {
  /** the first copy's: the message's, in its list and search */
  message: string | null;
  /** per copy, its own where it differs from the message's (else null); null when none differs */
  copies: Array<string | null> | null;
}

/**
 * Longest subject rendered at acceptance, as written and as rendered (characters): a subject is a
 * line of a few dozen; this bounds what acceptance spends on one and what each copy stores.
 */
export const MAX_SUBJECT_RENDERED_CHARS = 4096;

/**
 * The subject each copy is sent with, rendered at acceptance as delivery renders it (header kind,
 * the global variables overridden by the copy's own: domain/compose-mime.ts), so that the message
 * list and its search show and find what recipients got (docs/templates.md, "Where variables are
 * rendered"). A subject without {{ costs nothing; else one render for the global variables and one
 * per copy that has variables of its own (a short string each: the compiled text is cached). The
 * acceptance hot path renders only what costs about its length: a subject with a block that may
 * repeat ({{#each}}, a section over a list), or longer than MAX_SUBJECT_RENDERED_CHARS written or rendered, keeps the subject as
 * accepted; so does a copy that delivery will fail for its values (RENDER_FAILED, INVALID_HEADER).
 */
export function subjectsAsSent(subject: string | null, global: VariableValues, copies: readonly MessageCopy[]): SubjectsAsSent {
  if (subject === null || !subject.includes('{{') || copies.length === 0) return { message: subject, copies: null };
  if (subject.length > MAX_SUBJECT_RENDERED_CHARS || hasLoop(subject)) return { message: subject, copies: null };
  const render = (own: VariableValues | null): string => {
    try {
      const text = renderVariables(subject, own ? mergeVariables(global, own) : global, { kind: 'header' });
      // The length first: a value repeated may make a long text, which the test would read whole.
      return text.length <= MAX_SUBJECT_RENDERED_CHARS && isHeaderValue(text) ? text : subject;
    } catch (error) {
      if (error instanceof TemplateRenderError) return subject;
      throw error;
    }
  };
  let withGlobal: string | null = null;
  const subjectOf = (own: VariableValues | null): string => {
    if (own === null || Object.keys(own).length === 0) return (withGlobal ??= render(null));
    return render(own);
  };
  const firstOwn = copies[0].variables;
  const message = subjectOf(firstOwn);
  let perCopy: Array<string | null> | null = null;
  for (let i = 1; i < copies.length; i++) {
    const own = copies[i].variables;
    // Cc and Bcc copies carry the first recipient's variables (acceptMessage): the same subject.
    if (own === firstOwn) continue;
    const text = subjectOf(own);
    if (text === message) continue;
    perCopy ??= new Array<string | null>(copies.length).fill(null);
    perCopy[i] = text;
  }
  return { message, copies: perCopy };
}

/**
 * Every part is rendered per recipient at delivery: one that is not valid template syntax, or that
 * holds {{ and is already longer than a rendered part may be, is 412 now (docs/templates.md).
 */
function checkTemplateSyntax(parts: ReadonlyArray<readonly [string, string | null]>): void {
  for (const [part, text] of parts) {
    const tooLarge = findPartSizeProblem(text);
    if (tooLarge !== null) throw new ApiError('precondition_failed', `The ${part} cannot be rendered: ${tooLarge}.`);
    const problem = findTemplateSyntaxError(text);
    if (problem !== null) throw new ApiError('precondition_failed', `The ${part} cannot be rendered: it is not valid template syntax (docs/templates.md): ${problem}`);
  }
}

/** The address a copy is actually delivered to. */
export function deliveryAddress(copy: MessageCopy, recipientOverride: string | null): string {
  return recipientOverride ?? copy.address;
}

export function isNullSink(address: string): boolean {
  return address.slice(address.lastIndexOf('@') + 1) === NULL_SINK_DOMAIN;
}

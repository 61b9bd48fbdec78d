// submit_message: accept one SMTP transaction (docs/smtp-submission.md) into the same pipeline as
// send_message: ONE transaction holding one message INSERT and one multi-row transmissions INSERT,
// committed by the same durable store write as the API's. The SMTP edge answers 250 only after
// this resolves.
//
//   recipients checked (the API's address check) -> header section checked (no NUL, no bare CR or
//   LF, every line a field), an empty line added after it when missing, bare CR and LF in the body
//   written CRLF, no line over 998 octets -> the message's identity, its uid (the uid header; else the
//   Message-ID with the envelope; else a new one) -> tracking header read -> Bcc, Resent-Bcc, the
//   uid and tracking headers and a Message-ID without a msg-id removed, Received added, Message-ID
//   and Date added when missing -> store message + one transmission per RCPT TO -> wake delivery
//
// A uid the project already has is the retransmission of a message accepted before: answered as
// accepted, with that message's id, and nothing stored (docs/smtp-submission.md, "The uid").
//
// The MIME is kept as sent: only whole header fields are removed or added at the top, and line
// breaks written CRLF; every other byte is stored and delivered unchanged (payload.raw,
// domain/message-payload.ts).
import { createHash, randomUUID } from 'node:crypto';
import { simpleParser } from 'mailparser';
import { checkHeaderValue, HeaderValueError } from '../domain/headers.ts';
import type { MessagePayload } from '../domain/message-payload.ts';
import { MAX_UID_CHARS, messageIdFor, readMsgId, uniqueIdFor } from '../domain/message-uid.ts';
import { checkAddrSpec } from '../domain/recipients.ts';
import { isNullSink } from '../domain/send-request.ts';
import { isDuplicate } from '../storage/duplicates.ts';
import { findMessageByUid } from '../storage/reports.ts';
import { storeAcceptedMessage, type AcceptedCopy } from '../storage/messages.ts';
import type { ProjectCaller } from './context.ts';
import { acceptsInSandbox } from './projects.ts';
import type { Services } from '../services.ts';
import { messageUrl, recordAcceptanceEvents, RESULT_NULL_SINK, type SentMessage } from './send-message.ts';
import { recordMessageAccepted } from '../observability/attempts.ts';

/** Headers that name the message's uid (docs/smtp-submission.md); removed before delivery. */
export const UID_HEADERS = ['x-posthorn-uid', 'x-postageapp-uid'] as const;

/**
 * `X-Posthorn-Tracking: on | off`: the message's own tracking choice over the project's setting
 * (payload.tracking; docs/smtp-submission.md, "Open and click tracking"); removed before delivery.
 */
export const TRACKING_HEADER = 'x-posthorn-tracking';

/** Fields removed from every submitted message (docs/smtp-submission.md, "What happens to a message"). */
const DROPPED_FIELDS = new Set<string>(['bcc', 'resent-bcc', ...UID_HEADERS, TRACKING_HEADER]);

export interface SubmitMessageInput {
  /** MAIL FROM (the envelope sender; '' for the null sender) */
  envelopeFrom: string;
  /** RCPT TO addresses, in order: one transmission each */
  recipients: readonly string[];
  /** the message as received in DATA, dot-unstuffed, CRLF line ends */
  raw: Buffer;
  /** the client, for the Received field added at the top (absent: none added) */
  trace?: SubmissionTrace;
}

/** Who handed the message over, as the Received field says it (RFC 5321 4.4). */
export interface SubmissionTrace {
  /** the name the client gave in EHLO (or HELO); '' when none */
  ehlo: string;
  /** the client's IP address */
  address: string;
  /** "ESMTPSA" and the like: EHLO (E), TLS (S), authenticated (A) */
  protocol: string;
  /** the TLS version and cipher, or null without TLS */
  tls: { version: string; cipher: string } | null;
}

/** The longest line a message may hold, CRLF not counted (RFC 5322 2.1.1, RFC 5321 4.5.3.1.6). */
export const MAX_LINE_OCTETS = 998;

/** The message a submission is; `repeated` when it was accepted before and nothing was stored now. */
export interface SubmittedMessage extends SentMessage {
  repeated: boolean;
}

/**
 * Why a submission is refused: the SMTP edge answers `code` with `text` (an enhanced status code
 * first). Not an ApiError: these answers exist only on the SMTP edge.
 */
export class SubmissionRefused extends Error {
  constructor(
    readonly code: number,
    readonly text: string,
  ) {
    super(text);
  }
}

interface HeaderField {
  /** lower-case name */
  name: string;
  /** start and end (exclusive, after the CRLF) of the field's lines in the header section */
  start: number;
  end: number;
  /** the unfolded value, UTF-8, trimmed */
  value: string;
}

const FIELD_NAME = /^[\x21-\x39\x3b-\x7e]+$/;
const CRLF = Buffer.from('\r\n');
const HEADER_END = Buffer.from('\r\n\r\n');

export async function submitMessage(services: Services, caller: ProjectCaller, input: SubmitMessageInput): Promise<SubmittedMessage> {
  if (input.recipients.length === 0) throw new SubmissionRefused(554, '5.5.1 No valid recipients');
  if (input.recipients.length > services.config.maxRecipients) {
    throw new SubmissionRefused(452, `4.5.3 At most ${services.config.maxRecipients} recipients per message`);
  }
  const senderRefused = checkSubmissionSender(input.envelopeFrom);
  if (senderRefused) throw senderRefused;
  for (const recipient of input.recipients) {
    const refused = checkSubmissionRecipient(recipient);
    if (refused) throw refused;
  }
  if (input.raw.length === 0) throw new SubmissionRefused(550, '5.6.0 The message is empty');
  const split = splitHeaderSection(input.raw);
  // A bare CR or LF in the body becomes CRLF, as delivery would write a bare LF and as the API
  // writes both (the header section refuses them, below); then no line may pass 998 octets.
  split.rest = crlfLineBreaks(split.rest);
  checkLineLengths(split.header);
  checkLineLengths(split.rest);
  const fields = readHeaderFields(split.header);
  const first = (name: string) => fields.find((f) => f.name === name);

  // A Message-ID field that holds no msg-id (an empty one, a bare word) is replaced, not kept
  // beside the one added: the first field that holds one is the message's.
  let messageId: string | null = null;
  for (const field of fields) {
    if (field.name === 'message-id' && messageId === null) messageId = readMsgId(field.value);
  }
  const given = UID_HEADERS.map(first).find((f) => f !== undefined);
  const uid = given ? readUidHeader(given.value) : messageId !== null ? messageIdUid(input, messageId) : randomUUID();
  const trackingField = first(TRACKING_HEADER);
  const tracking = trackingField ? readTrackingHeader(trackingField.value) : null;
  const now = services.clock.now();

  // Removed: Bcc and Resent-Bcc (their recipients are in the envelope; the header must not reach
  // anyone, RFC 5322 3.6.3 and 3.6.6), the uid and tracking headers (instructions to this
  // service), a Message-ID field without a msg-id. Added at the top when missing: Message-ID (made
  // from the uid, as for the API) and Date (acceptance time). Everything else is kept byte for
  // byte.
  const dropped = (field: HeaderField) => DROPPED_FIELDS.has(field.name) || (field.name === 'message-id' && readMsgId(field.value) === null);
  const added: string[] = [];
  // The trace field first (RFC 5321 4.4: the receiving server prepends it; RFC 6409 8).
  if (input.trace) added.push(receivedField(input.trace, services.config.mailerHost, given ? null : uid, new Date(now)));
  if (messageId === null) {
    messageId = messageIdFor(uid, services.config.mailerHost);
    added.push(`Message-ID: ${messageId}\r\n`);
  }
  if (!first('date')) added.push(`Date: ${rfc5322Date(new Date(now))}\r\n`);
  if (!first('from')) {
    // As a submission MTA does for a local sender: the envelope sender becomes the From.
    if (input.envelopeFrom === '') throw new SubmissionRefused(550, '5.6.0 The message has no From header and the envelope sender is empty');
    added.push(`From: <${checkedHeaderValue('From', input.envelopeFrom)}>\r\n`);
  }
  const parts: Buffer[] = [Buffer.from(added.join(''), 'utf8')];
  let cursor = 0;
  for (const field of fields) {
    if (!dropped(field)) continue;
    parts.push(split.header.subarray(cursor, field.start));
    cursor = field.end;
  }
  parts.push(split.header.subarray(cursor), split.rest);
  const mime = Buffer.concat(parts);

  // Subject and From for every report (messages table and payload): the header values as written,
  // unfolded; RFC 2047 encoded words decoded (mailparser, on the header section alone) only when
  // there are some, which keeps the common case off the parser.
  const fromHeader = first('from')?.value ?? `<${input.envelopeFrom}>`;
  let subject = first('subject')?.value ?? null;
  let fromText = fromHeader;
  if (fromHeader.includes('=?') || (subject !== null && subject.includes('=?'))) {
    const parsed = await simpleParser(Buffer.concat([split.header, CRLF]), { skipHtmlToText: true, skipTextToHtml: true, skipImageLinks: true, skipTextLinks: true });
    subject = parsed.subject ?? subject;
    fromText = parsed.from?.text || fromHeader;
  }

  const payload: MessagePayload = {
    v: 2,
    messageId,
    from: fromText,
    subject,
    text: null,
    html: null,
    headers: {},
    variables: {},
    attachments: [],
    recipientOverride: null,
    tracking,
    raw: mime.toString('base64'),
  };
  const payloadJson = JSON.stringify(payload);
  const copies: AcceptedCopy[] = input.recipients.map((recipient) => ({
    recipient,
    recipientName: null,
    variables: null,
    // Sent as submitted: every copy's subject is the message's.
    subject: null,
    completed: isNullSink(recipient) ? RESULT_NULL_SINK : null,
  }));
  const completedNow = copies.some((copy) => copy.completed !== null);
  const uniqueId = uniqueIdFor(uid, services.config.mailerHost);
  // The mode is the message's own from now on, whatever the project's setting later (docs/sandbox.md).
  const sandbox = acceptsInSandbox(caller.project);
  const stored = await storeAcceptedMessage(
    services.store,
    {
      message: { project_id: caller.project.id, uid, unique_id: uniqueId, template: null, subject, from_address: fromText, deliver: 1, created_at: now, send_at: null, sandbox: sandbox ? 1 : 0, payload: payloadJson },
      copies,
      dueAt: now,
    },
    completedNow ? (trx, messageId) => recordAcceptanceEvents(trx, caller, { id: messageId, uid, uniqueId, sandbox }, { variables: {}, recipientOverride: null }, now) : undefined,
  );
  if (isDuplicate(stored)) return knownMessage(services, caller, uid);
  const id = stored.id;
  if (copies.some((copy) => copy.completed === null)) services.store.wake('transmissions');
  recordMessageAccepted(services, copies.length);
  return { id, url: messageUrl(services, id), uid, repeated: false };
}

/**
 * A submission whose identity the project already has: the retransmission of a message accepted
 * before (a client that lost the 250 sends it again), answered as accepted and stored no second
 * time. The message may be gone between the two reads (the retention purge): the client is told
 * to try again, and its next try stores it anew.
 */
async function knownMessage(services: Services, caller: ProjectCaller, uid: string): Promise<SubmittedMessage> {
  const existing = await findMessageByUid(services.store.db, caller.project.id, uid);
  if (!existing) throw new SubmissionRefused(451, '4.3.0 Temporary failure, try again later');
  const id = Number(existing.id);
  return { id, url: messageUrl(services, id), uid, repeated: true };
}

/**
 * Why the SMTP edge refuses `address` at RCPT TO, or null when it takes it: the address check of
 * the API's recipients (domain/recipients.ts), so that nothing answered 250 there fails later as
 * an address delivery cannot use (an address literal, a domain of one label).
 */
/** The envelope sender (MAIL FROM) as the API checks a From address; the null sender <> passes. */
export function checkSubmissionSender(address: string): SubmissionRefused | null {
  if (address === '') return null;
  const checked = checkAddrSpec(address);
  return checked.ok ? null : new SubmissionRefused(553, `5.1.7 The sender address is not accepted: ${checked.reason}`);
}

export function checkSubmissionRecipient(address: string): SubmissionRefused | null {
  const checked = checkAddrSpec(address);
  return checked.ok ? null : new SubmissionRefused(553, `5.1.3 The recipient address is not accepted: ${checked.reason}`);
}

/**
 * The Received field of a submitted message, as Postfix writes it: the client's EHLO name and
 * address (no reverse lookup: "unknown"), the TLS version and cipher, this host, the protocol
 * (ESMTPSA...), the message's uid when Posthorn made it (a sender's uid header stays between the
 * sender and Posthorn) and the time of acceptance. Nothing of the credentials
 * (docs/smtp-submission.md, "What happens to a message").
 */
export function receivedField(trace: SubmissionTrace, host: string, uid: string | null, date: Date): string {
  const address = trace.address.replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/i, '');
  const literal = address.includes(':') ? `IPv6:${address}` : address;
  // The EHLO name is the client's word: only the characters of a host name or an address literal.
  const ehlo = trace.ehlo.replace(/[^A-Za-z0-9.\-_:[\]]/g, '?') || `[${address}]`;
  const lines = [`Received: from ${ehlo} (unknown [${safeAtom(literal)}])`];
  if (trace.tls) lines.push(`\t(using ${safeAtom(trace.tls.version)} with cipher ${safeAtom(trace.tls.cipher)})`);
  const id = uid !== null ? ` id ${safeAtom(uid)}` : '';
  lines.push(`\tby ${host} (Posthorn) with ${safeAtom(trace.protocol)}${id};`, `\t${rfc5322Date(date)} (UTC)`);
  return `${lines.join('\r\n')}\r\n`;
}

function safeAtom(text: string): string {
  return text.replace(/[^\x21-\x7e]|[()]/g, '?');
}

/** The body with every bare CR and bare LF written CRLF; the same Buffer when it has none. */
export function crlfLineBreaks(body: Buffer): Buffer {
  // Found with indexOf (native): a byte loop in JavaScript costs ~40 ms on a 10 MB message.
  let bare = -1;
  for (let i = body.indexOf(0x0a); i !== -1; i = body.indexOf(0x0a, i + 1)) {
    if (i === 0 || body[i - 1] !== 0x0d) {
      bare = i;
      break;
    }
  }
  for (let i = body.indexOf(0x0d); i !== -1 && (bare === -1 || i < bare); i = body.indexOf(0x0d, i + 1)) {
    if (body[i + 1] !== 0x0a) {
      bare = i;
      break;
    }
  }
  if (bare === -1) return body;
  const out = Buffer.allocUnsafe(bare + (body.length - bare) * 2);
  body.copy(out, 0, 0, bare);
  let o = bare;
  for (let i = bare; i < body.length; i++) {
    const c = body[i];
    if (c === 0x0d) {
      out[o++] = 0x0d;
      out[o++] = 0x0a;
      if (body[i + 1] === 0x0a) i++;
    } else if (c === 0x0a) {
      out[o++] = 0x0d;
      out[o++] = 0x0a;
    } else out[o++] = c;
  }
  return out.subarray(0, o);
}

/**
 * Refuses a line longer than MAX_LINE_OCTETS (CRLF line ends). Such a line is not relayed
 * cut or wrapped: that would change a message its sender may have signed; the sender encodes it
 * (quoted-printable, base64) and sends again (docs/smtp-submission.md, "Long lines").
 */
function checkLineLengths(text: Buffer): void {
  let start = 0;
  for (;;) {
    const lf = text.indexOf(0x0a, start);
    const end = lf === -1 ? text.length : lf - 1;
    if (end - start > MAX_LINE_OCTETS) {
      throw new SubmissionRefused(550, `5.6.0 A line of the message is longer than ${MAX_LINE_OCTETS} octets (RFC 5322 2.1.1); send it quoted-printable or base64`);
    }
    if (lf === -1) return;
    start = lf + 1;
  }
}

/** The header section (with the CRLF ending its last line) and the rest (blank line and body). */
function splitHeaderSection(raw: Buffer): { header: Buffer; rest: Buffer } {
  if (raw.length >= 2 && raw[0] === 0x0d && raw[1] === 0x0a) return { header: raw.subarray(0, 0), rest: raw };
  const end = raw.indexOf(HEADER_END);
  if (end === -1) {
    // No body: the whole message is header fields; its last line must still end in CRLF, and the
    // empty line that ends a header section follows (RFC 5322 3.5: the body may be empty, that
    // line may not; the DKIM signer needs it too, delivery/dkim-signing.ts).
    const header = raw.length >= 2 && raw[raw.length - 2] === 0x0d && raw[raw.length - 1] === 0x0a ? raw : Buffer.concat([raw, CRLF]);
    return { header, rest: CRLF };
  }
  return { header: raw.subarray(0, end + 2), rest: raw.subarray(end + 2) };
}

/**
 * The fields of a header section, refusing what a header line must never hold: NUL, a CR not
 * followed by LF, an LF not preceded by CR (each would let one line be read as two by some
 * reader downstream), and a line that is neither a field nor a folded continuation.
 */
export function readHeaderFields(header: Buffer): HeaderField[] {
  const fields: HeaderField[] = [];
  let lineStart = 0;
  let current: { name: string; start: number; lines: string[] } | null = null;
  const close = (end: number) => {
    if (current) {
      // The one header-value check of every edge (domain/headers.ts), on the unfolded value.
      const value = checkedHeaderValue(current.name, current.lines.join(''));
      fields.push({ name: current.name, start: current.start, end, value: value.trim() });
    }
    current = null;
  };
  for (let i = 0; i < header.length; i++) {
    const c = header[i];
    if (c === 0) throw new SubmissionRefused(550, '5.6.0 A header line contains a NUL byte');
    if (c === 0x0d && header[i + 1] !== 0x0a) throw new SubmissionRefused(550, '5.6.0 A header line contains a bare CR');
    if (c === 0x0a && (i === 0 || header[i - 1] !== 0x0d)) throw new SubmissionRefused(550, '5.6.0 A header line contains a bare LF');
    if (c !== 0x0a) continue;
    const line = header.subarray(lineStart, i - 1).toString('utf8');
    if (line.startsWith(' ') || line.startsWith('\t')) {
      if (!current) throw new SubmissionRefused(550, '5.6.0 The header section starts with a continuation line');
      (current as { lines: string[] }).lines.push(line);
    } else {
      close(lineStart);
      const colon = line.indexOf(':');
      // White space between the name and the colon is the obsolete syntax receivers must take
      // (RFC 5322 4.5: obs-optional, "Bcc : x"): the name is what precedes it.
      const name = colon > 0 ? line.slice(0, colon).replace(/[ \t]+$/, '') : '';
      if (!FIELD_NAME.test(name)) throw new SubmissionRefused(550, `5.6.0 Malformed header line: ${JSON.stringify(line.slice(0, 60))}`);
      current = { name: name.toLowerCase(), start: lineStart, lines: [line.slice(colon + 1)] };
    }
    lineStart = i + 1;
  }
  close(lineStart);
  return fields;
}

/** A value this operation itself puts into a header line, through the same check. */
function checkedHeaderValue(name: string, value: string): string {
  try {
    return checkHeaderValue(`header "${name}"`, value);
  } catch (error) {
    if (error instanceof HeaderValueError) throw new SubmissionRefused(550, `5.6.0 ${error.message}`);
    throw error;
  }
}

/** on: tracked even when the project has tracking off; off: never tracked. */
function readTrackingHeader(value: string): boolean {
  const choice = value.toLowerCase();
  if (choice === 'on') return true;
  if (choice === 'off') return false;
  throw new SubmissionRefused(550, '5.6.0 X-Posthorn-Tracking must be on or off');
}

function readUidHeader(value: string): string {
  if (value === '') throw new SubmissionRefused(550, '5.6.0 The uid header is empty');
  if (value.length > MAX_UID_CHARS) throw new SubmissionRefused(550, `5.6.0 The uid header must be at most ${MAX_UID_CHARS} characters long`);
  return value;
}

/**
 * The uid of a message without a uid header that has a Message-ID: the SHA-256 (hex) of the
 * envelope (sender, recipients) and the msg-id. A client that sends a message again after losing
 * the 250 sends the same Message-ID to the same envelope, and that is the message accepted before;
 * the same Message-ID from another sender or to other recipients is another message.
 */
export function messageIdUid(input: SubmitMessageInput, msgId: string): string {
  const recipients = [...input.recipients].sort();
  return createHash('sha256').update(`smtp-message-id\0${input.envelopeFrom}\0${recipients.join('\0')}\0${msgId}`).digest('hex');
}

const DAYS = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];
const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

/** RFC 5322 date-time in UTC ("Tue, 24 Nov 2026 01:02:03 +0000"). */
export function rfc5322Date(date: Date): string {
  const two = (n: number) => String(n).padStart(2, '0');
  return `${DAYS[date.getUTCDay()]}, ${date.getUTCDate()} ${MONTHS[date.getUTCMonth()]} ${date.getUTCFullYear()} ${two(date.getUTCHours())}:${two(date.getUTCMinutes())}:${two(date.getUTCSeconds())} +0000`;
}


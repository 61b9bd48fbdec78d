// MIME composition with Nodemailer's MailComposer (its tree built directly where mime-build.ts
// compileMail can), once per message.
//
// The expensive part of a message (parts, attachments re-encoded, the Message-ID and Date fixed at
// acceptance) is built ONCE per distinct content and cached by the caller; what differs per
// recipient is only the To header, which is prepended (header order carries no
// meaning, RFC 5322 3.6). Content differs per recipient only when the message has {{variables}}
// (then one build per distinct set of recipient variables) or when tracking rewrites the HTML (then
// one build per transmission).
import { randomUUID } from 'node:crypto';
import { domainToASCII } from 'node:url';
import mimeFuncs from 'nodemailer/lib/mime-funcs/index.js';
import { checkRenderedHeader, HeaderValueError } from './headers.ts';
import { mailboxListProblem, parseMailbox, singleMailboxProblem, splitAddressList } from './recipients.ts';
import { buildMimeNow, compileMail, formatDisplayName, outgrowsLine, parseAddressHeader, type MailOptions, type PreparedHeader } from './mime-build.ts';
import type { MessagePayload } from './message-payload.ts';
import { renderVariables, TemplateRenderError, type PartKind, type Variables } from './variables.ts';

export interface ComposedMime {
  /** the whole message except the To header (unless `addressed`) */
  mime: Buffer;
  /**
   * true for a stored raw message (SMTP submission): the MIME carries its own To/Cc and goes to
   * every recipient unchanged, with no To line prepended.
   */
  addressed?: boolean;
  /** the bare address of the rendered From header (DKIM key lookup), or null */
  fromAddress: string | null;
}

const CRLF = Buffer.from('\r\n');

/**
 * A stored message (CRLF line ends) with the empty line that ends its header section: the message
 * as given when it has one (or starts with it), else its header fields followed by an empty line
 * and an empty body (RFC 5322 3.5: the body is optional, the empty line before it is what ends
 * the header section). Submission adds it at acceptance; messages stored before that get it at
 * delivery, where the DKIM signer needs it (docs/smtp-submission.md).
 */
export function withHeaderEnd(mime: Buffer): Buffer {
  if (mime.length === 0 || (mime[0] === 0x0d && mime[1] === 0x0a) || mime.includes('\r\n\r\n')) return mime;
  const endsInCrlf = mime.length >= 2 && mime[mime.length - 2] === 0x0d && mime[mime.length - 1] === 0x0a;
  return Buffer.concat(endsInCrlf ? [mime, CRLF] : [mime, CRLF, CRLF]);
}

/** True when any part of the content has a {{variable}}: content then differs per recipient. */
export function payloadHasVariables(payload: MessagePayload): boolean {
  if (payload.raw !== undefined) return false;
  const texts = [payload.from, payload.subject, payload.text, payload.html, ...Object.values(payload.headers ?? {})];
  return texts.some((t) => typeof t === 'string' && t.includes('{{'));
}

/**
 * Renders the payload's texts with `variables` as delivery does (the message views show the same):
 * escaping follows the part (domain/variables.ts), HTML-escaped in the HTML part only. Rows accepted
 * before the template language keep their plain substitution (payload.syntax absent).
 */
export function payloadRenderer(payload: MessagePayload, variables: Variables) {
  const syntax = payload.syntax ?? 'legacy';
  return (text: string | null | undefined, kind: PartKind = 'header', part?: string): string | undefined => {
    if (typeof text !== 'string') return undefined;
    try {
      return renderVariables(text, variables, { kind, syntax });
    } catch (error) {
      // Which part could not be rendered, for the copy's result message (docs/delivery.md).
      if (error instanceof TemplateRenderError && part) throw new TemplateRenderError(`The ${part} could not be rendered with the recipient's variables: ${error.message}`);
      throw error;
    }
  };
}

export async function composeMime(
  payload: MessagePayload,
  variables: Variables,
  opts: { date: Date; transformHtml?: (html: string) => string },
): Promise<ComposedMime> {
  // Submitted over SMTP: sent as stored, byte for byte (docs/smtp-submission.md). Nothing is
  // rendered ({{ }} in such a message is content); tracking, when it applies, rewrites each
  // transmission's copy of these bytes (delivery/message-contexts.ts, domain/rewrite-html-parts.ts).
  if (payload.raw !== undefined) return { mime: withHeaderEnd(Buffer.from(payload.raw, 'base64')), fromAddress: firstAddress(payload.from ?? undefined), addressed: true };
  const render = payloadRenderer(payload, variables);
  // Every rendered header value goes through the header check (domain/headers.ts): a substituted
  // variable must not bring a control character onto the wire.
  const from = checkRenderedHeader('From', render(payload.from, 'header', 'From header'));
  // A From with {{variables}} is checked at acceptance only for line breaks (domain/send-request.ts):
  // rendered, it must still be exactly one address, or the copy fails (no retry can fix it).
  if (from !== undefined && payload.from?.includes('{{')) checkRenderedAddresses('From', from, singleMailboxProblem, 'one address');
  let html = render(payload.html, 'html', 'HTML part');
  if (html !== undefined && opts.transformHtml) html = opts.transformHtml(html);
  html = crlfLineEnds(html);
  const headers: Record<string, string | PreparedHeader> = {};
  let cc: MailboxList | undefined;
  let replyTo: MailboxList | undefined;
  for (const [name, value] of Object.entries(payload.headers ?? {})) {
    const lower = name.toLowerCase();
    // To is ours (per recipient, prepended); everything else goes as given.
    if (lower === 'to') continue;
    const rendered = checkRenderedHeader(name, render(value, 'header', `${name} header`))!;
    // A Reply-To with {{variables}} is checked here, once rendered (domain/send-request.ts): it must be addresses.
    if (value.includes('{{') && lower === 'reply-to') checkRenderedAddresses('Reply-To', rendered, mailboxListProblem, 'a list of addresses');
    const mailboxes = lower === 'cc' || lower === 'reply-to' ? mailboxesOf(rendered) : null;
    if (mailboxes && lower === 'cc') cc = mailboxes;
    else if (mailboxes) replyTo = mailboxes;
    else headers[name] = headerWithinLines(name, rendered);
  }
  const subject = checkRenderedHeader('Subject', render(payload.subject, 'header', 'Subject header'));
  const text = crlfLineEnds(render(payload.text, 'text', 'text part'));
  const fromMailboxes = from === undefined ? null : mailboxesOf(from);
  const mail: MailOptions = {
    from: fromMailboxes?.length === 1 ? fromMailboxes[0] : from,
    cc,
    replyTo,
    subject: subject === undefined ? subject : headerWithinLines('Subject', subject),
    text,
    html,
    headers,
    messageId: payload.messageId,
    date: opts.date,
    attachments: (payload.attachments ?? []).map((a) => ({
      filename: a.filename,
      contentType: attachmentContentType(a.contentType),
      content: a.content,
      encoding: 'base64',
    })),
    textEncoding: preferredTextEncoding(text, html),
    // The accepted content is data: never let it name files or URLs to embed.
    disableFileAccess: true,
    disableUrlAccess: true,
    // The random part of the multipart boundaries, drawn once per message (Nodemailer would draw
    // one for every part, each a call into the system's random source, and use only the root's).
    baseBoundary: randomUUID().replace(/-/g, ''),
  };
  const tree = compileMail(mail);
  const mime = buildMimeNow(tree) ?? (await tree.build());
  return { mime, fromAddress: fromMailboxes ? fromMailboxes[0].address : firstAddress(from) };
}

type MailboxList = Array<{ name: string; address: string }>;

/**
 * An address header's mailboxes as domain/recipients.ts reads them, the reading acceptance checked,
 * for MimeNode to write (the names by mime-build.ts formatDisplayName): Nodemailer's own reader,
 * given the text, would read some of what acceptance takes otherwise (an unquoted `;` or `:` in a
 * name as a group, a nested comment, a quoted local part without its quotes). Null when the value
 * is not a list of mailboxes (a message stored before these checks): it then goes as the text.
 * Each caller gets objects of its own: MimeNode changes them (normalised addresses).
 */
function mailboxesOf(value: string): MailboxList | null {
  const list = memoisedMailboxes(value);
  return list && list.map((m) => ({ name: m.name, address: m.address }));
}

/**
 * Reading a From costs a few µs, a tenth of composing the message, for a From that is the same in
 * every message of a project: short values are memoised (bounded), as mime-build.ts memoises
 * Nodemailer's own reading.
 */
function memoisedMailboxes(value: string): MailboxList | null {
  if (value.length > MAX_MEMOISED_LENGTH) return readMailboxes(value);
  let list = mailboxMemo.get(value);
  if (list === undefined) {
    list = readMailboxes(value);
    // Values come from stored messages: a flood of distinct ones empties the memo.
    if (mailboxMemo.size >= MAX_MEMOISED_VALUES) mailboxMemo.clear();
    mailboxMemo.set(value, list);
  }
  return list;
}
const MAX_MEMOISED_LENGTH = 256;
const MAX_MEMOISED_VALUES = 10_000;
const mailboxMemo = new Map<string, MailboxList | null>();

function readMailboxes(value: string): MailboxList | null {
  const list: MailboxList = [];
  for (const item of splitAddressList(value)) {
    const parsed = parseMailbox(item);
    if (!parsed.ok) return null;
    list.push({ name: parsed.mailbox.name ?? '', address: parsed.mailbox.address });
  }
  return list.length > 0 ? list : null;
}

/**
 * An address header whose {{variables}} acceptance could not check (domain/send-request.ts), as
 * rendered for this copy: `problemOf` its defect, or the copy fails (no retry can fix it).
 */
function checkRenderedAddresses(header: string, rendered: string, problemOf: (value: string) => string | null, expected: string): void {
  const problem = problemOf(rendered);
  if (problem !== null) throw new HeaderValueError('call_error', `The ${header} header after variable substitution is not ${expected} (${problem}): ${JSON.stringify(rendered.slice(0, 200))}.`);
}

/**
 * Headers MimeNode writes in a syntax of their own (addresses, message ids, dates, MIME headers),
 * where encoded-words would not be read as what they encode.
 */
const STRUCTURED_HEADERS = new Set(['from', 'sender', 'to', 'cc', 'bcc', 'reply-to', 'message-id', 'in-reply-to', 'references', 'content-id', 'date', 'content-type', 'content-disposition', 'content-transfer-encoding', 'mime-version']);

/**
 * The value of an unstructured header (the Subject, a custom header) as it fits RFC 5322's line
 * limit: as given, unless folding cannot keep its lines within 998 octets; then the whole value as
 * RFC 2047 encoded-words of at most 52 characters each (Nodemailer's encoder and split) that
 * Nodemailer folds between the words, a line each, and a reader joins back into the value
 * (docs/api/send-message.md, "Headers"). Only then: a custom header may have a syntax of its own
 * (List-Unsubscribe) that encoded-words would hide, and one that fits is left as it is.
 */
function headerWithinLines(name: string, value: string): string | PreparedHeader {
  if (!outgrowsLine(name.length + 2, value) || STRUCTURED_HEADERS.has(name.toLowerCase())) return value;
  return { prepared: true, foldLines: true, value: mimeFuncs.encodeWord(value, 'Q', 52) };
}

/**
 * An attachment's Content-Type as given (type/subtype and parameters, charset kept), without the
 * file name parameters it may carry (`name`, `filename`, in any case, RFC 2231 forms included):
 * MimeNode writes the attachment's file name as the one `name`, and as the Content-Disposition
 * filename, so one given here would be written twice, or contradict it (docs/api/send-message.md,
 * "Attachments"). A type without them, every usual one, is returned as it is.
 */
function attachmentContentType(contentType: string): string {
  if (!/name/i.test(contentType)) return contentType;
  const structured = mimeFuncs.parseHeaderValue(contentType);
  // parseHeaderValue lower-cases the names and joins a parameter's RFC 2231 parts into one.
  if (!('name' in structured.params) && !('filename' in structured.params)) return contentType;
  delete structured.params.name;
  delete structured.params.filename;
  return mimeFuncs.buildHeaderValue(structured);
}

/**
 * A body part with every line end CRLF, when it holds a CR. A CR not followed by LF is no line end
 * in SMTP (RFC 5321 2.3.8), yet some servers take it for one: the smuggling that SMTP submission
 * refuses (docs/smtp-submission.md). Nodemailer's 7bit and quoted-printable parts keep CR and LF
 * as they are, so a lone CR would reach the wire; a bare LF is made CRLF there
 * (delivery/smtp-pipelining.ts), so a part without any CR, the usual one, is returned as it is,
 * without a pass over it.
 */
function crlfLineEnds(text: string | undefined): string | undefined {
  return text === undefined || text.indexOf('\r') === -1 || onlyCrlf(text) ? text : text.replace(/\r\n?|\n/g, '\r\n');
}

/** Whether every CR of `text` is followed by LF and every LF follows a CR (a part written with CRLF, as most are). */
function onlyCrlf(text: string): boolean {
  for (let i = text.indexOf('\r'); i !== -1; i = text.indexOf('\r', i + 1)) if (text.charCodeAt(i + 1) !== 10) return false;
  for (let i = text.indexOf('\n'); i !== -1; i = text.indexOf('\n', i + 1)) if (text.charCodeAt(i - 1) !== 13) return false;
  return true;
}

/**
 * Quoted-printable for mostly Latin text, base64 otherwise: the rule Nodemailer applies to each
 * part when not told, computed here in one allocation-free pass over all the text. Nodemailer's
 * own detection builds an array of every letter, for every part, more than once per build: it
 * was the largest single cost of composing a message (--cpu-prof, bench/). Text with nothing
 * that counts against Latin (printable ASCII and line breaks, the usual) is recognised first by
 * a regular expression, which scans several times quicker than a loop reads characters: then one
 * letter decides.
 */
export function preferredTextEncoding(...texts: Array<string | undefined>): 'quoted-printable' | 'base64' {
  if (!texts.some((text) => text && NOT_LATIN.test(text))) return texts.some((text) => text && LATIN_LETTER.test(text)) ? 'quoted-printable' : 'base64';
  let latin = 0;
  let other = 0;
  for (const text of texts) {
    if (!text) continue;
    for (let i = 0; i < text.length; i++) {
      const c = text.charCodeAt(i);
      if ((c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a)) latin++;
      else if (c >= 0x80 || (c < 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d)) other++;
    }
  }
  return other < latin ? 'quoted-printable' : 'base64';
}
/** What preferredTextEncoding counts against Latin: beyond ASCII, or a control character other than tab, CR and LF. */
const NOT_LATIN = /[\x00-\x08\x0b\x0c\x0e-\x1f\u0080-\uffff]/;
const LATIN_LETTER = /[A-Za-z]/;

/** Above this size a copy is sent as its two parts rather than copied into one buffer. */
const COPY_LIMIT_BYTES = 256 * 1024;

/**
 * The message for one recipient: its To header line, then the shared MIME. Small messages are one
 * buffer (cheapest to write); large ones stay two parts, so 64 copies in flight of a 20 MB message
 * share its bytes instead of holding 64 copies of them.
 */
export function addressedMime(composed: ComposedMime, recipient: string, recipientName: string | null): Buffer | Buffer[] {
  if (composed.addressed) return composed.mime;
  const line = `To: ${formatAddressHeader(recipient, recipientName)}`;
  // Folded at its white space when it would pass 76 characters, as Nodemailer folds the others.
  const to = Buffer.from(`${line.length > 76 ? mimeFuncs.foldLines(line, 76) : line}\r\n`, 'utf8');
  return composed.mime.length > COPY_LIMIT_BYTES ? [to, composed.mime] : Buffer.concat([to, composed.mime]);
}

/** "Name <address>" for the To line, the name written as every address header writes it (mime-build.ts formatDisplayName). */
export function formatAddressHeader(address: string, name: string | null): string {
  const bare = address.replace(/[\r\n<>]/g, '');
  const cleanName = (name ?? '').replace(/[\r\n]+/g, ' ').trim();
  if (!cleanName) return `<${bare}>`;
  return `${formatDisplayName(cleanName, 'To: '.length)} <${bare}>`;
}

function firstAddress(header: string | undefined): string | null {
  if (!header) return null;
  type Parsed = ReturnType<typeof parseAddressHeader>;
  // addressparser's { flatten: true }: the members of groups in place of the groups.
  const flat = (list: Parsed): Parsed => list.flatMap((a) => (a.group ? flat(a.group) : [a]));
  return flat(parseAddressHeader(header))[0]?.address || null;
}

/**
 * The address as it goes into RCPT TO: the domain in its ASCII (IDNA) form; the local part as
 * given (Nodemailer announces SMTPUTF8 when it needs to). Null when there is no domain.
 */
export function envelopeAddress(address: string): { address: string; domain: string } | null {
  const at = address.lastIndexOf('@');
  if (at <= 0 || at === address.length - 1) return null;
  const domain = domainToASCII(address.slice(at + 1).trim().toLowerCase());
  if (!domain) return null;
  return { address: `${address.slice(0, at)}@${domain}`, domain };
}

// The text/html parts of a finished MIME message rewritten, every other byte kept as it is: how
// open and click tracking reaches a message submitted over SMTP (docs/smtp-submission.md, "Open and
// click tracking"; docs/tracking.md). Pure: bytes in, bytes out.
//
// What is rewritten: each text/html leaf that is not an attachment, at any depth of nested
// multiparts (mixed > alternative > related). Its body is decoded (Content-Transfer-Encoding, then
// its charset), handed to `rewrite`, and encoded again the same way: quoted-printable and base64
// stay so; a 7bit, 8bit or binary body stays as it is unless a rewritten line would be longer than
// the 998 octets a line may have (RFC 5322 2.1.1), and then it becomes quoted-printable and that
// part's Content-Transfer-Encoding field says so. Line breaks follow the part's own (CRLF, or LF).
//
// What is never touched: the header section (but that one field), the preamble and epilogue,
// boundary lines, every other part (text/plain, images, attachments, an attached message/rfc822
// and what it holds), an HTML part with Content-Disposition: attachment. A part is also left as
// sent when rewriting it could change more than its HTML: a transfer encoding other than 7bit,
// 8bit, binary, quoted-printable or base64; a charset the codec does not know, or bytes that do not
// decode and re-encode to themselves in it (8-bit bytes in a us-ascii part, invalid UTF-8); a
// rewritten body that would hold a boundary line of an enclosing multipart.
//
// A part without a charset is read as UTF-8 (US-ASCII's superset: the same for ASCII content).
import iconv from 'iconv-lite';
import libqp from 'libqp';
import base64 from 'nodemailer/lib/base64/index.js';
import mimeFuncs from 'nodemailer/lib/mime-funcs/index.js';

/** What is done to each HTML part: the decoded HTML in, the HTML to send out. */
export type HtmlRewrite = (html: string) => string;

/** RFC 5322 2.1.1: at most 998 octets on a line, its CRLF not counted. */
const MAX_LINE_OCTETS = 998;
/** Line length of the quoted-printable and base64 bodies written here (RFC 2045 6.7, 6.8). */
const ENCODED_LINE_CHARS = 76;
/** Multiparts nested deeper than this are left as they are. */
const MAX_DEPTH = 32;

const LF = 0x0a;
const CR = 0x0d;

interface HeaderField {
  /** lower case */
  name: string;
  /** the field's first byte and the byte after its last line break (folded lines included) */
  start: number;
  end: number;
  /** unfolded, as latin1 (a byte per character) */
  value: string;
}

interface Entity {
  fields: HeaderField[];
  /** where the blank line ending the header section starts (end of the entity when there is none) */
  headerEnd: number;
  /** the body: from after the blank line to the line break before the next boundary line */
  bodyStart: number;
  bodyEnd: number;
  /** false when the header section has no blank line after it, so there is no body */
  hasBody: boolean;
  /** the line break the entity's header section uses */
  eol: '\r\n' | '\n';
}

interface Edit {
  start: number;
  end: number;
  bytes: Buffer;
}

/**
 * The message with `rewrite` applied to each of its HTML parts (see the top of this file). When no
 * part is rewritten, the very same Buffer is returned.
 */
export function rewriteHtmlParts(mime: Buffer, rewrite: HtmlRewrite): Buffer {
  const edits: Edit[] = [];
  visitEntity(mime, 0, mime.length, [], 0, rewrite, edits);
  if (edits.length === 0) return mime;
  edits.sort((a, b) => a.start - b.start);
  const chunks: Buffer[] = [];
  let cursor = 0;
  for (const edit of edits) {
    chunks.push(mime.subarray(cursor, edit.start), edit.bytes);
    cursor = edit.end;
  }
  chunks.push(mime.subarray(cursor));
  return Buffer.concat(chunks);
}

function visitEntity(mime: Buffer, start: number, end: number, boundaries: readonly string[], depth: number, rewrite: HtmlRewrite, edits: Edit[]): void {
  const entity = readEntity(mime, start, end);
  if (!entity.hasBody) return;
  const type = parseField(entity, 'content-type') ?? { value: 'text/plain', params: {} };
  if (type.value.startsWith('multipart/')) {
    const boundary = type.params.boundary;
    if (typeof boundary !== 'string' || boundary === '' || depth >= MAX_DEPTH) return;
    const inner = [...boundaries, boundary];
    for (const part of bodyParts(mime, entity.bodyStart, entity.bodyEnd, boundary)) visitEntity(mime, part.start, part.end, inner, depth + 1, rewrite, edits);
    return;
  }
  // message/rfc822 and every other type: content, not ours to change.
  if (type.value !== 'text/html') return;
  if (parseField(entity, 'content-disposition')?.value === 'attachment') return;
  rewriteHtmlPart(mime, entity, type.params.charset, boundaries, rewrite, edits);
}

function rewriteHtmlPart(mime: Buffer, entity: Entity, charsetParam: unknown, boundaries: readonly string[], rewrite: HtmlRewrite, edits: Edit[]): void {
  const encodingField = entity.fields.find((f) => f.name === 'content-transfer-encoding');
  const encoding = (encodingField?.value ?? '7bit').trim().toLowerCase();
  const body = mime.subarray(entity.bodyStart, entity.bodyEnd);
  const decoded = decodeBody(body, encoding);
  if (decoded === null) return;
  const charset = typeof charsetParam === 'string' && charsetParam.trim() !== '' ? charsetParam.trim() : 'utf-8';
  const html = decodeExactly(decoded, charset);
  if (html === null) return;
  const rewritten = rewrite(html);
  if (rewritten === html) return;
  const bytes = encodeExactly(rewritten, charset);
  if (bytes === null) return;

  let written = encoding;
  if (encoding === '7bit' || encoding === '8bit' || encoding === 'binary') {
    const longest = longestLine(bytes);
    const newEightBit = encoding === '7bit' && hasEightBit(bytes) && !hasEightBit(decoded);
    if (longest > MAX_LINE_OCTETS || newEightBit) written = 'quoted-printable';
  }
  const encoded = encodeBody(bytes, written, entity.eol, body.length > 0 && body[body.length - 1] === LF);
  if (holdsDelimiter(encoded, boundaries)) return;

  if (written !== encoding) {
    const field = Buffer.from(`Content-Transfer-Encoding: ${written}${entity.eol}`, 'latin1');
    edits.push(encodingField ? { start: encodingField.start, end: encodingField.end, bytes: field } : { start: entity.headerEnd, end: entity.headerEnd, bytes: field });
  }
  edits.push({ start: entity.bodyStart, end: entity.bodyEnd, bytes: encoded });
}

/** The header fields of the entity in [start, end) and where its body is. */
function readEntity(mime: Buffer, start: number, end: number): Entity {
  const fields: HeaderField[] = [];
  let eol: '\r\n' | '\n' | null = null;
  let current: HeaderField | null = null;
  let pos = start;
  while (pos < end) {
    let lf = mime.indexOf(LF, pos);
    if (lf === -1 || lf >= end) lf = end;
    const next = lf < end ? lf + 1 : end;
    const contentEnd = lf < end && lf > pos && mime[lf - 1] === CR ? lf - 1 : lf;
    if (eol === null && lf < end) eol = contentEnd < lf ? '\r\n' : '\n';
    if (contentEnd === pos) {
      return { fields, headerEnd: pos, bodyStart: next, bodyEnd: end, hasBody: true, eol: eol ?? '\r\n' };
    }
    const first = mime[pos];
    if (first === 0x20 || first === 0x09) {
      // A folded continuation: part of the field above (a stray one before any field is ignored).
      if (current) {
        current.value += mime.toString('latin1', pos, contentEnd);
        current.end = next;
      }
    } else {
      const line = mime.toString('latin1', pos, contentEnd);
      const colon = line.indexOf(':');
      current = colon > 0 ? { name: line.slice(0, colon).trim().toLowerCase(), start: pos, end: next, value: line.slice(colon + 1) } : null;
      if (current) fields.push(current);
    }
    pos = next;
  }
  return { fields, headerEnd: end, bodyStart: end, bodyEnd: end, hasBody: false, eol: eol ?? '\r\n' };
}

/** The value (lower case) and parameters of the entity's first field of that name. */
function parseField(entity: Entity, name: string): { value: string; params: Record<string, unknown> } | null {
  const field = entity.fields.find((f) => f.name === name);
  if (!field) return null;
  const parsed = mimeFuncs.parseHeaderValue(field.value);
  return { value: String(parsed.value || '').trim().toLowerCase(), params: parsed.params ?? {} };
}

/**
 * The body parts of a multipart body [start, end) (RFC 2046 5.1.1): each runs from after its
 * boundary line to the line break before the next one, which belongs to that boundary line. A
 * multipart without its closing boundary line ends with its last part (as mail readers take it).
 */
function bodyParts(mime: Buffer, start: number, end: number, boundary: string): Array<{ start: number; end: number }> {
  const delimiter = Buffer.from(`--${boundary}`, 'latin1');
  const parts: Array<{ start: number; end: number }> = [];
  let partStart = -1;
  let pos = start;
  while (pos < end) {
    const at = mime.indexOf(delimiter, pos);
    if (at === -1 || at + delimiter.length > end) break;
    pos = at + 1;
    if (at !== start && mime[at - 1] !== LF) continue;
    let i = at + delimiter.length;
    const closing = i + 1 < end && mime[i] === 0x2d && mime[i + 1] === 0x2d;
    if (closing) i += 2;
    while (i < end && (mime[i] === 0x20 || mime[i] === 0x09)) i++;
    if (i < end && mime[i] === CR && i + 1 < end && mime[i + 1] === LF) i++;
    if (i < end && mime[i] !== LF) continue; // more on the line: content that starts like a boundary
    if (partStart !== -1) parts.push({ start: partStart, end: Math.max(partStart, lineBreakBefore(mime, at, start)) });
    if (closing) return parts;
    partStart = Math.min(i + 1, end);
    pos = partStart;
  }
  if (partStart !== -1) parts.push({ start: partStart, end });
  return parts;
}

/** Where the line break just before `at` (a line start) begins; `at` itself at the start of the range. */
function lineBreakBefore(mime: Buffer, at: number, min: number): number {
  if (at === min) return at;
  const lf = at - 1;
  return lf > min && mime[lf - 1] === CR ? lf - 1 : lf;
}

function decodeBody(body: Buffer, encoding: string): Buffer | null {
  switch (encoding) {
    case '7bit':
    case '8bit':
    case 'binary':
      return body;
    case 'quoted-printable':
      return libqp.decode(body);
    case 'base64':
      return Buffer.from(body.toString('latin1'), 'base64');
    default:
      return null;
  }
}

function encodeBody(bytes: Buffer, encoding: string, eol: '\r\n' | '\n', endsWithLineBreak: boolean): Buffer {
  if (encoding === 'quoted-printable') {
    // libqp keeps CR and LF as they are: the part's own line breaks stay hard line breaks, any
    // other CR or LF is encoded so it cannot become one.
    const escaped = eol === '\r\n' ? libqp.encode(bytes).replace(/\r(?!\n)/g, '=0D').replace(/(?<!\r)\n/g, '=0A') : libqp.encode(bytes).replace(/\r/g, '=0D');
    const wrapped = libqp.wrap(escaped, ENCODED_LINE_CHARS);
    return Buffer.from(eol === '\n' ? wrapped.replace(/=\r\n/g, '=\n') : wrapped, 'latin1');
  }
  if (encoding === 'base64') {
    // The line break after the last line is not content: as the part had it.
    const lines = base64.wrap(bytes.toString('base64'), ENCODED_LINE_CHARS).replace(/\r\n$/, '');
    const text = eol === '\n' ? lines.replace(/\r\n/g, '\n') : lines;
    return Buffer.from(endsWithLineBreak ? text + eol : text, 'latin1');
  }
  return bytes;
}

/** The text when the bytes decode in the charset and encode back to the same bytes, else null. */
function decodeExactly(bytes: Buffer, charset: string): string | null {
  if (!iconv.encodingExists(charset)) return null;
  const text = iconv.decode(bytes, charset, { stripBOM: false });
  return iconv.encode(text, charset, { addBOM: false }).equals(bytes) ? text : null;
}

/** The bytes of the text in the charset, or null when it holds a character the charset has not. */
function encodeExactly(text: string, charset: string): Buffer | null {
  if (!iconv.encodingExists(charset)) return null;
  const bytes = iconv.encode(text, charset, { addBOM: false });
  return iconv.decode(bytes, charset, { stripBOM: false }) === text ? bytes : null;
}

/** The longest line, in octets, its line break not counted. */
function longestLine(bytes: Buffer): number {
  let longest = 0;
  let start = 0;
  while (start <= bytes.length) {
    let lf = bytes.indexOf(LF, start);
    if (lf === -1) lf = bytes.length;
    const length = lf - start - (lf > start && bytes[lf - 1] === CR ? 1 : 0);
    if (length > longest) longest = length;
    start = lf + 1;
  }
  return longest;
}

function hasEightBit(bytes: Buffer): boolean {
  for (let i = 0; i < bytes.length; i++) if (bytes[i] >= 0x80) return true;
  return false;
}

/** True when a line of the body starts like a boundary line of an enclosing multipart. */
function holdsDelimiter(body: Buffer, boundaries: readonly string[]): boolean {
  for (const boundary of boundaries) {
    const delimiter = Buffer.from(`--${boundary}`, 'latin1');
    for (let at = body.indexOf(delimiter); at !== -1; at = body.indexOf(delimiter, at + 1)) {
      if (at === 0 || body[at - 1] === LF) return true;
    }
  }
  return false;
}

// arguments.attachments of send_message:
//   {"file.pdf": {"content_type": "application/pdf", "content": "<base64>"}}
// The base64 may be wrapped (Ruby's Base64.encode64 adds a newline every 60 characters): all
// whitespace is removed before it is checked and stored. Padding may be omitted. Extra keys of an
// attachment are ignored. content_type may carry parameters ("text/plain; charset=utf-8"); when
// absent it is application/octet-stream. Every failure is 406 call_error naming the file.
//
// An attachment is one leaf part of the message: a multipart/* type (its boundary would not be
// honoured, the part is written as base64 data) and the message/* types but message/rfc822 (a
// message/partial, external-body, delivery-status... is not a file to attach) are refused. An
// attached message (message/rfc822) is written as it is, as 8bit, never base64 (RFC 2046 5.2.1):
// its content must be such a message's bytes, with no NUL, no CR that does not end a line, and no
// line over 998 octets (RFC 5322 2.1.1), or it would reach the wire as it is. Its lines ending in
// LF alone are stored ending in CRLF, as they go on the wire: the DKIM signature is made over the
// bytes sent.
import type { Json } from './args.ts';
import { isPlainObject, wrongType } from './args.ts';
import { callError, type ApiError } from './errors.ts';
import type { PayloadAttachment } from './message-payload.ts';

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
const WHITESPACE = /[\s]+/g;
/** type/subtype, then optional parameters; no line breaks (it becomes a header). */
const CONTENT_TYPE = /^[A-Za-z0-9!#$&^_.+-]+\/[A-Za-z0-9!#$&^_.+-]+(\s*;[^\r\n]*)?$/;

function fileError(filename: string, why: string): ApiError {
  return callError(`attachment ${JSON.stringify(filename)} ${why}`);
}

/** Normalises base64 (whitespace removed, padding restored); null when it is not base64. */
export function normalizeBase64(text: string): string | null {
  const compact = text.includes('\n') || text.includes(' ') || text.includes('\r') || text.includes('\t') ? text.replace(WHITESPACE, '') : text;
  if (!BASE64.test(compact)) return null;
  const body = compact.replace(/=+$/, '');
  if (body.length % 4 === 1) return null;
  const padded = body + '='.repeat((4 - (body.length % 4)) % 4);
  // Given padding must be the right padding ("QQ=" is neither padded nor unpadded).
  if (compact.length !== body.length && compact.length !== padded.length) return null;
  return padded;
}

export function parseAttachments(value: Json | undefined, field = 'arguments.attachments'): PayloadAttachment[] {
  if (value === undefined || value === null) return [];
  if (!isPlainObject(value)) {
    throw wrongType(field, 'an object keyed by file name', value);
  }
  const out: PayloadAttachment[] = [];
  for (const [filename, spec] of Object.entries(value)) {
    if (spec === null) continue;
    if (filename.trim() === '' || /[\r\n\0]/.test(filename)) throw fileError(filename, 'has an empty file name or one with a line break');
    if (!isPlainObject(spec)) throw fileError(filename, 'must be an object {"content_type": ..., "content": <base64>}');
    const rawType = spec.content_type ?? null;
    if (rawType !== null && typeof rawType !== 'string') throw fileError(filename, 'has a content_type that is not a string');
    const contentType = rawType === null || rawType.trim() === '' ? 'application/octet-stream' : rawType.trim();
    if (!CONTENT_TYPE.test(contentType)) throw fileError(filename, `has an invalid content_type ${JSON.stringify(contentType)} (expected type/subtype)`);
    const mediaType = contentType.split(';', 1)[0].trim().toLowerCase();
    if (mediaType.startsWith('multipart/') || (mediaType.startsWith('message/') && mediaType !== 'message/rfc822')) {
      throw fileError(filename, `has the content_type ${JSON.stringify(mediaType)}, which is not a type of attachment (multipart/* and message/* but message/rfc822 are refused)`);
    }
    const content = spec.content ?? null;
    if (typeof content !== 'string') throw fileError(filename, content === null ? 'has no content' : 'has content that is not a base64 string');
    const base64 = normalizeBase64(content);
    if (base64 === null) throw fileError(filename, 'has content that is not valid base64');
    let stored = base64;
    if (mediaType === 'message/rfc822') {
      const bytes = Buffer.from(base64, 'base64');
      const problem = attachedMessageProblem(bytes);
      if (problem !== null) throw fileError(filename, `is a message/rfc822 whose content ${problem}`);
      stored = withCrlf(bytes)?.toString('base64') ?? base64;
    }
    out.push({ filename, contentType, content: stored });
  }
  return out;
}

/** RFC 5322 2.1.1: a line is at most 998 octets, its line break not counted. */
const MAX_LINE_OCTETS = 998;

/** Why `bytes` cannot be written as an attached message's 8bit body, or null. */
function attachedMessageProblem(bytes: Buffer): string | null {
  if (bytes.includes(0x00)) return 'holds a NUL byte';
  for (let cr = bytes.indexOf(0x0d); cr !== -1; cr = bytes.indexOf(0x0d, cr + 1)) {
    if (bytes[cr + 1] !== 0x0a) return 'holds a CR that does not end a line';
  }
  let lineStart = 0;
  for (;;) {
    const lf = bytes.indexOf(0x0a, lineStart);
    const end = lf === -1 ? bytes.length : lf > 0 && bytes[lf - 1] === 0x0d ? lf - 1 : lf;
    if (end - lineStart > MAX_LINE_OCTETS) return `has a line longer than ${MAX_LINE_OCTETS} octets`;
    if (lf === -1) return null;
    lineStart = lf + 1;
  }
}

/** `bytes` with every LF that no CR precedes written as CRLF, or null when there is none. */
function withCrlf(bytes: Buffer): Buffer | null {
  let bare = 0;
  for (let lf = bytes.indexOf(0x0a); lf !== -1; lf = bytes.indexOf(0x0a, lf + 1)) if (lf === 0 || bytes[lf - 1] !== 0x0d) bare++;
  if (bare === 0) return null;
  const out = Buffer.allocUnsafe(bytes.length + bare);
  let o = 0;
  for (let i = 0; i < bytes.length; i++) {
    if (bytes[i] === 0x0a && (i === 0 || bytes[i - 1] !== 0x0d)) out[o++] = 0x0d;
    out[o++] = bytes[i];
  }
  return out;
}

// The uid of a message and the identifiers made from it.
//
// - The top-level `uid` names the message: a string, or a number (one client sends numbers), kept
//   as its text. "" counts as no uid. At most MAX_UID_CHARS characters.
// - Without a uid, the uid is the SHA-256 (hex) of the canonical JSON of the arguments: object
//   keys sorted, null members left out (null means absent), no whitespace. An identical resend has
//   the same uid and is refused as a duplicate. A top-level recipient_override counts as if it
//   were in the arguments (it changes what is sent).
// - unique_id (history) is `<uid>@<mailer host>`, exactly. The Message-ID header is
//   `<local@mailer host>` where local is the uid when it is a valid RFC 5322 dot-atom without "%";
//   otherwise every byte (UTF-8) outside that alphabet, every "%" and every dot that would start,
//   end or double a dot-atom is written %XX (so the mapping is reversible and two uids never share
//   a Message-ID); a local part longer than 200 characters becomes "sha256." + the hex SHA-256 of
//   the uid (header lines stay short).
import { createHash } from 'node:crypto';
import { describeJsonType, longerThan, type Json } from './args.ts';
import { callError } from './errors.ts';

export const MAX_UID_CHARS = 255;
/** Deepest nesting of the arguments that is hashed: a bound, so hostile input cannot exhaust the stack. */
export const MAX_ARGUMENT_NESTING = 64;
const MAX_MESSAGE_ID_LOCAL = 200;

/** The uid the caller gave, as a string; null when none (absent, null or ""). */
export function readGivenUid(raw: Json | undefined): string | null {
  if (raw === undefined || raw === null || raw === '') return null;
  let uid: string;
  if (typeof raw === 'string') uid = raw;
  else if (typeof raw === 'number') uid = String(raw);
  else {
    throw callError(`"uid" must be a string or a number, got ${describeJsonType(raw)}`);
  }
  if (longerThan(uid, MAX_UID_CHARS)) {
    throw callError(`"uid" must be at most ${MAX_UID_CHARS} characters long`);
  }
  return uid;
}

/**
 * Appends the canonical JSON of value to out. Built as one string and hashed once: many small
 * hash updates (each a call into native code) cost more than the string (V8 concatenates ropes).
 */
function writeCanonical(value: Json, depth: number, out: string[]): void {
  if (value === null || typeof value !== 'object') {
    out[0] += JSON.stringify(value);
    return;
  }
  if (depth >= MAX_ARGUMENT_NESTING) {
    throw callError(`"arguments" is nested deeper than ${MAX_ARGUMENT_NESTING} levels`);
  }
  if (Array.isArray(value)) {
    out[0] += '[';
    for (let i = 0; i < value.length; i++) {
      if (i > 0) out[0] += ',';
      writeCanonical(value[i], depth + 1, out);
    }
    out[0] += ']';
    return;
  }
  out[0] += '{';
  let first = true;
  for (const key of Object.keys(value).sort()) {
    const member = value[key];
    if (member === null || member === undefined) continue;
    if (!first) out[0] += ',';
    first = false;
    out[0] += JSON.stringify(key) + ':';
    writeCanonical(member, depth + 1, out);
  }
  out[0] += '}';
}

/** The canonical JSON of a value: object keys sorted, null members left out, no whitespace. */
export function canonicalJson(value: Json): string {
  const out = [''];
  writeCanonical(value, 0, out);
  return out[0];
}

/** SHA-256 hex of the canonical JSON of the arguments (with a top-level recipient_override folded in). */
export function deriveUid(args: { [key: string]: Json }, topLevelRecipientOverride?: Json): string {
  const effective =
    topLevelRecipientOverride !== undefined && topLevelRecipientOverride !== null && (args.recipient_override ?? null) === null
      ? { ...args, recipient_override: topLevelRecipientOverride }
      : args;
  return createHash('sha256').update(canonicalJson(effective)).digest('hex');
}

/** `<uid>@<mailer host>`: the history unique_id. */
export function uniqueIdFor(uid: string, mailerHost: string): string {
  return `${uid}@${mailerHost}`;
}

const ATEXT_NO_PERCENT = /^[A-Za-z0-9!#$&'*+\-/=?^_`{|}~]$/;
const SAFE_DOT_ATOM = /^[A-Za-z0-9!#$&'*+\-/=?^_`{|}~]+(?:\.[A-Za-z0-9!#$&'*+\-/=?^_`{|}~]+)*$/;

/** The Message-ID's left part for a uid (see the rule at the top of this file). */
export function messageIdLocalPart(uid: string): string {
  let local: string;
  if (SAFE_DOT_ATOM.test(uid)) local = uid;
  else {
    local = '';
    const bytes = Buffer.from(uid, 'utf8');
    for (let i = 0; i < bytes.length; i++) {
      const ch = String.fromCharCode(bytes[i]);
      const dotAllowed = ch === '.' && i > 0 && i < bytes.length - 1 && bytes[i - 1] !== 0x2e;
      local += bytes[i] < 0x80 && (ATEXT_NO_PERCENT.test(ch) || dotAllowed) ? ch : `%${bytes[i].toString(16).toUpperCase().padStart(2, '0')}`;
    }
  }
  if (local.length > MAX_MESSAGE_ID_LOCAL) local = `sha256.${createHash('sha256').update(uid).digest('hex')}`;
  return local;
}

/** The Message-ID header value, with its angle brackets. */
export function messageIdFor(uid: string, mailerHost: string): string {
  return `<${messageIdLocalPart(uid)}@${mailerHost}>`;
}

/**
 * A msg-id (RFC 5322 3.6.4), read as mail in use writes it: "<", something, "@", something, ">"
 * with no white space or angle bracket inside, and around it only white space and comments (a
 * comment without nested parentheses). Returns the msg-id alone ("<left@right>"), or null when the
 * value holds none (an empty Message-ID field, a bare word, two ids). One pass, no regex that could
 * backtrack: the value is a header line of any length.
 */
export function readMsgId(value: string): string | null {
  let i = skipCfws(value, 0);
  if (i === -1 || value[i] !== '<') return null;
  const close = value.indexOf('>', i);
  if (close === -1) return null;
  const inner = value.slice(i + 1, close);
  if (inner.length < 3 || inner[0] === '@' || inner[inner.length - 1] === '@' || !inner.includes('@') || MSG_ID_FORBIDDEN.test(inner)) return null;
  i = skipCfws(value, close + 1);
  return i === value.length ? `<${inner}>` : null;
}

const MSG_ID_FORBIDDEN = /[\s<>]/;

/** The index after the white space and simple comments from `start`; -1 at an unclosed comment. */
function skipCfws(value: string, start: number): number {
  let i = start;
  while (i < value.length) {
    const c = value[i];
    if (c === ' ' || c === '\t') i++;
    else if (c === '(') {
      const end = value.indexOf(')', i);
      if (end === -1 || value.lastIndexOf('(', end) !== i) return -1;
      i = end + 1;
    } else break;
  }
  return i;
}

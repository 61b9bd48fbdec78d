// arguments.headers of send_message: header name to value, names case-insensitive.
//
// - from/From, subject/Subject, reply-to/Reply-To/reply_to, cc/CC, bcc are recognised in any case
//   (and with "_" for "-", as the Ruby gem's ActionMailer integration spells them).
// - Composition headers are written by the service when the mail is composed, so the request's
//   values are ignored: MIME-Version (mime_version), Content-Type, Content-Transfer-Encoding,
//   charset, Date. (ActionMailer sends mime_version and charset with every message.)
// - To, Message-ID and Return-Path are refused (406): recipients say who gets the mail, the uid
//   fixes the Message-ID, and the return path carries bounces back to the service.
// - Any other valid name is a custom header, sent with its name exactly as given.
// - A value is a string (a number or boolean is taken as its text; null means absent; Cc, Bcc and
//   Reply-To also take a list of addresses). A value holding CR or LF (or NUL) would let the caller
//   inject headers: 406 call_error naming the header.
//
// checkHeaderValue() is the one check of every value bound for a header line, whatever its source
// (docs/reliability.md): send_message's headers, recipients' display names and From, template
// subjects and From (at save and when read), variables substituted into headers (at acceptance and
// again at composition, domain/compose-mime.ts), and SMTP submission.
import type { Json } from './args.ts';
import { describeJsonType, isPlainObject, wrongType } from './args.ts';
import { ApiError, callError } from './errors.ts';

export interface MessageHeaders {
  from: string | null;
  subject: string | null;
  replyTo: string | null;
  cc: string | null;
  bcc: string | null;
  /** custom headers, names exactly as given */
  custom: Record<string, string>;
}

type Known = 'from' | 'subject' | 'replyTo' | 'cc' | 'bcc';

const KNOWN: Record<string, { key: Known; wire: string; list: boolean }> = {
  from: { key: 'from', wire: 'From', list: false },
  subject: { key: 'subject', wire: 'Subject', list: false },
  'reply-to': { key: 'replyTo', wire: 'Reply-To', list: true },
  cc: { key: 'cc', wire: 'Cc', list: true },
  bcc: { key: 'bcc', wire: 'Bcc', list: true },
};

const IGNORED = new Set(['mime-version', 'content-type', 'content-transfer-encoding', 'charset', 'date']);

const REFUSED: Record<string, string> = {
  to: 'is not accepted: the recipients argument says who gets the message',
  'message-id': 'is not accepted: the Message-ID is made from the message uid (give "uid" instead)',
  'return-path': 'is not accepted: the service sets the return path so that bounces come back to it',
};

/** RFC 5322 field-name: printable ASCII except colon, no spaces. */
const FIELD_NAME = /^[\x21-\x39\x3b-\x7e]+$/;
/**
 * What a header value may not hold: CR and LF (a line break is header injection), NUL (PostgreSQL
 * cannot store it and RFC 5322 forbids it) and every other C0 control and DEL. Tab is folding
 * white space and stays allowed.
 */
const FORBIDDEN_IN_VALUE = /[\x00-\x08\x0a-\x1f\x7f]/;

/**
 * The value, unchanged, when it may go into a header line; else 406 call_error naming `field` (a
 * description such as 'header "Subject"') and the character found.
 */
export function checkHeaderValue(field: string, value: string): string {
  const found = FORBIDDEN_IN_VALUE.exec(value);
  if (found === null) return value;
  const code = `U+${found[0].charCodeAt(0).toString(16).toUpperCase().padStart(4, '0')}`;
  const reason = `${field} must not contain a line break (CR or LF), NUL or other control character (found ${code} at offset ${found.index})`;
  throw new HeaderValueError('call_error', callError(reason).message);
}

/** Whether the value may go into a header line as it is (what checkHeaderValue checks, as a test). */
export function isHeaderValue(value: string): boolean {
  return !FORBIDDEN_IN_VALUE.test(value);
}

/**
 * Thrown by checkHeaderValue(): a 406 at the API; at composition (after variable substitution) the
 * transmission fails with INVALID_HEADER instead of being retried, since no retry can change it.
 */
export class HeaderValueError extends ApiError {}

/** A header's value as rendered for one recipient (domain/compose-mime.ts): checked again, since
 * substitution may bring in what the accepted template did not hold. */
export function checkRenderedHeader(name: string, value: string | undefined): string | undefined {
  return value === undefined ? value : checkHeaderValue(`the ${name} header after variable substitution`, value);
}

function headerValue(name: string, value: Json, list: boolean): string {
  let text: string;
  if (typeof value === 'string') text = value;
  else if (typeof value === 'number' || typeof value === 'boolean') text = String(value);
  else if (list && Array.isArray(value)) {
    // Each item is one address; a null is absent (as everywhere in the API), anything else that is
    // not a string is named by its place.
    value.forEach((v, i) => {
      if (v !== null && typeof v !== 'string') throw callError(`header "${name}"[${i}] must be an address (a string), got ${describeJsonType(v)}`);
    });
    text = (value as Array<string | null>).filter((v) => v !== null).join(', ');
  } else throw callError(`header "${name}" must be a string${list ? ' or a list of addresses' : ''}, got ${describeJsonType(value)}`);
  return checkHeaderValue(`header "${name}"`, text);
}

export function parseHeaders(value: Json | undefined, field = 'arguments.headers'): MessageHeaders {
  const out: MessageHeaders = { from: null, subject: null, replyTo: null, cc: null, bcc: null, custom: {} };
  if (value === undefined || value === null) return out;
  if (!isPlainObject(value)) throw wrongType(field, 'an object', value);
  const given = new Map<string, string>();
  for (const [name, raw] of Object.entries(value)) {
    if (!FIELD_NAME.test(name)) throw callError(`${JSON.stringify(name)} is not a valid header name (printable ASCII, no spaces or colons)`);
    const lookup = name.toLowerCase().replace(/_/g, '-');
    // Own keys only: "constructor" or "toString" is a custom header like any other, not Object's.
    const known = Object.hasOwn(KNOWN, lookup) ? KNOWN[lookup] : undefined;
    // reply_to and Reply-To are the same header; so are X-Tag and x-tag.
    const identity = known ? lookup : name.toLowerCase();
    const earlier = given.get(identity);
    if (earlier !== undefined) throw callError(`header "${name}" is given twice (as "${earlier}" and "${name}")`);
    given.set(identity, name);
    if (Object.hasOwn(REFUSED, lookup)) throw callError(`header "${name}" ${REFUSED[lookup]}`);
    if (raw === null) continue;
    const text = headerValue(name, raw, known?.list ?? false);
    if (known) out[known.key] = text;
    else if (!IGNORED.has(lookup)) out.custom[name] = text;
  }
  return out;
}

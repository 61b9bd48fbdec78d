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
import type { Json } from './args.ts';
import { describeJsonType, isPlainObject, wrongType } from './args.ts';
import { callError } from './errors.ts';

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
/** CR, LF or NUL: a line break in a header value is header injection. */
const FORBIDDEN_IN_VALUE = /[\r\n\0]/;

function headerValue(name: string, value: Json, list: boolean): string {
  let text: string;
  if (typeof value === 'string') text = value;
  else if (typeof value === 'number' || typeof value === 'boolean') text = String(value);
  else if (list && Array.isArray(value) && value.every((v) => typeof v === 'string')) text = (value as string[]).join(', ');
  else throw callError(`header "${name}" must be a string${list ? ' or a list of addresses' : ''}, got ${describeJsonType(value)}`);
  if (FORBIDDEN_IN_VALUE.test(text)) throw callError(`header "${name}" must not contain a line break (CR or LF) or NUL`);
  return text;
}

export function parseHeaders(value: Json | undefined, field = 'arguments.headers'): MessageHeaders {
  const out: MessageHeaders = { from: null, subject: null, replyTo: null, cc: null, bcc: null, custom: {} };
  if (value === undefined || value === null) return out;
  if (!isPlainObject(value)) throw wrongType(field, 'an object', value);
  const given = new Map<string, string>();
  for (const [name, raw] of Object.entries(value)) {
    if (!FIELD_NAME.test(name)) throw callError(`${JSON.stringify(name)} is not a valid header name (printable ASCII, no spaces or colons)`);
    const lookup = name.toLowerCase().replace(/_/g, '-');
    const known = KNOWN[lookup];
    // reply_to and Reply-To are the same header; so are X-Tag and x-tag.
    const identity = known ? lookup : name.toLowerCase();
    const earlier = given.get(identity);
    if (earlier !== undefined) throw callError(`header "${name}" is given twice (as "${earlier}" and "${name}")`);
    given.set(identity, name);
    if (REFUSED[lookup]) throw callError(`header "${name}" ${REFUSED[lookup]}`);
    if (raw === null) continue;
    const text = headerValue(name, raw, known?.list ?? false);
    if (known) out[known.key] = text;
    else if (!IGNORED.has(lookup)) out.custom[name] = text;
  }
  return out;
}

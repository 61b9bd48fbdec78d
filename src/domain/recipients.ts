// Recipients of send_message: every form clients send, flattened to one list of mailboxes.
//
//   "a@b.c"   "Name <a@b.c>"   "a@b.c, \"Doe, J\" <d@e.f>"   ["a@b.c", ["Name <d@e.f>"]]
//   {"a@b.c": {"name": "Ann"}, "Name <d@e.f>": null}        (per-recipient variables)
//
// Reading is in two steps so that the API's order of checks holds: collectRecipientEntries() reads
// the JSON shape (a wrong type is 406 call_error, answered before any 412), and
// resolveRecipients() validates the addresses (412 precondition_failed), after the template check.
//
// Addresses are checked as a pragmatic RFC 5322 addr-spec (RFC 6531 UTF-8 allowed in the local
// part and as IDN domains): dot-atom or quoted-string local part of at most 64 bytes; a domain of
// at least two labels, LDH after IDNA conversion, not all-numeric at the top. No comments, no
// obsolete syntax, no address literals ([1.2.3.4]): none of them belong in transactional mail.
// The domain is lower-cased (domains are case-insensitive); the local part is kept as given.
import { domainToASCII } from 'node:url';
import type { Json } from './args.ts';
import { cutText, invalidArgument, isPlainObject, wrongType } from './args.ts';
import { ApiError } from './errors.ts';
import { parseVariableValues, type VariableValues } from './variable-values.ts';
import { withFields } from './objects.ts';

export interface Mailbox {
  /** local@domain, the domain lower-cased */
  address: string;
  /** the display name, unquoted; null when none was given */
  name: string | null;
}

/** One recipient as written in the request, before its address is validated. */
export interface RecipientEntry {
  /** the text of one mailbox ("Name <a@b.c>" or "a@b.c") */
  text: string;
  /** per-recipient variables (object form), null when none */
  variables: VariableValues | null;
}

export interface Recipient extends Mailbox {
  variables: VariableValues | null;
}

/** Deepest nesting of recipient arrays read (a bound, so hostile input cannot exhaust the stack). */
export const MAX_RECIPIENT_NESTING = 16;

const ATEXT = "A-Za-z0-9!#$%&'*+\\-/=?^_`{|}~\\u0080-\\uFFFF";
const DOT_ATOM = new RegExp(`^[${ATEXT}]+(?:\\.[${ATEXT}]+)*$`);
/** quoted-string content: printable ASCII except \ and ", or a quoted pair; UTF-8 allowed */
const QUOTED_LOCAL = /^"(?:[\x20\x21\x23-\x5b\x5d-\x7e\u0080-\uffff]|\\[\x20-\x7e])*"$/;
const LDH_LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;
const ASCII_DOMAIN = /^[A-Za-z0-9.-]+$/;
const LINE_BREAK = /[\r\n]/;

export type AddressCheck = { ok: true; mailbox: Mailbox } | { ok: false; reason: string };

/** Checks a domain; returns it lower-cased, or the reason it is not acceptable. */
function checkDomain(domain: string): { ok: true; domain: string } | { ok: false; reason: string } {
  if (domain === '') return { ok: false, reason: 'the domain is missing' };
  const lower = domain.toLowerCase();
  // Non-ASCII domains (IDN) are checked in their ASCII (punycode) form.
  const ascii = ASCII_DOMAIN.test(lower) ? lower : domainToASCII(lower);
  if (ascii === '' || ascii.length > 253) return { ok: false, reason: 'the domain is not a valid host name' };
  const labels = ascii.split('.');
  if (labels.length < 2) return { ok: false, reason: 'the domain must be a fully qualified name (like example.com)' };
  for (const label of labels) {
    if (!LDH_LABEL.test(label)) return { ok: false, reason: 'the domain is not a valid host name' };
  }
  if (/^\d+$/.test(labels[labels.length - 1])) return { ok: false, reason: 'the domain is not a valid host name' };
  return { ok: true, domain: lower };
}

/** Validates a bare addr-spec ("local@domain"). */
export function checkAddrSpec(text: string): AddressCheck {
  const at = text.lastIndexOf('@');
  if (at === -1) return { ok: false, reason: 'it has no @' };
  const local = text.slice(0, at);
  if (local === '') return { ok: false, reason: 'the part before @ is empty' };
  if (!DOT_ATOM.test(local) && !QUOTED_LOCAL.test(local)) return { ok: false, reason: 'the part before @ has characters that need quoting' };
  if (Buffer.byteLength(local) > 64) return { ok: false, reason: 'the part before @ is longer than 64 bytes' };
  const domain = checkDomain(text.slice(at + 1));
  if (!domain.ok) return domain;
  const address = `${local}@${domain.domain}`;
  if (Buffer.byteLength(address) > 254) return { ok: false, reason: 'it is longer than 254 bytes' };
  return { ok: true, mailbox: { address, name: null } };
}

/** Why `value` is not exactly one mailbox (a From), or null when it is. */
export function singleMailboxProblem(value: string): string | null {
  const items = splitAddressList(value);
  if (items.length !== 1) return 'it must be exactly one address';
  const parsed = parseMailbox(items[0]);
  return parsed.ok ? null : parsed.reason;
}

/** Why `value` is not a list of one or more mailboxes (a Reply-To), or null when it is. */
export function mailboxListProblem(value: string): string | null {
  const items = splitAddressList(value);
  if (items.length === 0) return 'it holds no address';
  for (const item of items) {
    const parsed = parseMailbox(item);
    if (!parsed.ok) return parsed.reason;
  }
  return null;
}

/**
 * Parses one mailbox as RFC 5322 3.4 writes it: an addr-spec ("a@b.c"), or a display name and the
 * address in angle brackets ("Name <a@b.c>", "\"Doe, J\" <a@b.c>", "<a@b.c>"). A display name is
 * read as mail readers read it: quoted strings unquoted (any character, `\` escaping the next),
 * comments (nested, escaped) dropped, the words joined by one space; characters that RFC 5322
 * wants quoted (`;` `:` `@` `.` `[`...) are taken as written. A comment around a bare addr-spec
 * names it ("a@b.c (Ann)"), as readers take that older form. Every address header Posthorn writes
 * is written from this reading (domain/compose-mime.ts), never from the text as given.
 */
export function parseMailbox(text: string): AddressCheck {
  const trimmed = text.trim();
  if (LINE_BREAK.test(trimmed)) return { ok: false, reason: 'it contains a line break' };
  // The usual recipient: nothing to unquote, no brackets.
  if (!/["()<>]/.test(trimmed)) return checkAddrSpec(trimmed);
  // The angle bracket that opens the address: the first outside quoted strings and comments.
  let open = -1;
  for (let i = 0; i < trimmed.length && open === -1; i++) {
    const end = skipQuotedOrComment(trimmed, i);
    if (end === NOT_CLOSED) return notClosed(trimmed[i]);
    if (end > i) i = end - 1;
    else if (trimmed[i] === '<') open = i;
  }
  if (open === -1) return parseBareMailbox(trimmed);
  // The bracket that closes it: a quoted local part may hold one.
  let close = -1;
  for (let i = open + 1; i < trimmed.length && close === -1; i++) {
    const c = trimmed[i];
    if (c === '"') {
      const end = quotedStringEnd(trimmed, i);
      if (end === NOT_CLOSED) return notClosed(c);
      i = end - 1;
    } else if (c === '<') return BRACKETS;
    else if (c === '>') close = i;
  }
  if (close === -1) return BRACKETS;
  // After the address: white space and comments only ("Ann <a@b.c> (work)").
  for (let i = close + 1; i < trimmed.length; i++) {
    const end = skipQuotedOrComment(trimmed, i);
    if (end === NOT_CLOSED) return notClosed(trimmed[i]);
    if (trimmed[i] === '(') i = end - 1;
    else if (trimmed[i] !== ' ' && trimmed[i] !== '\t') return { ok: false, reason: 'it has text after the address in angle brackets' };
  }
  const checked = checkAddrSpec(trimmed.slice(open + 1, close).trim());
  if (!checked.ok) return checked;
  return { ok: true, mailbox: { address: checked.mailbox.address, name: readDisplayName(trimmed.slice(0, open)) } };
}

const BRACKETS: AddressCheck = { ok: false, reason: 'its angle brackets do not enclose one address' };
/** What quotedStringEnd and commentEnd answer for a quoted string or a comment left open. */
const NOT_CLOSED = -1;

function notClosed(opener: string): AddressCheck {
  return { ok: false, reason: opener === '"' ? 'a quoted string (") is not closed' : 'a comment "(" is not closed' };
}

/** The index after the quoted string that opens at `start` (a `\` escapes the next character), or NOT_CLOSED. */
function quotedStringEnd(text: string, start: number): number {
  for (let i = start + 1; i < text.length; i++) {
    if (text[i] === '\\') i++;
    else if (text[i] === '"') return i + 1;
  }
  return NOT_CLOSED;
}

/** The index after the comment that opens at `start` (comments nest; `\` escapes), or NOT_CLOSED. */
function commentEnd(text: string, start: number): number {
  let depth = 0;
  for (let i = start; i < text.length; i++) {
    const c = text[i];
    if (c === '\\') i++;
    else if (c === '(') depth++;
    else if (c === ')' && --depth === 0) return i + 1;
  }
  return NOT_CLOSED;
}

/** The index after the quoted string or comment that opens at `i`; `i` when none opens there. */
function skipQuotedOrComment(text: string, i: number): number {
  if (text[i] === '"') return quotedStringEnd(text, i);
  if (text[i] === '(') return commentEnd(text, i);
  return i;
}

/** The text of a quoted string or comment without its delimiters and escapes. */
function unescapeInner(text: string): string {
  return text.slice(1, -1).replace(/\\([\s\S])/g, '$1');
}

/**
 * The display name before the angle brackets: its words (atoms as written, quoted strings
 * unquoted) joined by one space where white space or a comment parted them (RFC 5322 3.2.2), and
 * nothing where they touch. A run of spaces in a quoted string is one space too: readers do not
 * agree on keeping them (a fold may fall there, and some unfold it into one). Null when it has none.
 */
function readDisplayName(text: string): string | null {
  let name = '';
  let parted = false;
  for (let i = 0; i < text.length; ) {
    const c = text[i];
    if (c === ' ' || c === '\t' || c === '(') {
      parted = true;
      i = c === '(' ? commentEnd(text, i) : i + 1;
      continue;
    }
    let end = i;
    let word: string;
    if (c === '"') {
      end = quotedStringEnd(text, i);
      word = unescapeInner(text.slice(i, end)).replace(/[ \t]+/g, ' ');
    } else {
      while (end < text.length && !' \t("'.includes(text[end])) end++;
      word = text.slice(i, end);
    }
    if (name !== '' && parted) name += ' ';
    name += word;
    parted = false;
    i = end;
  }
  const trimmed = name.trim();
  return trimmed === '' ? null : trimmed;
}

/**
 * An addr-spec without angle brackets, with the white space and comments RFC 5322 allows around
 * it; the text of those comments is its display name. (Every quoted string and comment is closed:
 * parseMailbox has read the whole text.)
 */
function parseBareMailbox(text: string): AddressCheck {
  // The addr-spec: from its first character outside white space and comments to its last.
  let start = -1;
  let end = -1;
  const comments: string[] = [];
  for (let i = 0; i < text.length; ) {
    const c = text[i];
    if (c === ' ' || c === '\t') {
      i++;
    } else if (c === '(') {
      const close = commentEnd(text, i);
      comments.push(unescapeInner(text.slice(i, close)).trim());
      i = close;
    } else {
      if (c === '>') return BRACKETS;
      if (start === -1) start = i;
      i = c === '"' ? quotedStringEnd(text, i) : i + 1;
      end = i;
    }
  }
  // A comment inside the addr-spec ("a(x)@b.c") is refused with it.
  const checked = checkAddrSpec(start === -1 ? '' : text.slice(start, end));
  if (!checked.ok) return checked;
  const name = comments.filter((comment) => comment !== '').join(' ');
  return { ok: true, mailbox: { address: checked.mailbox.address, name: name === '' ? null : name } };
}

/**
 * Splits an address list at the commas that separate mailboxes (not those inside a quoted string,
 * a comment or angle brackets). Empty items (a trailing comma) are dropped. With maxItems, it
 * stops once it has found more than that many (the caller refuses the list).
 */
export function splitAddressList(text: string, maxItems = Infinity): string[] {
  const items: string[] = [];
  let start = 0;
  let angle = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    const end = skipQuotedOrComment(text, i);
    // One left open runs to the end: parseMailbox says so of its item.
    if (end === NOT_CLOSED) break;
    if (end > i) i = end - 1;
    else if (c === '<') angle = true;
    else if (c === '>') angle = false;
    else if (c === ',' && !angle) {
      const item = text.slice(start, i).trim();
      if (item !== '' && items.push(item) > maxItems) return items;
      start = i + 1;
    }
  }
  items.push(text.slice(start));
  return items.map((s) => s.trim()).filter((s) => s !== '');
}

/**
 * Reads the shape of `recipients` into entries, in order. Wrong types are 406 call_error naming the
 * field, and so is an item of a list that is not an address (its position named); a null item is
 * absent, as null is everywhere in the API (docs/api/send-message.md, "Recipients"). Addresses are not validated here (see
 * resolveRecipients). More than maxEntries entries (duplicates included) is 412 at once, before
 * the rest is read (tooManyGiven; send-request.ts sets the bound).
 */
export function collectRecipientEntries(value: Json | undefined, field = 'arguments.recipients', maxEntries = Infinity): RecipientEntry[] {
  const entries: RecipientEntry[] = [];
  const add = (text: string, variables: VariableValues | null) => {
    if (entries.push({ text, variables }) > maxEntries) throw tooManyGiven(field, maxEntries);
  };
  const visit = (v: Json, name: string, depth: number): void => {
    if (v === null) return;
    if (typeof v === 'string') {
      for (const text of splitAddressList(v, maxEntries)) add(text, null);
    } else if (Array.isArray(v)) {
      if (depth >= MAX_RECIPIENT_NESTING) {
        throw invalidArgument(field, `is nested deeper than ${MAX_RECIPIENT_NESTING} arrays`);
      }
      v.forEach((item, i) => visit(item, `${name}[${i}]`, depth + 1));
    } else if (isPlainObject(v)) {
      for (const [key, vars] of Object.entries(v)) {
        const keyField = `${name}[${JSON.stringify(key)}]`;
        // A value that is not an object (a number, true, a display name string...) is a recipient
        // without variables: clients write {"a@example.com": 1} for "this address".
        const variables = isPlainObject(vars) ? parseVariableValues(vars, keyField) : null;
        for (const text of splitAddressList(key, maxEntries)) add(text, variables);
      }
    } else {
      throw wrongType(name, 'an address, a list of addresses or an object keyed by address', v);
    }
  };
  if (value !== undefined) visit(value, field, 0);
  return entries;
}

/** Case-insensitive identity of an address: two spellings of one mailbox get one transmission. */
export function addressKey(address: string): string {
  return address.toLowerCase();
}

/**
 * Validates the entries and removes duplicates: the same address (compared case-insensitively)
 * given twice gets ONE recipient, the first occurrence with its name and variables. Invalid
 * addresses are 412 precondition_failed naming the address.
 */
export function resolveRecipients(entries: readonly RecipientEntry[], what = 'recipient'): Recipient[] {
  const seen = new Set<string>();
  const out: Recipient[] = [];
  for (const entry of entries) {
    const parsed = parseMailbox(entry.text);
    if (!parsed.ok) throw invalidAddress(what, entry.text, parsed.reason);
    const key = addressKey(parsed.mailbox.address);
    if (seen.has(key)) continue;
    seen.add(key);
    out.push(withFields(parsed.mailbox, { variables: entry.variables }));
  }
  return out;
}

/**
 * 412: a list of addresses longer than any message may have, refused as soon as it is seen, so a
 * request never makes millions of entries (docs/api/send-message.md, "Limits").
 */
export function tooManyGiven(field: string, max: number): ApiError {
  return new ApiError('precondition_failed', `Too many recipients: "${field}" gives more than ${max} addresses (duplicates included); a message has at most --max-recipients distinct addresses.`);
}

export function invalidAddress(what: string, text: string, reason: string): ApiError {
  return new ApiError('precondition_failed', `Invalid ${what} address ${JSON.stringify(cutText(text, 200))}: ${reason}.`);
}

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
import { invalidArgument, isPlainObject, wrongType } from './args.ts';
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
const NAME_ADDR = /^([^<]*)<([^<>]*)>$/;
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

/** Removes the quotes of a quoted display name and its backslash escapes. */
function unquoteName(raw: string): string {
  const name = raw.trim();
  if (name.length >= 2 && name.startsWith('"') && name.endsWith('"')) return name.slice(1, -1).replace(/\\(.)/g, '$1');
  return name;
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

/** Parses one mailbox: "a@b.c", "<a@b.c>", "Name <a@b.c>" or "\"Doe, J\" <a@b.c>". */
export function parseMailbox(text: string): AddressCheck {
  const trimmed = text.trim();
  if (LINE_BREAK.test(trimmed)) return { ok: false, reason: 'it contains a line break' };
  const named = NAME_ADDR.exec(trimmed);
  if (!named) {
    if (/[<>]/.test(trimmed)) return { ok: false, reason: 'its angle brackets do not enclose one address' };
    return checkAddrSpec(trimmed);
  }
  const checked = checkAddrSpec(named[2].trim());
  if (!checked.ok) return checked;
  const name = unquoteName(named[1]);
  return { ok: true, mailbox: { address: checked.mailbox.address, name: name === '' ? null : name } };
}

/**
 * Splits an address list at the commas that separate mailboxes (not those inside a quoted name or
 * angle brackets). Empty items (a trailing comma) are dropped.
 */
export function splitAddressList(text: string): string[] {
  const items: string[] = [];
  let start = 0;
  let quoted = false;
  let angle = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '\\' && quoted) i++;
    else if (c === '"') quoted = !quoted;
    else if (c === '<' && !quoted) angle = true;
    else if (c === '>' && !quoted) angle = false;
    else if (c === ',' && !quoted && !angle) {
      items.push(text.slice(start, i));
      start = i + 1;
    }
  }
  items.push(text.slice(start));
  return items.map((s) => s.trim()).filter((s) => s !== '');
}

/**
 * Reads the shape of `recipients` into entries, in order. Wrong types are 406 call_error naming the
 * field; addresses are not validated here (see resolveRecipients).
 */
export function collectRecipientEntries(value: Json | undefined, field = 'arguments.recipients'): RecipientEntry[] {
  const entries: RecipientEntry[] = [];
  const visit = (v: Json, name: string, depth: number): void => {
    if (v === null) return;
    if (typeof v === 'string') {
      for (const text of splitAddressList(v)) entries.push({ text, variables: null });
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
        for (const text of splitAddressList(key)) entries.push({ text, variables });
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

export function invalidAddress(what: string, text: string, reason: string): ApiError {
  return new ApiError('precondition_failed', `Invalid ${what} address ${JSON.stringify(text)}: ${reason}.`);
}

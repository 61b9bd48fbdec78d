// When bounces put an address on a project's suppression list (docs/domains-and-bounces.md,
// "Suppression rules"). Pure: the numbers and the address normal form.
import { domainToASCII, domainToUnicode } from 'node:url';

/** Soft failures within SOFT_BOUNCE_WINDOW_MS that put an address on the list as `warning`. */
export const SOFT_BOUNCE_THRESHOLD = 3;
/** The counting window: a soft failure older than this starts the count again. */
export const SOFT_BOUNCE_WINDOW_MS = 72 * 3_600_000;
/** How long a `warning` blocks sending (blocked_until = the failure that reached the threshold + this). */
export const SOFT_BOUNCE_BLOCK_MS = 24 * 3_600_000;

/**
 * An address as the suppression list shows it: trimmed, a display name and angle brackets removed,
 * the domain lower-cased and, internationalised, in its Unicode form (bücher.example, not
 * xn--bcher-kva.example); the local part as written. Entries are compared by suppressionKey.
 */
export function normalizeAddress(address: string): string {
  const trimmed = address.trim();
  // "Name <a@b.c>" and "<a@b.c>" name the address in the brackets.
  const bare = (/<([^<>]*)>$/.exec(trimmed)?.[1] ?? trimmed).trim();
  const at = bare.lastIndexOf('@');
  if (at < 0) return bare;
  const domain = bare.slice(at + 1).toLowerCase().replace(/\.$/, '');
  // An internationalised domain in its ASCII form (a DSN names it so) is the domain as written.
  return `${bare.slice(0, at)}@${domain.includes('xn--') ? domainToUnicode(domain) || domain : domain}`;
}

/**
 * The identity of an address on the suppression list: its normalizeAddress form lower-cased, local
 * part included. RFC 5321 lets a local part be case-sensitive, but no mailbox provider makes two
 * mailboxes of two spellings, and a bounce or a complaint for one spelling must stop mail to the
 * others (docs/domains-and-bounces.md, "Suppression rules"); sending de-duplicates recipients the
 * same way (domain/recipients.ts addressKey).
 */
export function suppressionKey(address: string): string {
  return normalizeAddress(address).toLowerCase();
}

/** A plausible mailbox address (local@domain.tld, no spaces or brackets): for manual entries. */
export function isPlausibleAddress(address: string): boolean {
  if (address.length > 320) return false;
  // An internationalised domain is checked in its ASCII form ('' when it has none).
  const at = address.lastIndexOf('@');
  const ascii = at > 0 && /[^\x00-\x7f]/.test(address.slice(at + 1)) ? `${address.slice(0, at)}@${domainToASCII(address.slice(at + 1))}` : address;
  return /^[^\s@<>()",;:\\[\]]+@[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)+$/i.test(ascii);
}

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
 * The form addresses are stored and compared in: trimmed, a display name and angle brackets removed, the domain
 * lower-cased (domains are case-insensitive; local parts, strictly, are not, so they are kept) and,
 * internationalised, in its Unicode form (bücher.example, not xn--bcher-kva.example).
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

/** A plausible mailbox address (local@domain.tld, no spaces or brackets): for manual entries. */
export function isPlausibleAddress(address: string): boolean {
  if (address.length > 320) return false;
  // An internationalised domain is checked in its ASCII form ('' when it has none).
  const at = address.lastIndexOf('@');
  const ascii = at > 0 && /[^\x00-\x7f]/.test(address.slice(at + 1)) ? `${address.slice(0, at)}@${domainToASCII(address.slice(at + 1))}` : address;
  return /^[^\s@<>()",;:\\[\]]+@[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)+$/i.test(ascii);
}

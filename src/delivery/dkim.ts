// DKIM signing keys for outgoing mail (docs/domains-and-bounces.md). Delivery asks findDkimKey for each
// message and hands the result to Nodemailer's DKIM signer ({domainName, keySelector, privateKey}).
// The key is handed over parsed (a KeyObject): signing with the PEM text parses it again for every
// signature, ~1.3 ms of a 2048-bit RSA key's ~1.8 ms per message (docs/decisions/0003-performance.md).
//
// Which key: the sending account's domain equal to the From address's domain, else the nearest
// parent domain the account has (mail From news.example.com is signed d=example.com, which is
// aligned for DMARC's relaxed mode). Never a bare TLD. No domain: null (the message goes unsigned).
//
// Cached per Services for DKIM_CACHE_MS (negative answers too), so a busy worker does not query and
// decrypt for every message. create_domain/delete_domain in this process forget the account's
// entries at once; other processes see the change within DKIM_CACHE_MS.
import { createPrivateKey, type KeyObject } from 'node:crypto';
import type { Services } from '../services.ts';
import { canonicalDomainName } from '../domain/dns-records.ts';
import { normalizeAddress } from '../domain/suppression-policy.ts';
import { findDomainsByName } from '../storage/domains.ts';

export interface DkimKey {
  domainName: string;
  keySelector: string;
  /** decrypted and parsed */
  privateKey: KeyObject;
}

export const DKIM_CACHE_MS = 60_000;
const MAX_CACHE_ENTRIES = 10_000;

interface CacheEntry {
  key: DkimKey | null;
  expiresAt: number;
}

// Keyed by the Services object: no state shared between two apps in one process.
const caches = new WeakMap<Services, Map<string, CacheEntry>>();

function cacheOf(services: Services): Map<string, CacheEntry> {
  let cache = caches.get(services);
  if (!cache) {
    cache = new Map();
    caches.set(services, cache);
  }
  return cache;
}

/** The From address's domain, canonical, or null when there is none. */
export function fromDomainOf(fromAddress: string | null): string | null {
  if (!fromAddress) return null;
  // Asked per delivered message, of the few From addresses an application uses: remembered
  // (bounded), as normalising and converting to ASCII (punycode) was ~1.5% of a delivering worker.
  let domain = fromDomains.get(fromAddress);
  if (domain === undefined) {
    const address = normalizeAddress(fromAddress);
    const at = address.lastIndexOf('@');
    domain = at < 0 ? null : canonicalDomainName(address.slice(at + 1));
    if (fromDomains.size >= MAX_CACHE_ENTRIES) fromDomains.clear();
    fromDomains.set(fromAddress, domain);
  }
  return domain;
}
const fromDomains = new Map<string, string | null>();

/** The domain and its parents down to two labels, nearest first. */
function candidatesFor(domain: string): string[] {
  const labels = domain.split('.');
  const out: string[] = [];
  for (let i = 0; i <= labels.length - 2; i++) out.push(labels.slice(i).join('.'));
  return out;
}

/**
 * The key to sign with for a message whose From address is `fromAddress`, sent by `accountId`:
 * the account's domain with a key matching the From domain, or null (unsigned). Cached briefly.
 */
export async function findDkimKey(services: Services, accountId: number, fromAddress: string | null): Promise<DkimKey | null> {
  const domain = fromDomainOf(fromAddress);
  if (!domain) return null;
  const cache = cacheOf(services);
  const cacheKey = `${accountId}:${domain}`;
  const now = services.clock.now();
  const hit = cache.get(cacheKey);
  if (hit && hit.expiresAt > now) return hit.key;

  const candidates = candidatesFor(domain);
  const rows = await findDomainsByName(services.store.db, accountId, candidates);
  const row = candidates.map((name) => rows.find((r) => r.name === name)).find((r) => r !== undefined);
  let key: DkimKey | null = null;
  if (row) {
    try {
      key = { domainName: row.name, keySelector: row.dkim_selector, privateKey: createPrivateKey(services.secrets.open(row.dkim_private_key)) };
    } catch {
      // A key sealed under another secret key (a misconfigured --secret-key), or not a key. Sending
      // unsigned beats failing the mail; the operator is told, without key material.
      services.log.error({ accountId, domain: row.name }, 'DKIM key cannot be decrypted or read (was --secret-key changed?); sending unsigned');
    }
  }
  if (cache.size >= MAX_CACHE_ENTRIES) cache.clear();
  cache.set(cacheKey, { key, expiresAt: now + DKIM_CACHE_MS });
  return key;
}

/** Drops the cached answers of one account (after its domains changed). */
export function forgetDkimKeys(services: Services, accountId: number): void {
  const cache = caches.get(services);
  if (!cache) return;
  const prefix = `${accountId}:`;
  for (const k of cache.keys()) if (k.startsWith(prefix)) cache.delete(k);
}

// Sending domains (docs/domains-and-bounces.md): the DNS records a domain publishes, and how what DNS
// answers compares with them. Pure: the lookups happen in operations/domains.ts.
//
//   dkim         TXT  <selector>._domainkey.<domain>  "v=DKIM1; k=rsa; p=<public key>"   (required)
//   spf          TXT  <domain>                        "v=spf1 a:<mailer host> ~all"      (suggestion)
//   return_path  MX   <bounce domain>                 "10 <mailer host>"                 (per service)
//
// The return path is the service's one bounce domain (VERP addresses live there), shared by every
// sending domain: DMARC alignment comes from the DKIM signature (d= the From domain), not SPF.
import { domainToASCII } from 'node:url';

export type RecordPurpose = 'dkim' | 'spf' | 'return_path';

export interface DnsRecordSpec {
  type: 'TXT' | 'MX';
  name: string;
  value: string;
  /** what it is for, one line, for people reading the API answer */
  note: string;
}

export type DnsRecords = Record<RecordPurpose, DnsRecordSpec>;

/** ok: as expected; missing: no such record; mismatch: a record exists but differs; error: the lookup failed */
export type CheckStatus = 'ok' | 'missing' | 'mismatch' | 'error';

export interface RecordCheck {
  status: CheckStatus;
  /** what DNS answered (TXT strings joined), or the lookup error code */
  found: string[];
}

export interface DomainCheck {
  /** ok when every record is ok */
  status: 'ok' | 'incomplete';
  records: Record<RecordPurpose, RecordCheck>;
}

/** What a DNS lookup gave: the answers, or no such data (NXDOMAIN/NODATA), or a failure code. */
export type LookupResult<T> = { kind: 'answers'; answers: T[] } | { kind: 'none' } | { kind: 'error'; code: string };

/** The canonical form of a domain name (lower case, ASCII/punycode, no final dot), or null if it is not one. */
export function canonicalDomainName(input: string): string | null {
  const trimmed = input.trim().replace(/\.$/, '');
  if (trimmed === '' || /[\s@/:]/.test(trimmed)) return null;
  const ascii = domainToASCII(trimmed.toLowerCase());
  if (ascii === '' || ascii.length > 253) return null;
  const labels = ascii.split('.');
  if (labels.length < 2) return null;
  const label = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/;
  if (!labels.every((l) => label.test(l))) return null;
  if (/^\d+$/.test(labels[labels.length - 1])) return null; // an IP address, not a domain
  return ascii;
}

/** The DKIM selector of a key created at `nowMs`: "posthorn" + the UTC date (keys can be rotated daily). */
export function dkimSelectorFor(nowMs: number): string {
  return `posthorn${new Date(nowMs).toISOString().slice(0, 10).replace(/-/g, '')}`;
}

/** The p= value of a DKIM record: the base64 of the SubjectPublicKeyInfo DER inside an SPKI PEM. */
export function dkimPublicKeyValue(spkiPem: string): string {
  return spkiPem.replace(/-----(BEGIN|END) PUBLIC KEY-----/g, '').replace(/\s+/g, '');
}

export function expectedRecords(domain: { name: string; dkimSelector: string; dkimPublicKeyPem: string }, service: { mailerHost: string; bounceDomain: string }): DnsRecords {
  return {
    dkim: {
      type: 'TXT',
      name: `${domain.dkimSelector}._domainkey.${domain.name}`,
      value: `v=DKIM1; k=rsa; p=${dkimPublicKeyValue(domain.dkimPublicKeyPem)}`,
      note: 'Required: the public key receivers verify the DKIM signature with. Longer than 255 characters: publish it as one TXT record split into several strings (most DNS providers do this for you).',
    },
    spf: {
      type: 'TXT',
      name: domain.name,
      value: `v=spf1 a:${service.mailerHost} ~all`,
      note: `Suggested: authorizes the host ${service.mailerHost} to send for the domain. If the domain already has an SPF record, add a:${service.mailerHost} to it instead (one SPF record per name).`,
    },
    return_path: {
      type: 'MX',
      name: service.bounceDomain,
      value: `10 ${service.mailerHost}`,
      note: `The bounce domain of this service (shared by every sending domain): bounces to the per-message return paths reach the bounce listener through it. Published once by the operator.`,
    },
  };
}

/** Joins the strings of each TXT record (a long record arrives split into 255-byte strings). */
export function joinTxt(records: string[][]): string[] {
  return records.map((chunks) => chunks.join(''));
}

function tagsOf(record: string): Map<string, string> {
  const tags = new Map<string, string>();
  for (const part of record.split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0) tags.set(part.slice(0, eq).trim().toLowerCase(), part.slice(eq + 1).replace(/\s+/g, ''));
  }
  return tags;
}

export function checkDkim(expected: DnsRecordSpec, lookup: LookupResult<string>): RecordCheck {
  if (lookup.kind === 'error') return { status: 'error', found: [lookup.code] };
  if (lookup.kind === 'none' || lookup.answers.length === 0) return { status: 'missing', found: [] };
  const want = tagsOf(expected.value).get('p');
  const dkim = lookup.answers.filter((r) => /^\s*v\s*=\s*DKIM1\b/i.test(r) || tagsOf(r).has('p'));
  if (dkim.length === 0) return { status: 'mismatch', found: lookup.answers };
  return { status: dkim.some((r) => tagsOf(r).get('p') === want) ? 'ok' : 'mismatch', found: dkim };
}

export function checkSpf(mailerHost: string, lookup: LookupResult<string>): RecordCheck {
  if (lookup.kind === 'error') return { status: 'error', found: [lookup.code] };
  const spf = lookup.kind === 'answers' ? lookup.answers.filter((r) => /^\s*v=spf1(\s|$)/i.test(r)) : [];
  if (spf.length === 0) return { status: 'missing', found: [] };
  const host = mailerHost.toLowerCase();
  // Our suggested mechanisms naming the mailer host. A record may authorize us in other ways (ip4:,
  // a provider's include:): that reads as mismatch, and the answer shows what was found.
  const names = new Set([`a:${host}`, `+a:${host}`, `include:${host}`, `+include:${host}`, `exists:${host}`]);
  const ok = spf.length === 1 && spf[0].toLowerCase().split(/\s+/).some((term) => names.has(term));
  return { status: ok ? 'ok' : 'mismatch', found: spf };
}

export function checkReturnPath(mailerHost: string, lookup: LookupResult<{ exchange: string; priority: number }>): RecordCheck {
  if (lookup.kind === 'error') return { status: 'error', found: [lookup.code] };
  if (lookup.kind === 'none' || lookup.answers.length === 0) return { status: 'missing', found: [] };
  const found = lookup.answers.map((mx) => `${mx.priority} ${mx.exchange}`);
  const host = mailerHost.toLowerCase().replace(/\.$/, '');
  return { status: lookup.answers.some((mx) => mx.exchange.toLowerCase().replace(/\.$/, '') === host) ? 'ok' : 'mismatch', found };
}

export function summarizeCheck(records: Record<RecordPurpose, RecordCheck>): DomainCheck {
  return { status: Object.values(records).every((r) => r.status === 'ok') ? 'ok' : 'incomplete', records };
}

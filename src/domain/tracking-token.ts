// Signed open and click tracking tokens (docs/tracking.md). A token carries the transmission id
// (and for a click the target URL) and an HMAC-SHA256 over them with the deployment's tracking key,
// so the click redirector only ever sends people to URLs that were in a message Posthorn sent: a
// token made up or altered is refused (404), never an open redirect.
//
// The key is derived from the deployment's secret key (--secret-key or the generated
// <data>/secret.key), so every process that shares the secret signs and verifies the same links,
// and the secret itself never appears in a URL. Delivery passes exactly trackingSigningKey() as
// applyTracking's signingKey (src/delivery/tracking.ts); the tracking endpoints verify with it.
//
// Both sides share two rules, kept here so they cannot drift apart (docs/tracking.md, "What changes
// in the HTML"): the URL a click token carries is what trackableUrl() makes of the link: its WHATWG
// serialisation, printable ASCII only, so it is a valid Location header and the `clicked` event
// names the very URL the reader is sent to; and no token is longer than MAX_TOKEN_CHARS: delivery
// gets null for a longer one and leaves the link untracked, the redirector refuses a longer path.
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { SecretBox } from './secret-box.ts';

export type TrackingToken = { kind: 'open'; transmissionId: number } | { kind: 'click'; transmissionId: number; url: string };

/** 128 bits of HMAC-SHA256 are plenty for a link token and keep the links short. */
const SIGNATURE_BYTES = 16;
/** base64url characters of the signature */
const SIGNATURE_CHARS = Math.ceil((SIGNATURE_BYTES * 4) / 3);
/**
 * The longest token made or read. A link's token is about 4/3 of its URL, so links of up to about
 * 3,000 characters (percent-encoded) are tracked.
 */
const MAX_TOKEN_CHARS = 4096;

/**
 * The URL a click on the link is redirected to, or null when the link is not tracked: its WHATWG
 * serialisation (`new URL(link).href`: non-ASCII and control characters percent-encoded, tabs and
 * line breaks dropped, the host in its ASCII form, as a browser following the link would), when it
 * parses as an absolute http(s) URL.
 */
export function trackableUrl(link: string): string | null {
  let url: URL;
  try {
    url = new URL(link);
  } catch {
    return null;
  }
  return url.protocol === 'https:' || url.protocol === 'http:' ? url.href : null;
}

function sign(kind: 'o' | 'c', payload: string, key: string): string {
  return createHmac('sha256', key).update(`${kind}:${payload}`, 'utf8').digest().subarray(0, SIGNATURE_BYTES).toString('base64url');
}

/** The token, or null for a click whose token would be longer than MAX_TOKEN_CHARS (not to be tracked). */
export function makeTrackingToken(token: { kind: 'open'; transmissionId: number }, key: string): string;
export function makeTrackingToken(token: TrackingToken, key: string): string | null;
export function makeTrackingToken(token: TrackingToken, key: string): string | null {
  const kind = token.kind === 'open' ? 'o' : 'c';
  const payload = token.kind === 'open' ? String(token.transmissionId) : `${token.transmissionId}|${token.url}`;
  // Checked before any encoding or signing: a link too long costs a byte count, not a token.
  if (Math.ceil((Buffer.byteLength(payload, 'utf8') * 4) / 3) + 1 + SIGNATURE_CHARS > MAX_TOKEN_CHARS) return null;
  return `${Buffer.from(payload, 'utf8').toString('base64url')}.${sign(kind, payload, key)}`;
}

/** The token's content when its signature is right, else null. */
export function readTrackingToken(kind: 'open' | 'click', token: string, key: string): TrackingToken | null {
  if (token.length > MAX_TOKEN_CHARS) return null;
  const dot = token.indexOf('.');
  if (dot <= 0 || !/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/.test(token)) return null;
  const payload = Buffer.from(token.slice(0, dot), 'base64url').toString('utf8');
  const given = Buffer.from(token.slice(dot + 1), 'base64url');
  const expected = Buffer.from(sign(kind === 'open' ? 'o' : 'c', payload, key), 'base64url');
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return null;
  if (kind === 'open') {
    if (!/^\d+$/.test(payload)) return null;
    return { kind, transmissionId: Number(payload) };
  }
  const bar = payload.indexOf('|');
  if (bar <= 0 || !/^\d+$/.test(payload.slice(0, bar))) return null;
  const url = payload.slice(bar + 1);
  if (!/^https?:\/\//i.test(url)) return null;
  return { kind, transmissionId: Number(payload.slice(0, bar)), url };
}

export function trackingSigningKey(services: { readonly secrets: Pick<SecretBox, 'deriveKey'> }): string {
  return services.secrets.deriveKey('posthorn tracking key v1');
}

// Open and click tracking of HTML parts (issue 6).
//
// applyTracking() adds a 1x1 pixel (GET {publicUrl}/t/o/<token>.gif) and rewrites every absolute
// http(s) link of an <a href> to {publicUrl}/t/c/<token>. A token carries the transmission id (and
// for a click the target URL) and an HMAC-SHA256 over them with the tracking key
// (delivery/tracking-key.ts), so the click redirector only ever sends people to URLs that were in a
// message Posthorn sent: a token made up or altered is refused (404), never an open redirect.
import { createHmac, timingSafeEqual } from 'node:crypto';

export interface TrackingTarget {
  transmissionId: number;
  /** the public base URL tracking links point at */
  publicUrl: string;
}

export type TrackingToken = { kind: 'open'; transmissionId: number } | { kind: 'click'; transmissionId: number; url: string };

/** 128 bits of HMAC-SHA256 are plenty for a link token and keep the links short. */
const SIGNATURE_BYTES = 16;

function sign(kind: 'o' | 'c', payload: string, key: string): string {
  return createHmac('sha256', key).update(`${kind}:${payload}`, 'utf8').digest().subarray(0, SIGNATURE_BYTES).toString('base64url');
}

export function makeTrackingToken(token: TrackingToken, key: string): string {
  const kind = token.kind === 'open' ? 'o' : 'c';
  const payload = token.kind === 'open' ? String(token.transmissionId) : `${token.transmissionId}|${token.url}`;
  return `${Buffer.from(payload, 'utf8').toString('base64url')}.${sign(kind, payload, key)}`;
}

/** The token's content when its signature is right, else null. */
export function readTrackingToken(kind: 'open' | 'click', token: string, key: string): TrackingToken | null {
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

const LINK = /(<a\b[^>]*?\shref\s*=\s*)(?:"([^"]*)"|'([^']*)')/gi;

function decodeAttribute(value: string): string {
  return value
    .replace(/&amp;/gi, '&')
    .replace(/&quot;/gi, '"')
    .replace(/&#0*39;|&apos;/gi, "'")
    .replace(/&lt;/gi, '<')
    .replace(/&gt;/gi, '>');
}

/** The HTML with a tracking pixel and signed rewritten links. */
export function applyTracking(html: string, target: TrackingTarget, signingKey: string): string {
  const base = target.publicUrl.replace(/\/+$/, '');
  const rewritten = html.replace(LINK, (whole, head: string, dq: string | undefined, sq: string | undefined) => {
    const raw = (dq ?? sq ?? '').trim();
    const url = decodeAttribute(raw);
    if (!/^https?:\/\/[^\s]/i.test(url)) return whole;
    const token = makeTrackingToken({ kind: 'click', transmissionId: target.transmissionId, url }, signingKey);
    return `${head}"${base}/t/c/${token}"`;
  });
  const pixelToken = makeTrackingToken({ kind: 'open', transmissionId: target.transmissionId }, signingKey);
  const pixel = `<img src="${base}/t/o/${pixelToken}.gif" width="1" height="1" alt="" style="display:block;border:0;width:1px;height:1px" />`;
  const close = rewritten.search(/<\/body\s*>/i);
  return close === -1 ? rewritten + pixel : rewritten.slice(0, close) + pixel + rewritten.slice(close);
}

// Open and click tracking of HTML parts (docs/tracking.md).
//
// applyTracking() adds a 1x1 pixel (GET {publicUrl}/t/o/<token>.gif) and rewrites every absolute
// http(s) link of an <a href> to {publicUrl}/t/c/<token>, each token signed with the tracking key
// (src/domain/tracking-token.ts). The token carries the link as trackableUrl() serialises it, the
// URL the redirector sends the reader to; a link that does not parse as one is left as written.
import { makeTrackingToken, trackableUrl } from '../domain/tracking-token.ts';

export interface TrackingTarget {
  transmissionId: number;
  /** the public base URL tracking links point at */
  publicUrl: string;
}

const LINK = /(<a\b[^>]*?\shref\s*=\s*)(?:"([^"]*)"|'([^']*)')/gi;

/**
 * Character references in an attribute value, as an HTML parser reads them (WHATWG HTML,
 * "character reference state"): numeric ones (`&#38;`, `&#x26;`, the `;` optional; 0, surrogates
 * and beyond U+10FFFF become U+FFFD, 0x80-0x9F are read as windows-1252) and the named `&amp;`,
 * `&lt;`, `&gt;`, `&quot;` (also in capitals, and without `;` unless `=` or a letter or digit
 * follows, as in a query `&amp=1`) and `&apos;`. Other named references are left as written.
 */
const REFERENCE = /&(?:#([0-9]+);?|#[xX]([0-9a-fA-F]+);?|(amp|AMP|lt|LT|gt|GT|quot|QUOT)(?:;|(?![=0-9A-Za-z]))|apos;)/g;
const NAMED: Record<string, string> = { amp: '&', AMP: '&', lt: '<', LT: '<', gt: '>', GT: '>', quot: '"', QUOT: '"' };
/** 0x80-0x9F as windows-1252 (the five it leaves undefined stay as they are) */
const WINDOWS_1252 = '\u20AC\u0081\u201A\u0192\u201E\u2026\u2020\u2021\u02C6\u2030\u0160\u2039\u0152\u008D\u017D\u008F\u0090\u2018\u2019\u201C\u201D\u2022\u2013\u2014\u02DC\u2122\u0161\u203A\u0153\u009D\u017E\u0178';

function decodeAttribute(value: string): string {
  // Most links hold no reference: no second pass over them.
  if (value.indexOf('&') === -1) return value;
  return value.replace(REFERENCE, (_, decimal: string | undefined, hex: string | undefined, name: string | undefined) => {
    if (name !== undefined) return NAMED[name];
    if (decimal === undefined && hex === undefined) return "'";
    const code = decimal !== undefined ? Number.parseInt(decimal, 10) : Number.parseInt(hex!, 16);
    if (code === 0 || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) return '\uFFFD';
    if (code >= 0x80 && code <= 0x9f) return WINDOWS_1252[code - 0x80];
    return String.fromCodePoint(code);
  });
}

/** The HTML with a tracking pixel and signed rewritten links. */
export function applyTracking(html: string, target: TrackingTarget, signingKey: string): string {
  const base = target.publicUrl.replace(/\/+$/, '');
  const rewritten = html.replace(LINK, (whole, head: string, dq: string | undefined, sq: string | undefined) => {
    const raw = (dq ?? sq ?? '').trim();
    const link = decodeAttribute(raw);
    // The cheap test first: most links that are not http(s) are never parsed.
    if (!/^https?:\/\/[^\s]/i.test(link)) return whole;
    const url = trackableUrl(link);
    if (url === null) return whole;
    const token = makeTrackingToken({ kind: 'click', transmissionId: target.transmissionId, url }, signingKey);
    // Too long a link for a token the redirector reads: left as it is, untracked, not made dead.
    if (token === null) return whole;
    return `${head}"${base}/t/c/${token}"`;
  });
  const pixelToken = makeTrackingToken({ kind: 'open', transmissionId: target.transmissionId }, signingKey);
  const pixel = `<img src="${base}/t/o/${pixelToken}.gif" width="1" height="1" alt="" style="display:block;border:0;width:1px;height:1px" />`;
  const close = rewritten.search(/<\/body\s*>/i);
  return close === -1 ? rewritten + pixel : rewritten.slice(0, close) + pixel + rewritten.slice(close);
}

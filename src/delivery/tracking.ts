// Open and click tracking of HTML parts (docs/tracking.md).
//
// applyTracking() adds a 1x1 pixel (GET {publicUrl}/t/o/<token>.gif) and rewrites every absolute
// http(s) link of an <a href> to {publicUrl}/t/c/<token>, each token signed with the tracking key
// (src/domain/tracking-token.ts). The token carries the link as trackableUrl() serialises it, the
// URL the redirector sends the reader to; a link that does not parse as one is left as written.
import { decodeHTMLAttribute } from 'entities';
import { makeTrackingToken, trackableUrl } from '../domain/tracking-token.ts';

export interface TrackingTarget {
  transmissionId: number;
  /** the public base URL tracking links point at */
  publicUrl: string;
}

const LINK = /(<a\b[^>]*?\shref\s*=\s*)(?:"([^"]*)"|'([^']*)')/gi;

/**
 * An attribute value with its character references decoded exactly as an HTML parser reads them
 * (WHATWG HTML, "character reference state", in an attribute): every named reference of HTML's
 * table (`&amp;`, `&nbsp;`, `&eacute;`...), the legacy ones also without `;` (`&copy`, `&eacute`)
 * unless `=` or a letter or digit follows (a query's `&amp=1`, `&copy2`), and numeric ones (`&#38;`,
 * `&#x26;`, `;` optional; 0, surrogates and beyond U+10FFFF become U+FFFD, 0x80-0x9F are read as
 * windows-1252). The table and the rules are the `entities` package's (htmlparser2's decoder).
 */
function decodeAttribute(value: string): string {
  // Most links hold no reference: no second pass over them.
  return value.indexOf('&') === -1 ? value : decodeHTMLAttribute(value);
}

/**
 * The link without the leading and trailing C0 controls and spaces a URL parser drops (WHATWG URL):
 * only those, not the other white space String.trim takes (a no-break space stays in the URL).
 */
function trimLink(link: string): string {
  if (link.length === 0 || (link.charCodeAt(0) > 0x20 && link.charCodeAt(link.length - 1) > 0x20)) return link;
  return link.replace(/^[\u0000-\u0020]+|[\u0000-\u0020]+$/g, '');
}

/** The HTML with a tracking pixel and signed rewritten links. */
export function applyTracking(html: string, target: TrackingTarget, signingKey: string): string {
  const base = target.publicUrl.replace(/\/+$/, '');
  const rewritten = html.replace(LINK, (whole, head: string, dq: string | undefined, sq: string | undefined) => {
    // Decoded first: a reference may stand for a space at either end (`&#32;https://...`).
    const link = trimLink(decodeAttribute(dq ?? sq ?? ''));
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

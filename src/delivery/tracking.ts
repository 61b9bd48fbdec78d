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

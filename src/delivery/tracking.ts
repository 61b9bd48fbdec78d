// Open and click tracking of HTML parts (issue 6). STUB: owned by the webhooks/tracking engineer.

export interface TrackingTarget {
  transmissionId: number;
  /** the public base URL tracking links point at */
  publicUrl: string;
}

/** The HTML with a tracking pixel and signed rewritten links. Identity until tracking is built. */
export function applyTracking(html: string, _target: TrackingTarget, _signingKey: string): string {
  return html;
}

// When a failed outbound request (webhook or postback) is tried again: exponential backoff from one
// minute, doubling, capped at eight hours, for at least a day. With these numbers the attempts fall
// at 0, 1m, 3m, 7m, 15m, 31m, 63m, ~2h, ~4h, ~8.5h, ~16.5h and ~24.5h after the request was
// created: twelve tries, the last one after the day is over; if it fails too the request is failed.

export const OUTBOUND_RETRY_WINDOW_MS = 24 * 3600_000;
export const OUTBOUND_FIRST_DELAY_MS = 60_000;
export const OUTBOUND_MAX_DELAY_MS = 8 * 3600_000;

/** The next attempt time after `attempts` failed tries, or null: give up (the window is over). */
export function nextOutboundAttemptAt(attempts: number, createdAt: number, now: number): number | null {
  if (now - createdAt >= OUTBOUND_RETRY_WINDOW_MS) return null;
  const delay = Math.min(OUTBOUND_FIRST_DELAY_MS * 2 ** Math.max(0, attempts - 1), OUTBOUND_MAX_DELAY_MS);
  return now + delay;
}

// When a failed outbound request (webhook or postback) is tried again: --webhook-retry-schedule,
// the same syntax as --retry-schedule (docs/webhooks.md, "Retries"). Each delay is used once: after
// the n-th failed attempt the next comes the n-th delay later, and a failure after the last delay
// fails the request. The default, "5s,5m,30m,2h,5h,10h,10h", is the Standard Webhooks
// recommendation: attempts at 0, 5 s, ~5 min, ~35 min, ~2.6 h, ~7.6 h, ~17.6 h and ~27.6 h after the
// first, so a receiver that is down for a day still gets the event.
import { parseRetrySchedule } from '../domain/retry-policy.ts';

export const DEFAULT_WEBHOOK_RETRY_SCHEDULE = '5s,5m,30m,2h,5h,10h,10h';

/** The delays of a schedule text; throws naming the option when it is not one. */
export function parseWebhookRetrySchedule(text: string): number[] {
  const delays = parseRetrySchedule(text);
  if (!delays) throw new Error(`--webhook-retry-schedule must be durations separated by commas, like "5s,5m,30m", got "${text}"`);
  return delays;
}

/** The next attempt time after `attempts` failed tries (1 = the first), or null: give up. */
export function nextOutboundAttemptAt(delaysMs: readonly number[], attempts: number, now: number): number | null {
  const i = Math.max(0, attempts - 1);
  if (i >= delaysMs.length) return null;
  return now + delaysMs[i];
}

// When a deferred transmission is tried again, and when delivery gives up. Pure: time comes in as
// numbers (epoch ms), so the schedule is tested with a ManualClock and no sleeping.
//
// The schedule is a list of delays between attempts ("1m,5m,15m,30m,1h,2h,4h,8h"): after the
// n-th failed attempt the next one is n-th delay later; the last delay repeats. Delivery gives up
// at created_at + maxRetryAgeMs: the last attempt is scheduled exactly at that deadline (never
// past it), and a deferral at or after the deadline fails the transmission. The default schedule is
// close to what large senders do (Postfix backs off from 5 min doubling to 67 min and gives up
// after 5 days; the large providers retry within minutes, then hourly, for 1-3 days).
import { parseDuration } from './time.ts';

export interface RetryPolicy {
  /** delays in ms; index i is the wait after the (i+1)-th failed attempt; the last repeats */
  readonly delaysMs: readonly number[];
  readonly maxRetryAgeMs: number;
}

export type RetryDecision = { kind: 'retry'; nextAttemptAt: number } | { kind: 'give_up'; reason: string };

/** Parses "1m,5m,1h" (units ms|s|m|h|d, a bare number is ms). Null when any part is invalid. */
export function parseRetrySchedule(text: string): number[] | null {
  const parts = text.split(',').map((p) => p.trim()).filter(Boolean);
  if (parts.length === 0) return null;
  const delays: number[] = [];
  for (const part of parts) {
    const ms = parseDuration(part);
    if (ms === null || ms <= 0) return null;
    delays.push(ms);
  }
  return delays;
}

/** The delay after `failedAttempts` failed attempts (1 = after the first). */
export function retryDelayMs(policy: RetryPolicy, failedAttempts: number): number {
  const i = Math.max(0, Math.min(failedAttempts - 1, policy.delaysMs.length - 1));
  return policy.delaysMs[i];
}

/**
 * What to do after a deferral: `failedAttempts` counts this one. Retry at now + delay, capped at the
 * deadline; give up when the deadline has already come.
 */
export function decideRetry(policy: RetryPolicy, input: { createdAt: number; now: number; failedAttempts: number }): RetryDecision {
  const deadline = input.createdAt + policy.maxRetryAgeMs;
  if (input.now >= deadline) {
    return { kind: 'give_up', reason: `gave up after ${input.failedAttempts} attempt${input.failedAttempts === 1 ? '' : 's'} over ${describeMs(input.now - input.createdAt)}` };
  }
  return { kind: 'retry', nextAttemptAt: Math.min(input.now + retryDelayMs(policy, input.failedAttempts), deadline) };
}

function describeMs(ms: number): string {
  if (ms >= 3_600_000) return `${Math.round(ms / 360_000) / 10} h`;
  if (ms >= 60_000) return `${Math.round(ms / 6_000) / 10} min`;
  return `${Math.round(ms / 100) / 10} s`;
}

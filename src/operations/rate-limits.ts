// Per-API-key rate limits (docs/api/README.md, "Rate limits"; docs/configuration.md,
// --rate-limit-per-key): a token bucket per key, in this process's memory. Off by default. Every
// edge that acts for a key (the API, SMTP submission) takes one token per request, so a key has
// one budget whichever door it uses. The processes of one `serve` share it (shareKeyTokens): each
// tells the others, through the supervisor, every SHARE_EVERY_MS, how many tokens of which key it
// took, and takes as many from its own buckets. A burst within that interval can pass on each
// process before the others hear of it; over any longer time a key gets its rate, not that rate
// times the processes.
import { parseRateLimit, type RateLimit } from '../domain/rate-limit.ts';
import type { Services } from '../services.ts';

export type TokenTaken = { ok: true } | { ok: false; retryAfterMs: number };

/** Shared: the answer of nearly every call allocates nothing (send_message's hot path takes a token). */
const TAKEN: TokenTaken = Object.freeze({ ok: true });

interface Bucket {
  tokens: number;
  refilledAtMs: number;
}

interface Limiter {
  readonly limit: RateLimit | null;
  readonly buckets: Map<string, Bucket>;
  /** tokens taken here since the others were last told, by key (while shared) */
  taken: Map<string, number> | null;
}

/** How often a process tells the others of one `serve` what it took (when it took any). */
export const SHARE_EVERY_MS = 50;

/** One limiter per composition (per Services), made on first use from its config. */
const LIMITERS = new WeakMap<Services, Limiter>();
/** Buckets of keys idle this long are full again and can be forgotten. */
const SWEEP_EVERY = 10_000;

function limiterOf(services: Services): Limiter {
  let limiter = LIMITERS.get(services);
  if (!limiter) {
    limiter = { limit: parseRateLimit(services.config.rateLimitPerKey), buckets: new Map(), taken: null };
    LIMITERS.set(services, limiter);
  }
  return limiter;
}

/**
 * Takes one request's token from the bucket of `keyId` (any stable name of the API key, such as
 * "project:12"). Answers ok, or how long until a token is back. Always ok when limits are off.
 */
export function takeKeyToken(services: Services, keyId: string): TokenTaken {
  const limiter = limiterOf(services);
  const limit = limiter.limit;
  if (limit === null) return TAKEN;
  const now = services.clock.now();
  const ratePerMs = limit.requests / limit.windowMs;
  const bucket = refilledBucket(limiter, keyId, now, ratePerMs);
  if (bucket.tokens >= 1) {
    bucket.tokens -= 1;
    if (limiter.taken) limiter.taken.set(keyId, (limiter.taken.get(keyId) ?? 0) + 1);
    return TAKEN;
  }
  return { ok: false, retryAfterMs: Math.ceil((1 - bucket.tokens) / ratePerMs) };
}

/** The key's bucket, refilled for the time since it was last touched (a new key's is full). */
function refilledBucket(limiter: Limiter, keyId: string, now: number, ratePerMs: number): Bucket {
  const limit = limiter.limit!;
  let bucket = limiter.buckets.get(keyId);
  if (!bucket) {
    if (limiter.buckets.size >= SWEEP_EVERY) sweep(limiter, now, ratePerMs);
    bucket = { tokens: limit.requests, refilledAtMs: now };
    limiter.buckets.set(keyId, bucket);
  } else {
    bucket.tokens = Math.min(limit.requests, bucket.tokens + Math.max(0, now - bucket.refilledAtMs) * ratePerMs);
    bucket.refilledAtMs = now;
  }
  return bucket;
}

/** Tokens taken by another process of the service, by key: taken here too (a bucket may go below 0, and then waits longer). */
export function takeKeyTokensTakenElsewhere(services: Services, taken: ReadonlyArray<readonly [string, number]>): void {
  const limiter = limiterOf(services);
  if (limiter.limit === null) return;
  const now = services.clock.now();
  const ratePerMs = limiter.limit.requests / limiter.limit.windowMs;
  for (const [keyId, count] of taken) {
    if (typeof keyId !== 'string' || !Number.isFinite(count) || count <= 0) continue;
    refilledBucket(limiter, keyId, now, ratePerMs).tokens -= count;
  }
}

/**
 * Shares this process's buckets with the other processes of one `serve`: from now on what it takes
 * is sent by `send`, gathered, every SHARE_EVERY_MS (nothing when nothing was taken); what they
 * took comes to takeKeyTokensTakenElsewhere. Returns the stop (it sends what is left). Nothing to
 * share when limits are off.
 */
export function shareKeyTokens(services: Services, send: (taken: Array<[string, number]>) => void): () => void {
  const limiter = limiterOf(services);
  if (limiter.limit === null) return () => {};
  const taken = (limiter.taken = new Map());
  const flush = () => {
    if (taken.size === 0) return;
    const entries = [...taken];
    taken.clear();
    send(entries);
  };
  const timer = setInterval(flush, SHARE_EVERY_MS);
  timer.unref();
  return () => {
    clearInterval(timer);
    flush();
    limiter.taken = null;
  };
}

function sweep(limiter: Limiter, now: number, ratePerMs: number): void {
  const limit = limiter.limit!;
  for (const [key, bucket] of limiter.buckets) {
    if (bucket.tokens + (now - bucket.refilledAtMs) * ratePerMs >= limit.requests) limiter.buckets.delete(key);
  }
}

// The --rate-limit-per-key value (docs/configuration.md): "N/window". Pure: read once by the config
// check and by the limiter (operations/rate-limits.ts).

export interface RateLimit {
  /** requests allowed per window */
  readonly requests: number;
  readonly windowMs: number;
}

const UNITS_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/**
 * "N/window": N requests per window, the window a number with a unit (ms, s, m, h) or a bare unit
 * ("600/1m", "10/s"). Returns null for "", "off" and "0"; throws an Error naming the form otherwise.
 */
export function parseRateLimit(text: string | null | undefined): RateLimit | null {
  if (text === null || text === undefined) return null;
  const spec = text.trim().toLowerCase();
  if (spec === '' || spec === 'off' || spec === '0') return null;
  const match = /^(\d+)\s*\/\s*(\d+)?\s*(ms|s|m|h)$/.exec(spec);
  if (!match) throw new Error(`--rate-limit-per-key must be "N/window" such as "600/1m" or "10/s", or "off"; got "${text}"`);
  const requests = Number(match[1]);
  const windowMs = Number(match[2] ?? '1') * UNITS_MS[match[3]];
  if (!Number.isSafeInteger(requests) || requests < 1 || windowMs < 1 || !Number.isSafeInteger(windowMs)) {
    throw new Error(`--rate-limit-per-key must allow at least 1 request per window of at least 1 ms; got "${text}"`);
  }
  return { requests, windowMs };
}

// Timestamp formats of the API. Storage keeps epoch milliseconds (integers) everywhere.

/** "YYYY-MM-DD HH:MM:SS" in UTC: transmissions and history. */
export function formatApiTime(ms: number | null | undefined): string | null {
  if (ms === null || ms === undefined) return null;
  return formatUtc(ms, ' ');
}

/** ISO-8601 with offset ("2026-01-01T10:00:00Z"): get_messages, suppression list. */
export function formatIsoTime(ms: number | null | undefined): string | null {
  if (ms === null || ms === undefined) return null;
  return `${formatUtc(ms, 'T')}Z`;
}

/**
 * "YYYY-MM-DD" + `separator` + "HH:MM:SS" in UTC, to the second. Written from the date's fields:
 * toISOString and then slicing (or a regex) cost 2.5 times as much, and every record of a history
 * page has at least one time (docs/decisions/0003-performance.md). Years outside 0-9999, which
 * toISOString writes with a sign and six digits, and invalid times (a RangeError) go through it.
 */
function formatUtc(ms: number, separator: string): string {
  const d = new Date(ms);
  const year = d.getUTCFullYear();
  if (!(year >= 1000 && year <= 9999)) {
    const iso = d.toISOString();
    return `${iso.slice(0, -14)}${separator}${iso.slice(-13, -5)}`;
  }
  return `${year}-${two(d.getUTCMonth() + 1)}-${two(d.getUTCDate())}${separator}${two(d.getUTCHours())}:${two(d.getUTCMinutes())}:${two(d.getUTCSeconds())}`;
}

function two(n: number): string {
  return n < 10 ? `0${n}` : `${n}`;
}

/** Parses an inclusive "YYYY-MM-DD" date to the epoch ms of its first millisecond (UTC). */
export function parseApiDate(value: string): number | null {
  const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(value);
  if (!m) return null;
  const ms = Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3]));
  const back = new Date(ms);
  if (back.getUTCFullYear() !== Number(m[1]) || back.getUTCMonth() + 1 !== Number(m[2]) || back.getUTCDate() !== Number(m[3])) return null;
  return ms;
}

export const DAY_MS = 86_400_000;

/** Parses "90s", "5m", "2h", "1d" or a bare number of ms. */
export function parseDuration(text: string): number | null {
  const m = /^(\d+)(ms|s|m|h|d)?$/.exec(text.trim());
  if (!m) return null;
  const n = Number(m[1]);
  const unit = m[2] ?? 'ms';
  const factor = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: DAY_MS }[unit]!;
  return n * factor;
}

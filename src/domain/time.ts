// Timestamp formats of the API. Storage keeps epoch milliseconds (integers) everywhere.

/** "YYYY-MM-DD HH:MM:SS" in UTC: transmissions and history. */
export function formatApiTime(ms: number | null | undefined): string | null {
  if (ms === null || ms === undefined) return null;
  return new Date(ms).toISOString().slice(0, 19).replace('T', ' ');
}

/** ISO-8601 with offset ("2026-01-01T10:00:00Z"): get_messages, suppression list. */
export function formatIsoTime(ms: number | null | undefined): string | null {
  if (ms === null || ms === undefined) return null;
  // toISOString always ends in ".sssZ": the milliseconds go by slicing (a regex per event showed in profiles).
  return `${new Date(ms).toISOString().slice(0, -5)}Z`;
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

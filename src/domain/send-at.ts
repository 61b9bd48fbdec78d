// send_message's send_at: when a message is due (docs/api/send-message.md, "Scheduled sends").
//
// Forms: ISO 8601 with a zone ("2026-03-14T09:30:00Z", "2026-03-14T09:30:00.250+01:00"), and
// Mandrill's "YYYY-MM-DD HH:MM:SS", which is UTC. A time without a zone in the ISO form is refused:
// read as the server's local time it would mean different instants on different hosts. A time in
// the past (or now) means now; one further ahead than the limit is refused. Pure: the caller
// gives `now` and the limit.
import { cutText } from './args.ts';
import { callError } from './errors.ts';

const ISO_WITH_ZONE = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2})$/i;
const MANDRILL_UTC = /^(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})$/;

/**
 * The instant (ms) `text` names, or throws 406 naming send_at. Null when `text` is absent.
 * The result is never before `now`.
 */
export function parseSendAt(text: string | null | undefined, now: number, maxAheadMs: number): number | null {
  if (text === null || text === undefined || text.trim() === '') return null;
  const value = text.trim();
  let at: number;
  let m = MANDRILL_UTC.exec(value);
  if (m) {
    at = utc(text, m[1], m[2], m[3], m[4], m[5], m[6], undefined);
  } else if ((m = ISO_WITH_ZONE.exec(value))) {
    at = utc(text, m[1], m[2], m[3], m[4], m[5], m[6] ?? '0', m[7]);
    const zone = m[8].toUpperCase();
    if (zone !== 'Z') {
      const sign = zone[0] === '-' ? -1 : 1;
      const digits = zone.slice(1).replace(':', '');
      const offsetMin = Number(digits.slice(0, 2)) * 60 + Number(digits.slice(2, 4));
      if (Number(digits.slice(0, 2)) > 23 || Number(digits.slice(2, 4)) > 59) throw invalid(text, 'its zone offset is out of range');
      at -= sign * offsetMin * 60_000;
    }
  } else {
    throw invalid(text, 'expected ISO 8601 with a zone ("2026-03-14T09:30:00Z", "...+01:00") or "YYYY-MM-DD HH:MM:SS" in UTC');
  }
  if (at - now > maxAheadMs) {
    throw callError(`argument "send_at" (${JSON.stringify(cutText(text))}) is more than ${Math.round(maxAheadMs / 86_400_000)} days ahead (--max-schedule-ahead-ms)`);
  }
  return Math.max(at, now);
}

function utc(text: string, y: string, mo: string, d: string, h: string, mi: string, s: string, fraction: string | undefined): number {
  const parts = [Number(y), Number(mo), Number(d), Number(h), Number(mi), Number(s)];
  const ms = fraction ? Math.floor(Number(fraction) * 1000) : 0;
  const at = Date.UTC(parts[0], parts[1] - 1, parts[2], parts[3], parts[4], parts[5], ms);
  const back = new Date(at);
  // Date.UTC rolls over (February 30 becomes March 2): a calendar date that does not exist is refused.
  if (
    back.getUTCFullYear() !== parts[0] || back.getUTCMonth() !== parts[1] - 1 || back.getUTCDate() !== parts[2] ||
    back.getUTCHours() !== parts[3] || back.getUTCMinutes() !== parts[4] || back.getUTCSeconds() !== parts[5]
  ) {
    throw invalid(text, 'it is not a valid date and time');
  }
  return at;
}

/** The value is echoed as it was sent, cut to its first 64 characters: a refusal never sends a whole hostile text back. */
function invalid(value: string, why: string) {
  return callError(`argument "send_at" (${JSON.stringify(cutText(value))}) is not a time: ${why}`);
}

// Decoding a request body: UTF-8 first (naming the byte offset of the first bad byte), then one
// scan of the JSON text (nesting, and the numbers JSON.parse would change), then JSON, then the
// top-level shape. Each failure is an ApiError with the spec's status.
import { isUtf8 } from 'node:buffer';
import { ApiError, callError, MESSAGES } from '../../domain/errors.ts';
import { cutText, isPlainObject, noteNumberSpelling, numberSpellingOf, type JsonObject } from '../../domain/args.ts';
import { MAX_ARGUMENT_DEPTH } from './argument-policy.ts';

/** Offset of the first byte that is not part of a well-formed UTF-8 sequence, or -1. */
export function firstInvalidUtf8Offset(buf: Uint8Array): number {
  if (isUtf8(buf)) return -1;
  let i = 0;
  while (i < buf.length) {
    const b = buf[i];
    let need: number;
    let min: number;
    if (b < 0x80) { i++; continue; }
    else if (b >= 0xc2 && b <= 0xdf) { need = 1; min = 0x80; }
    else if (b >= 0xe0 && b <= 0xef) { need = 2; min = 0x800; }
    else if (b >= 0xf0 && b <= 0xf4) { need = 3; min = 0x10000; }
    else return i;
    let cp = b & (0x3f >> need);
    for (let k = 1; k <= need; k++) {
      const c = buf[i + k];
      if (c === undefined || (c & 0xc0) !== 0x80) return i;
      cp = (cp << 6) | (c & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return i;
    i += need + 1;
  }
  return -1;
}

export function decodeBody(buf: Buffer | undefined): JsonObject {
  const bytes = buf ?? Buffer.alloc(0);
  const bad = firstInvalidUtf8Offset(bytes);
  if (bad !== -1) {
    throw new ApiError('invalid_utf8', `Content is not UTF-8 or contains invalid characters: invalid byte at offset ${bad}.`);
  }
  let text = bytes.toString('utf8');
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  const numbers = scanJson(text);
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new ApiError('invalid_json', MESSAGES.invalidJson);
  }
  if (!isPlainObject(parsed)) {
    throw callError('the body must be a JSON object {"api_key": ..., "arguments": {...}}');
  }
  if (numbers.length > 0) keepNumberSpellings(parsed, numbers);
  return parsed;
}

/** A number of the body that JSON.parse would change or whose spelling matters (see NumberNote). */
interface NumberNote {
  /** keys and indices from the body to the value */
  path: Array<string | number>;
  /** the number as written */
  text: string;
  /** a whole number in digits beyond 2^53: kept as its digit string */
  unsafe: boolean;
}

/** An object or array the scan is inside, with where in it the scan is. */
interface Frame {
  array: boolean;
  /** the item's index (arrays) */
  index: number;
  /** the span of the current key's JSON string, quotes included (objects) */
  keyStart: number;
  keyEnd: number;
}

/**
 * One pass over the JSON text, before JSON.parse and without recursion, so that a body nested
 * 100,000 levels deep costs one loop and is refused here (the nesting bound of argument-policy.ts,
 * naming the path), and the numbers JSON.parse would silently change are found as written: a whole
 * number beyond 2^53 (rounded by JSON.parse: 12345678901234567890 would become
 * 12345678901234567000), one written with a fraction or exponent (1e3, 1.0; a whole-number
 * argument refuses it), one too large for a double (1e400, refused here). Strings are skipped with
 * indexOf. What is not JSON is left to JSON.parse to report.
 */
function scanJson(text: string): NumberNote[] {
  const notes: NumberNote[] = [];
  const frames: Frame[] = [];
  let expectKey = false;
  const n = text.length;
  let i = 0;
  while (i < n) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      const end = stringEnd(text, i);
      if (end === -1) break;
      if (expectKey) {
        const frame = frames[frames.length - 1];
        frame.keyStart = i;
        frame.keyEnd = end;
        expectKey = false;
      }
      i = end;
    } else if (c === 0x7b || c === 0x5b) {
      if (frames.length >= MAX_ARGUMENT_DEPTH) {
        throw callError(`${quotePath(pathAt(text, frames))} is nested deeper than ${MAX_ARGUMENT_DEPTH} levels`);
      }
      frames.push({ array: c === 0x5b, index: 0, keyStart: -1, keyEnd: -1 });
      expectKey = c === 0x7b;
      i++;
    } else if (c === 0x7d || c === 0x5d) {
      frames.pop();
      expectKey = false;
      i++;
    } else if (c === 0x2c) {
      const frame = frames[frames.length - 1];
      if (frame?.array) frame.index++;
      else expectKey = frame !== undefined;
      i++;
    } else if (c === 0x2d || (c >= 0x30 && c <= 0x39)) {
      let j = i + 1;
      let plain = true;
      for (; j < n; j++) {
        const d = text.charCodeAt(j);
        if (d >= 0x30 && d <= 0x39) continue;
        if (d === 0x2e || d === 0x65 || d === 0x45 || d === 0x2b || d === 0x2d) plain = false;
        else break;
      }
      // Up to 15 digits is always a safe integer: most numbers end here.
      if (!plain || j - i > 15) noteNumber(text, i, j, plain, frames, notes);
      i = j;
    } else {
      i++;
    }
  }
  return notes;
}

function noteNumber(text: string, start: number, end: number, plain: boolean, frames: Frame[], notes: NumberNote[]): void {
  const written = text.slice(start, end);
  const value = Number(written);
  if (plain) {
    if (!Number.isSafeInteger(value)) notes.push({ path: pathAt(text, frames), text: written, unsafe: true });
    return;
  }
  if (Number.isNaN(value)) return; // not JSON: JSON.parse says so
  if (!Number.isFinite(value)) {
    throw callError(`${quotePath(pathAt(text, frames))} holds the number ${cutText(written, 40)}, which is too large to be read`);
  }
  if (Number.isInteger(value)) notes.push({ path: pathAt(text, frames), text: written, unsafe: false });
}

/** The index after the JSON string that opens at `start`, or -1 when it is not closed. */
function stringEnd(text: string, start: number): number {
  for (let from = start + 1; ; ) {
    const quote = text.indexOf('"', from);
    if (quote === -1) return -1;
    let backslashes = 0;
    for (let b = quote - 1; b > start && text.charCodeAt(b) === 0x5c; b--) backslashes++;
    if (backslashes % 2 === 0) return quote + 1;
    from = quote + 1;
  }
}

/** The keys and indices of where the scan is. */
function pathAt(text: string, frames: readonly Frame[]): Array<string | number> {
  return frames.map((f) => {
    if (f.array) return f.index;
    try {
      return String(JSON.parse(text.slice(f.keyStart, f.keyEnd)));
    } catch {
      return '?';
    }
  });
}

/** "arguments.variables.n", "arguments.recipients[2]"; the body itself when empty (argument-policy.ts's names). */
function quotePath(path: ReadonlyArray<string | number>): string {
  if (path.length === 0) return 'the request body';
  let out = '';
  for (const part of path) out += typeof part === 'number' ? `[${part}]` : out === '' ? part : `.${part}`;
  return `"${cutText(out, 200)}"`;
}

/**
 * Puts back what JSON.parse changed: a whole number beyond 2^53 becomes its digit string (the
 * value the client sent, every digit kept: variables render it, settings store it), and every
 * noted number's spelling is kept for Args.int (domain/args.ts). The last of duplicate keys is
 * the one JSON.parse kept, so notes are applied last first, once per place.
 */
function keepNumberSpellings(body: JsonObject, notes: readonly NumberNote[]): void {
  for (let n = notes.length - 1; n >= 0; n--) {
    const { path, text, unsafe } = notes[n];
    if (path.length === 0) continue;
    let container: unknown = body;
    for (let k = 0; k < path.length - 1 && container !== undefined; k++) {
      container = typeof container === 'object' && container !== null && Object.hasOwn(container, path[k]) ? (container as Record<string | number, unknown>)[path[k]] : undefined;
    }
    const key = path[path.length - 1];
    if (typeof container !== 'object' || container === null || !Object.hasOwn(container, key)) continue;
    const value = (container as Record<string | number, unknown>)[key];
    if (typeof value !== 'number' || value !== Number(text) || numberSpellingOf(container, key) !== undefined) continue;
    // defineProperty: a key named __proto__ is an own property of what JSON.parse made.
    if (unsafe) Object.defineProperty(container, key, { value: text, writable: true, enumerable: true, configurable: true });
    noteNumberSpelling(container, key, text);
  }
}

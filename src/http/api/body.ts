// Decoding a request body: UTF-8 first (naming the byte offset of the first bad byte), then JSON,
// then the top-level shape. Each failure is an ApiError with the spec's status.
import { isUtf8 } from 'node:buffer';
import { ApiError, callError, MESSAGES } from '../../domain/errors.ts';
import { isPlainObject, type JsonObject } from '../../domain/args.ts';

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
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new ApiError('invalid_json', MESSAGES.invalidJson);
  }
  if (!isPlainObject(parsed)) {
    throw callError('the body must be a JSON object {"api_key": ..., "arguments": {...}}');
  }
  return parsed;
}

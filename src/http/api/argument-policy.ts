// One policy for every request body, applied before any method's schema (docs/api/README.md,
// "Limits on every argument"):
//   - no string, and no object key, holds the NUL character (U+0000): PostgreSQL cannot store it,
//     and SQLite must not accept what PostgreSQL refuses, so both databases answer the same;
//   - no string, and no object key, holds a lone UTF-16 surrogate (a "\ud800" escape without its
//     pair): it is no character, so it cannot be encoded in mail, stored as UTF-8 or shown;
//   - no object key is "__proto__": JavaScript objects read it as their prototype, so code that
//     copies such a key would drop it or change the object's other fields;
//   - objects and arrays nest at most MAX_ARGUMENT_DEPTH levels below the body (the body reader
//     refuses deeper bodies before parsing them, http/api/body.ts; this walk is the backstop);
//   - an object holds at most MAX_OBJECT_KEYS keys and an array at most MAX_ARRAY_ITEMS items.
// Each refusal is 406 call_error naming the path ("arguments.recipients[3]"). The walk recurses at
// most MAX_ARGUMENT_DEPTH deep, so a hostile body cannot overflow the stack.
import type { Json } from '../../domain/args.ts';
import { callError } from '../../domain/errors.ts';

export const MAX_ARGUMENT_DEPTH = 32;
export const MAX_OBJECT_KEYS = 10_000;
export const MAX_ARRAY_ITEMS = 10_000;

/** Throws 406 naming the first value of `body` that breaks the policy. */
export function checkArgumentPolicy(body: Json): void {
  visit(body, 0, null, '');
}

/** A surrogate code unit that is not half of a pair (in a `u` regex, a pair is one code point). */
const LONE_SURROGATE = /\p{Surrogate}/u;

function visit(value: Json, depth: number, parent: string | null, key: string | number): void {
  if (typeof value === 'string') {
    if (value.includes('\0')) throw callError(`${quote(parent, key)} must not contain the NUL character (U+0000)`);
    if (LONE_SURROGATE.test(value)) throw callError(`${quote(parent, key)} ${LONE_SURROGATE_WHY}`);
    return;
  }
  if (typeof value !== 'object' || value === null) return;
  if (depth >= MAX_ARGUMENT_DEPTH) {
    throw callError(`${quote(parent, key)} is nested deeper than ${MAX_ARGUMENT_DEPTH} levels`);
  }
  const here = parent === null ? '' : pathOf(parent, key);
  if (Array.isArray(value)) {
    if (value.length > MAX_ARRAY_ITEMS) throw callError(`${quote(parent, key)} holds ${value.length} items; at most ${MAX_ARRAY_ITEMS} are accepted`);
    for (let i = 0; i < value.length; i++) visit(value[i], depth + 1, here, i);
    return;
  }
  let count = 0;
  for (const k in value) {
    if (++count > MAX_OBJECT_KEYS) throw callError(`${quote(parent, key)} holds more than ${MAX_OBJECT_KEYS} keys`);
    if (k.includes('\0')) throw callError(`a key of ${quote(parent, key)} contains the NUL character (U+0000), which is not accepted`);
    if (LONE_SURROGATE.test(k)) throw callError(`a key of ${quote(parent, key)} ${LONE_SURROGATE_WHY}`);
    if (k === '__proto__') throw callError(`${quote(parent, key)} has a key named "__proto__", which is not accepted`);
    visit(value[k], depth + 1, here, k);
  }
}

const LONE_SURROGATE_WHY = 'contains a lone UTF-16 surrogate (a \\uD800-\\uDFFF escape without its pair), which is not a character: it cannot be sent in mail or stored';

function pathOf(parent: string, key: string | number): string {
  if (typeof key === 'number') return `${parent}[${key}]`;
  return parent === '' ? key : `${parent}.${key}`;
}

function quote(parent: string | null, key: string | number): string {
  return parent === null ? 'the request body' : `"${pathOf(parent, key)}"`;
}

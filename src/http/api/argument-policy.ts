// One policy for every request body, applied before any method's schema (docs/api/README.md,
// "Limits on every argument"):
//   - no string, and no object key, holds the NUL character (U+0000): PostgreSQL cannot store it,
//     and SQLite must not accept what PostgreSQL refuses, so both databases answer the same;
//   - objects and arrays nest at most MAX_ARGUMENT_DEPTH levels below the body;
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

function visit(value: Json, depth: number, parent: string | null, key: string | number): void {
  if (typeof value === 'string') {
    if (value.includes('\0')) throw callError(`${quote(parent, key)} must not contain the NUL character (U+0000)`);
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
    visit(value[k], depth + 1, here, k);
  }
}

function pathOf(parent: string, key: string | number): string {
  if (typeof key === 'number') return `${parent}[${key}]`;
  return parent === '' ? key : `${parent}.${key}`;
}

function quote(parent: string | null, key: string | number): string {
  return parent === null ? 'the request body' : `"${pathOf(parent, key)}"`;
}

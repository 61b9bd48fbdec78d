// Objects made from another and a few more fields, on the hot paths (per request, per delivery).
//
// `{ ...base, more: 1 }` reads well, but on Node 20 (V8 11.3) an object made by a spread and then
// given a key the source did not have gets a hidden class of its own, every time: building one
// costs ~0.7-1.3 µs instead of ~0.05, and every place that later reads such objects (our code,
// Kysely, JSON.stringify's fast path) sees a new shape per object and falls back to its slow,
// megamorphic path (docs/decisions/0003-performance.md, "Object spreads"). Object.assign onto a
// fresh literal walks the ordinary shape transitions: the same fields, in the same order, one
// shared shape. A spread that only overwrites keys the source has, or that comes last, is not
// affected.

/** `{ ...base, ...fields }`, with shapes shared between calls (see above). */
export function withFields<A extends object, B extends object>(base: A, fields: B): Omit<A, keyof B> & B {
  return Object.assign({}, base, fields);
}

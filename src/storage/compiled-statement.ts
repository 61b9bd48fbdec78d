// Statements of a fixed shape run once per delivered message (a finish, a suppression lookup),
// built and compiled by Kysely ONCE per dialect instance and then executed with fresh values: the
// technique of compiled-insert.ts for any statement. Building and compiling a statement costs
// more than SQLite takes to run it (docs/decisions/0003-performance.md, item e); the SQL still
// comes from Kysely for the store's dialect.
//
// How values are mapped: the statement is built once with a marker object standing for each named
// value; the compiled parameter list then says, position by position, which value goes there.
// Parameters that are not markers (literals Kysely binds itself) are kept as compiled.
import { CompiledQuery, type Compilable } from 'kysely';
import type { Tx } from './schema.ts';

interface Marker {
  readonly value: string;
}

const isMarker = (parameter: unknown): parameter is Marker => typeof parameter === 'object' && parameter !== null && Object.getPrototypeOf(parameter) === MARKER_PROTOTYPE;
const MARKER_PROTOTYPE = { marker: true };

export class CompiledStatement<Name extends string, Row = unknown> {
  /** per query adapter (one per dialect instance) */
  private readonly cache = new WeakMap<object, { sql: string; parameters: readonly unknown[] }>();

  /** @param build the statement, `value(name)` standing for each value it takes */
  constructor(private readonly build: (db: Tx, value: (name: Name) => never) => Compilable<Row>) {}

  /** The statement with these values, ready for db.executeQuery. */
  with(db: Tx, values: Readonly<Record<Name, unknown>>): CompiledQuery<Row> {
    const adapter = db.getExecutor().adapter;
    let compiled = this.cache.get(adapter);
    if (!compiled) {
      const marker = (name: Name) => Object.assign(Object.create(MARKER_PROTOTYPE) as object, { value: name }) as never;
      const query = this.build(db, marker).compile();
      compiled = { sql: query.sql, parameters: query.parameters };
      this.cache.set(adapter, compiled);
    }
    return CompiledQuery.raw(
      compiled.sql,
      compiled.parameters.map((p) => (isMarker(p) ? (values[p.value as Name] ?? null) : p)),
    ) as CompiledQuery<Row>;
  }
}

/**
 * The ids with the last one repeated up to the next power of two: `IN (...)` lists of a few sizes
 * only, so neither SQLite's statement cache (dialects/sqlite.ts, keyed by SQL text) nor the
 * server's prepared statements are churned by one text per batch size. Repeats match the same
 * rows; they change nothing.
 */
export function padToPowerOfTwo(ids: readonly number[]): number[] {
  let size = 1;
  while (size < ids.length) size *= 2;
  const padded = ids.slice();
  while (padded.length < size) padded.push(ids[ids.length - 1]);
  return padded;
}

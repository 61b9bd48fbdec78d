// INSERTs of a fixed shape, built and compiled by Kysely ONCE and then executed with fresh
// parameters. Building and compiling a query costs ~5-8 µs (measured: 7.7 µs for the message insert
// on this machine), a measurable share of an ingest request at 10,000/s, and the insert shapes of
// send_message never change. The SQL still comes from Kysely for the store's dialect (placeholders,
// quoting), so nothing dialect-specific is written here.
//
// How parameters are mapped: the query is compiled once with a unique marker object as each value;
// the compiled parameter list then says, position by position, which row and column goes there.
import { CompiledQuery, type InsertObject } from 'kysely';
import type { Database } from './schema.ts';
import type { Tx } from './schema.ts';

type Table = keyof Database & string;

interface Marker {
  row: number;
  column: string;
}

interface Prepared {
  sql: string;
  slots: Marker[];
}

/**
 * Row counts cached per shape (a handful of SQL strings): up to 16, and the powers of two up to
 * 256 that batches chunked by storage/delivery-queue.ts powerOfTwoChunks come in; other counts are
 * compiled each time.
 */
const isCachedRowCount = (rows: number) => rows <= 16 || (rows <= 256 && (rows & (rows - 1)) === 0);

export class CompiledInsert<T extends Table> {
  /** per query adapter (one per dialect instance), per row count */
  private readonly cache = new WeakMap<object, Map<number, Prepared>>();

  /**
   * @param computed columns whose value is an expression of the row's values (a subquery, say):
   *   built once like the rest, `value(column)` standing for that column's value in the row
   */
  constructor(
    private readonly table: T,
    private readonly columns: readonly (keyof InsertObject<Database, T> & string)[],
    private readonly returningId: boolean,
    private readonly computed: Readonly<Record<string, (value: (column: string) => unknown) => unknown>> = {},
  ) {}

  private prepare(db: Tx, rowCount: number): Prepared {
    const markers: Array<Record<string, unknown>> = [];
    for (let row = 0; row < rowCount; row++) {
      const values: Record<string, unknown> = {};
      for (const column of this.columns) values[column] = { row, column } satisfies Marker;
      for (const [column, build] of Object.entries(this.computed)) values[column] = build((source) => ({ row, column: source }) satisfies Marker);
      markers.push(values);
    }
    // The markers stand in for values only while compiling; they never reach the database.
    const builder = db.insertInto(this.table).values(markers as never);
    const compiled = this.returningId ? builder.returning('id' as never).compile() : builder.compile();
    return { sql: compiled.sql, slots: compiled.parameters as Marker[] };
  }

  private prepared(db: Tx, rowCount: number): Prepared {
    if (!isCachedRowCount(rowCount)) return this.prepare(db, rowCount);
    const adapter = db.getExecutor().adapter;
    let byCount = this.cache.get(adapter);
    if (!byCount) this.cache.set(adapter, (byCount = new Map()));
    let prepared = byCount.get(rowCount);
    if (!prepared) byCount.set(rowCount, (prepared = this.prepare(db, rowCount)));
    return prepared;
  }

  /** Inserts the rows (every declared column is written; undefined is written as NULL). */
  async execute(db: Tx, rows: ReadonlyArray<Record<string, unknown>>): Promise<Array<{ id: number }>> {
    const { sql, slots } = this.prepared(db, rows.length);
    const parameters = slots.map((slot) => rows[slot.row][slot.column] ?? null);
    const result = await db.executeQuery<{ id: number }>(CompiledQuery.raw(sql, parameters));
    return result.rows;
  }
}

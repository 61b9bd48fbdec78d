// SQLite prepares a statement again each time a bare `LIMIT ?` is bound, which made every cached
// statement with a bound LIMIT (the delivery claim, the suppression lookup) compile anew on every
// run. The SQLite dialect writes a bound LIMIT as `limit cast(? as integer)` (storage/dialects/sqlite.ts):
// the value stays a parameter, the rows are the same.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { openSqlite } from '../../src/storage/dialects/sqlite.ts';
import type { StoreDialect } from '../../src/storage/dialect.ts';

describe('SQLite: a bound LIMIT', () => {
  let dir: string;
  let dialect: StoreDialect;
  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'posthorn-limit-'));
    dialect = openSqlite(path.join(dir, 'limit.db'));
    await dialect.db.schema.createTable('t').addColumn('id', 'integer', (c) => c.primaryKey()).execute();
    await dialect.db.insertInto('t' as never).values(Array.from({ length: 10 }, (_, i) => ({ id: i + 1 })) as never).execute();
  });
  after(async () => {
    await dialect.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('is written as a cast parameter, and limits the rows as given', async () => {
    const query = (limit: number) => dialect.db.selectFrom('t' as never).select('id' as never).orderBy('id' as never).limit(limit);
    const compiled = query(3).compile();
    assert.match(compiled.sql, /limit cast\(\? as integer\)$/);
    assert.deepEqual(compiled.parameters, [3]);
    for (const n of [1, 3, 10, 0]) assert.equal((await query(n).execute()).length, n);
    // OFFSET is not affected by the re-preparation and keeps its plain form.
    assert.match(query(2).offset(4).compile().sql, /limit cast\(\? as integer\) offset \?$/);
    assert.deepEqual((await query(2).offset(4).execute()).map((r) => (r as { id: number }).id), [5, 6]);
  });
});

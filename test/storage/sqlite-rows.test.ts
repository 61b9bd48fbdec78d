// The SQLite dialect reads rows as arrays and makes the objects itself (storage/dialects/sqlite.ts,
// guardStatement): the objects must be exactly what better-sqlite3 itself gives, for every query
// shape, streamed or not, and stay right when the schema changes under a cached statement.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import SqliteDatabase from 'better-sqlite3';
import { sql } from 'kysely';
import { openSqlite } from '../../src/storage/dialects/sqlite.ts';
import type { StoreDialect } from '../../src/storage/dialect.ts';

describe('SQLite: rows read as arrays', () => {
  let dir: string;
  let file: string;
  let dialect: StoreDialect;
  let direct: SqliteDatabase.Database;
  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'posthorn-rows-'));
    file = path.join(dir, 'rows.db');
    dialect = openSqlite(file);
    await sql`CREATE TABLE r (id INTEGER PRIMARY KEY, name TEXT, n REAL, b BLOB, big INTEGER)`.execute(dialect.db);
    await sql`INSERT INTO r (id, name, n, b, big) VALUES (1, 'one', 1.5, x'00ff', 9007199254740991), (2, NULL, NULL, NULL, -3), (3, 'three', 0, x'', 0)`.execute(dialect.db);
    direct = new SqliteDatabase(file);
  });
  after(async () => {
    direct.close();
    await dialect.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const queries = [
    'SELECT * FROM r ORDER BY id',
    'SELECT name, id FROM r ORDER BY id DESC',
    // Two columns of one name: the last one wins, as in better-sqlite3's own objects.
    'SELECT a.id, b.name AS id FROM r AS a JOIN r AS b ON b.id = a.id ORDER BY a.id',
    'SELECT count(*) AS c, max(big) FROM r',
    'SELECT * FROM r WHERE id > 99',
    'UPDATE r SET n = n WHERE id = 3 RETURNING id, n',
  ];
  for (const text of queries) {
    it(`gives what better-sqlite3 gives: ${text}`, async () => {
      const ours = (await sql.raw(text).execute(dialect.db)).rows;
      const theirs = direct.prepare(text).all();
      assert.deepEqual(ours, theirs);
      for (const row of ours as Array<Record<string, unknown>>) assert.deepEqual(Object.keys(row), Object.keys(theirs[0] as object));
      // Cached by its text: the second run reuses the statement and gives the same.
      assert.deepEqual((await sql.raw(text).execute(dialect.db)).rows, theirs);
    });
  }

  it('streams the same objects, and a stream left early frees the connection', async () => {
    const streamed: unknown[] = [];
    for await (const row of dialect.db.selectFrom('r' as never).selectAll().orderBy('id' as never).stream()) streamed.push(row);
    assert.deepEqual(streamed, direct.prepare('SELECT * FROM r ORDER BY id').all());
    for await (const row of dialect.db.selectFrom('r' as never).selectAll().orderBy('id' as never).stream()) {
      assert.equal((row as { id: number }).id, 1);
      break;
    }
    assert.equal((await sql`SELECT count(*) AS c FROM r`.execute(dialect.db)).rows.length, 1);
  });

  it('follows a column renamed through its own connection (a migration)', async () => {
    const text = 'SELECT * FROM r WHERE id = 1';
    assert.deepEqual(Object.keys((await sql.raw(text).execute(dialect.db)).rows[0] as object), ['id', 'name', 'n', 'b', 'big']);
    // The same number of columns: only the names tell.
    await sql`ALTER TABLE r RENAME COLUMN name TO label`.execute(dialect.db);
    const row = (await sql.raw(text).execute(dialect.db)).rows[0] as Record<string, unknown>;
    assert.equal(row.label, 'one');
    assert.deepEqual(row, direct.prepare(text).get());
  });

  it('follows a column added by another connection', async () => {
    const text = 'SELECT * FROM r WHERE id = 2';
    await sql.raw(text).execute(dialect.db);
    direct.exec("ALTER TABLE r ADD COLUMN other INTEGER DEFAULT 7");
    const row = (await sql.raw(text).execute(dialect.db)).rows[0] as Record<string, unknown>;
    assert.equal(row.other, 7);
    assert.deepEqual(row, direct.prepare(text).get());
  });
});

// Two writers on one SQLite file (serve's API and delivery processes, or any two stores): a grouped
// transaction takes SQLite's write lock when it begins (BEGIN IMMEDIATE), and a store that finds
// the lock held waits for it on the event loop, not in SQLite's sleeping busy handler
// (storage/store.ts flush, storage/dialects/sqlite.ts; docs/decisions/0003-performance.md,
// "Two writers on one file").
//
// Each store here has its own connection, as each process has: SQLite's locks are per connection,
// so two stores in this one process meet them exactly as two processes do; and since they share
// one event loop, a store that slept in SQLite's busy handler would stop the other from ever
// releasing the lock (the second test fails that way, after busy_timeout).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import SqliteDatabase from 'better-sqlite3';
import { sql } from 'kysely';
import { openStore, type Store } from '../../src/storage/store.ts';

const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('SQLite: two writers on one file', () => {
  let dir: string;
  let first: Store;
  let second: Store;
  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'posthorn-write-lock-'));
    first = await openStore({ databaseUrl: null, data: dir });
    second = await openStore({ databaseUrl: null, data: dir });
    await first.write(async (trx) => {
      await trx.schema.createTable('notes').addColumn('id', 'integer', (c) => c.primaryKey()).addColumn('body', 'text', (c) => c.notNull()).execute();
    });
  });
  after(async () => {
    await first?.close();
    await second?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const count = async (store: Store, body: string) =>
    Number((await sql<{ n: number }>`select count(*) as n from notes where body = ${body}`.execute(store.db)).rows[0].n);

  it('a unit that reads before it writes commits while the other store commits beside it', async () => {
    // The first store's unit reads, gives the event loop a few turns (the other store's write
    // runs then), and writes. In a transaction begun as a reader (plain BEGIN), that write finds
    // its snapshot overtaken and SQLite answers SQLITE_BUSY at once, busy handler or not.
    let secondDone = false;
    const reader = first.write(async (trx) => {
      const before = Number((await sql<{ n: number }>`select count(*) as n from notes`.execute(trx)).rows[0].n);
      for (let i = 0; i < 5 && !secondDone; i++) await turn();
      await sql`insert into notes (body) values (${'read-then-write'})`.execute(trx);
      return before;
    });
    const writer = second.write(async (trx) => {
      await sql`insert into notes (body) values (${'beside'})`.execute(trx);
    }).then(() => {
      secondDone = true;
    });
    const [read, wrote] = await Promise.allSettled([reader, writer]);
    assert.equal(read.status, 'fulfilled', read.status === 'rejected' ? String(read.reason) : '');
    assert.equal(wrote.status, 'fulfilled', wrote.status === 'rejected' ? String(wrote.reason) : '');
    assert.equal(await count(first, 'read-then-write'), 1);
    assert.equal(await count(first, 'beside'), 1);
  });

  it('a store that finds the write lock held keeps its event loop running and commits once it is free', async () => {
    // A raw connection holds the lock while this event loop must go on: the lock is released by a
    // timer of this same loop, and the store's write must then commit.
    const holder = new SqliteDatabase(path.join(dir, 'posthorn.db'));
    holder.exec('BEGIN IMMEDIATE');
    holder.exec("INSERT INTO notes (body) VALUES ('held')");
    let turnsWhileHeld = 0;
    const ticker = setInterval(() => turnsWhileHeld++, 5);
    const release = new Promise<void>((resolve) =>
      setTimeout(() => {
        holder.exec('COMMIT');
        resolve();
      }, 200),
    );
    try {
      const started = performance.now();
      await second.write(async (trx) => {
        await sql`insert into notes (body) values (${'after-held'})`.execute(trx);
      });
      const waitedMs = performance.now() - started;
      await release;
      assert.ok(waitedMs >= 150, `the write waited for the lock (${waitedMs.toFixed(0)} ms)`);
      assert.ok(turnsWhileHeld >= 10, `the event loop ran while the lock was held (${turnsWhileHeld} timer turns)`);
      assert.equal(await count(second, 'held'), 1);
      assert.equal(await count(second, 'after-held'), 1);
    } finally {
      clearInterval(ticker);
      if (holder.inTransaction) holder.exec('ROLLBACK');
      holder.close();
    }
  });
});

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

  /**
   * A raw connection holds the write lock while `store` writes. The lock is released by a timer of
   * this same event loop once it has turned TURNS times (or at a deadline, which fails the test), so
   * a stalled host makes this slower, never wrong. A store that waited for the lock inside SQLite's
   * busy handler would stop the loop: no turn, no release, and its write fails at busy_timeout.
   */
  async function writeWhileLockHeld(store: Store, body: string): Promise<void> {
    const TURNS = 10;
    const DEADLINE_MS = 5_000;
    const holder = new SqliteDatabase(path.join(dir, 'posthorn.db'));
    holder.exec('BEGIN IMMEDIATE');
    holder.exec(`INSERT INTO notes (body) VALUES ('held ${body}')`);
    let turnsWhileHeld = 0;
    let written = false;
    let waitingAtRelease = false;
    let ticker: NodeJS.Timeout | undefined;
    const release = new Promise<void>((resolve) => {
      const started = performance.now();
      ticker = setInterval(() => {
        turnsWhileHeld++;
        if (turnsWhileHeld < TURNS && performance.now() - started < DEADLINE_MS) return;
        clearInterval(ticker);
        waitingAtRelease = !written;
        holder.exec('COMMIT');
        resolve();
      }, 5);
    });
    try {
      await store.write(async (trx) => {
        await sql`insert into notes (body) values (${body})`.execute(trx);
      });
      written = true;
      await release;
      assert.ok(turnsWhileHeld >= TURNS, `the event loop ran while the lock was held (${turnsWhileHeld} timer turns before the deadline)`);
      assert.ok(waitingAtRelease, 'the write waited for the lock: it was not written before the lock was released');
      assert.equal(await count(store, `held ${body}`), 1);
      assert.equal(await count(store, body), 1);
    } finally {
      clearInterval(ticker);
      if (holder.inTransaction) holder.exec('ROLLBACK');
      holder.close();
    }
  }

  it('a store that finds the write lock held keeps its event loop running and commits once it is free', async () => {
    // A new store: the first write of its connection (SQLite applies a prepared PRAGMA
    // busy_timeout only when it compiles it, dialects/sqlite.ts), then another.
    const fresh = await openStore({ databaseUrl: null, data: dir });
    try {
      await writeWhileLockHeld(fresh, 'first write');
      await writeWhileLockHeld(fresh, 'second write');
      await writeWhileLockHeld(second, 'a store that wrote before');
    } finally {
      await fresh.close();
    }
  });
});

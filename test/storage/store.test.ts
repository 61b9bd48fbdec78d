// The storage seam on the run's database (SQLite, then PostgreSQL): store.write's atomicity and
// isolation of failing units (grouped on SQLite, one transaction each on PostgreSQL), unique
// violations recognised, integers read back as JS numbers, migrations idempotent.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { isUniqueViolationError, skippingLocked } from '../../src/storage/dialect.ts';
import { insertedOrDuplicate, isDuplicate } from '../../src/storage/duplicates.ts';
import { migrateToLatest } from '../../src/storage/migrate.ts';
import type { Tx } from '../../src/storage/store.ts';
import { openTestStore, testDatabase, type TestStore } from '../helpers/databases.ts';

const NOW = 1_800_000_000_123; // past 2^32, so a 32-bit integer column or parser would break it

function insertAccount(trx: Tx, uid: string) {
  return trx
    .insertInto('accounts')
    .values({ uid, name: uid, status: 'active', settings: '{}', created_at: NOW, updated_at: NOW })
    .returningAll()
    .executeTakeFirstOrThrow();
}

async function accountUids(t: TestStore, prefix: string): Promise<string[]> {
  const rows = await t.store.db.selectFrom('accounts').select('uid').where('uid', 'like', `${prefix}%`).orderBy('uid').execute();
  return rows.map((r) => r.uid);
}

describe(`store on ${testDatabase()}`, () => {
  let t: TestStore;
  before(async () => {
    t = await openTestStore();
  });
  after(() => t.close());

  it('declares the capabilities of its database', () => {
    const d = t.store.dialect;
    assert.equal(d.name, testDatabase());
    assert.equal(t.store.kind, d.name);
    // Claims skip locked rows where the database has row locks (storage decides: dialect.ts).
    const claimSql = skippingLocked(t.store.db.selectFrom('accounts').select('id'), t.store.db).compile().sql;
    assert.equal(/for update skip locked/i.test(claimSql), d.name === 'postgres', claimSql);
    if (d.name === 'postgres') {
      assert.equal(d.groupCommit, false);
      assert.equal(d.bigintType, 'bigint');
      assert.equal(typeof d.notify, 'function');
      assert.equal(typeof d.listen, 'function');
    } else {
      assert.equal(d.groupCommit, true);
    }
  });

  it('write() commits the unit and returns its value; ids, epoch ms and count(*) read back as numbers', async () => {
    const row = await t.store.write((trx) => insertAccount(trx, 'num-1'));
    assert.equal(typeof row.id, 'number');
    assert.equal(row.created_at, NOW);
    const read = await t.store.db.selectFrom('accounts').selectAll().where('id', '=', row.id).executeTakeFirstOrThrow();
    assert.equal(read.created_at, NOW);
    assert.equal(typeof read.id, 'number');
    const { n } = await t.store.db.selectFrom('accounts').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
    assert.equal(typeof n, 'number');
    assert.ok(n >= 1);
    const { total } = await t.store.db
      .selectFrom('accounts')
      .select(sql<number>`sum(created_at)`.as('total'))
      .where('id', '=', row.id)
      .executeTakeFirstOrThrow();
    assert.equal(total, NOW);
  });

  it('a unit that throws is rolled back alone, even when it arrives in the same turn as others', async () => {
    const results = await Promise.allSettled([
      t.store.write((trx) => insertAccount(trx, 'grp-a')),
      t.store.write(async (trx) => {
        await insertAccount(trx, 'grp-b');
        throw new Error('unit b fails after writing');
      }),
      t.store.write((trx) => insertAccount(trx, 'grp-c')),
    ]);
    assert.deepEqual(
      results.map((r) => r.status),
      ['fulfilled', 'rejected', 'fulfilled'],
    );
    assert.match(String((results[1] as PromiseRejectedResult).reason), /unit b fails/);
    assert.deepEqual(await accountUids(t, 'grp-'), ['grp-a', 'grp-c']);
  });

  it('a unique violation is recognised inside storage (isUniqueViolationError), rolls back its unit and leaves the others', async () => {
    await t.store.write((trx) => insertAccount(trx, 'uniq-1'));
    const results = await Promise.allSettled([
      t.store.write((trx) => insertAccount(trx, 'uniq-2')),
      t.store.write(async (trx) => {
        await insertAccount(trx, 'uniq-3');
        return insertAccount(trx, 'uniq-1');
      }),
    ]);
    assert.equal(results[0].status, 'fulfilled');
    assert.equal(results[1].status, 'rejected');
    const error = (results[1] as PromiseRejectedResult).reason;
    assert.equal(isUniqueViolationError(error), true, String(error));
    assert.equal(isUniqueViolationError(new Error('other')), false);
    assert.equal(isUniqueViolationError(null), false);
    assert.deepEqual(await accountUids(t, 'uniq-'), ['uniq-1', 'uniq-2']);
  });

  it('an insert that hits a unique key returns { duplicate: true } (storage/duplicates.ts); other errors still throw', async () => {
    await t.store.write((trx) => insertAccount(trx, 'dup-1'));
    const again = await t.store.write(async (trx) => insertedOrDuplicate(insertAccount(trx, 'dup-1')));
    assert.equal(isDuplicate(again), true);
    const fresh = await t.store.write(async (trx) => insertedOrDuplicate(insertAccount(trx, 'dup-2')));
    assert.equal(isDuplicate(fresh), false);
    await assert.rejects(t.store.write(async (trx) => insertedOrDuplicate(sql`select * from no_such_table`.execute(trx))));
    assert.deepEqual(await accountUids(t, 'dup-'), ['dup-1', 'dup-2']);
  });

  it('many concurrent writes all commit, none lost (grouped on SQLite, pooled on PostgreSQL)', async () => {
    const count = 300;
    const rows = await Promise.all(Array.from({ length: count }, (_, i) => t.store.write((trx) => insertAccount(trx, `many-${String(i).padStart(4, '0')}`))));
    assert.equal(new Set(rows.map((r) => r.id)).size, count);
    assert.equal((await accountUids(t, 'many-')).length, count);
  });

  it('no write() settles before its commit: another connection already sees the row when the promise resolves', async () => {
    const reader = await t.openAnother();
    const seen = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        t.store.write((trx) => insertAccount(trx, `visible-${i}`)).then(async (row) => {
          const found = await reader.db.selectFrom('accounts').select('id').where('id', '=', row.id).executeTakeFirst();
          return found !== undefined;
        }),
      ),
    );
    assert.deepEqual(seen.filter((v) => !v).length, 0, 'a write resolved before another connection could see it');
  });

  it('close() lets writes already queued finish, then refuses new ones', async () => {
    const other = await t.openAnother();
    const pending = Array.from({ length: 20 }, (_, i) => other.write((trx) => insertAccount(trx, `closing-${String(i).padStart(2, '0')}`)));
    await other.close();
    await Promise.all(pending);
    await assert.rejects(other.write((trx) => insertAccount(trx, 'closing-late')), /closed/);
    assert.equal((await accountUids(t, 'closing-')).length, 20);
  });

  it('migrations are idempotent: a second run applies nothing and changes nothing', async () => {
    const before = await t.store.db.selectFrom('accounts').select('uid').execute();
    assert.deepEqual(await migrateToLatest(t.store.dialect), []);
    assert.deepEqual(await migrateToLatest(t.store.dialect), []);
    assert.equal((await t.store.db.selectFrom('accounts').select('uid').execute()).length, before.length);
  });

  it('wake() reaches the listeners of this process', async () => {
    let woken = 0;
    const unlisten = await t.store.onWake('events', () => woken++);
    t.store.wake('events');
    await unlisten();
    t.store.wake('events');
    assert.equal(woken, 1);
  });
});

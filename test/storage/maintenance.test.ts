// A worker says at start when PostgreSQL will not vacuum and analyze the queue's tables by itself
// (src/app.ts, storage/ops-stats.ts maintenanceProblem; docs/operations.md, "Vacuum"): autovacuum
// or track_counts off for the server, or autovacuum_enabled = false on one of the tables. SQLite
// has nothing to say. The server's own setting decides which answer is right: both are checked.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { maintenanceProblem } from '../../src/storage/ops-stats.ts';
import { openTestStore, testDatabase, type TestStore } from '../helpers/databases.ts';

describe('the database maintenance check', () => {
  let t: TestStore;
  before(async () => {
    t = await openTestStore();
  });
  after(() => t.close());

  it('has nothing to say on SQLite', { skip: testDatabase() === 'postgres' ? 'SQLite only' : false }, async () => {
    assert.equal(await maintenanceProblem(t.store.db), null);
  });

  it("on PostgreSQL, names what is off: the server's settings and the queue tables'", { skip: testDatabase() === 'sqlite' ? 'PostgreSQL only' : false }, async () => {
    const db = t.store.db;
    const { rows } = await sql<{ autovacuum: string; track_counts: string }>`select current_setting('autovacuum') as autovacuum, current_setting('track_counts') as track_counts`.execute(db);
    const serverOff = rows[0].autovacuum === 'off' || rows[0].track_counts === 'off';
    const before = await maintenanceProblem(db);
    if (serverOff) assert.match(before ?? '', /^PostgreSQL will not vacuum nor analyze the queue's tables: (autovacuum|track_counts) is off \(the server's setting\)\. Turn autovacuum on, or run VACUUM ANALYZE from cron/);
    else assert.equal(before, null);

    await sql`alter table transmissions set (autovacuum_enabled = false)`.execute(db);
    await sql`alter table events set (autovacuum_enabled = false)`.execute(db);
    try {
      const off = await maintenanceProblem(db);
      assert.match(off ?? '', /autovacuum_enabled = false on events, transmissions\. Turn autovacuum on/);
      assert.equal(/the server's setting/.test(off ?? ''), serverOff);
    } finally {
      await sql`alter table transmissions reset (autovacuum_enabled)`.execute(db);
      await sql`alter table events reset (autovacuum_enabled)`.execute(db);
    }
    assert.equal(await maintenanceProblem(db), before);
  });
});

// posthorn-test: runs alone (it stops PostgreSQL; scripts/run-tests.js runs it after the others).
// /readyz (docs/operations.md, "Health"): not ready while a migration of this build is not applied,
// not ready while PostgreSQL is stopped (and /healthz still alive), ready again when it is back.
// PostgreSQL is ALWAYS started again (finally), whatever happens; every wait is bounded.
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import path from 'node:path';
import SqliteDatabase from 'better-sqlite3';
import { sql } from 'kysely';
import { startTestApp } from '../helpers/app.ts';
import { onlyOn } from '../helpers/databases.ts';
import { canControlPostgres, controlPostgresCluster, waitForPostgres } from '../helpers/postgres.ts';
import { scrapeUntil } from './prometheus.ts';

async function readyz(url: string): Promise<{ status: number; body: { status: string; checks: Record<string, string> } }> {
  const r = await fetch(url + '/readyz');
  return { status: r.status, body: await r.json() };
}

/** Polls /readyz until it answers `status` (bounded). */
async function readyzUntil(url: string, status: number, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const r = await readyz(url);
    if (r.status === status) return r;
    if (Date.now() > deadline) throw new Error(`/readyz stayed ${r.status}: ${JSON.stringify(r.body)}`);
    await new Promise((res) => setTimeout(res, 200));
  }
}

const pgSkip = onlyOn('postgres') || (canControlPostgres() ? false : 'needs root and pg_ctlcluster to stop and start PostgreSQL');

describe('readiness', () => {
  const cleanup: Array<() => Promise<void>> = [];
  after(async () => {
    for (const f of cleanup.reverse()) await f();
  });

  it('is not ready while a migration of this build is missing from the database', async () => {
    const t = await startTestApp();
    cleanup.push(() => t.close());
    const db = t.app.services.store.db;
    const name = '110-retention-indexes';
    const row = await sql<{ name: string; timestamp: string }>`select name, timestamp from posthorn_migrations where name = ${name}`.execute(db);
    assert.equal(row.rows.length, 1);
    await sql`delete from posthorn_migrations where name = ${name}`.execute(db);
    const r = await readyz(t.url);
    assert.equal(r.status, 503);
    assert.equal(r.body.status, 'not ready');
    assert.equal(r.body.checks.migrations, `pending: ${name}`);
    await sql`insert into posthorn_migrations (name, timestamp) values (${name}, ${row.rows[0].timestamp})`.execute(db);
    assert.equal((await readyz(t.url)).status, 200);
  });

  it('turns false, with posthorn_database_up 0, while the SQLite file cannot be written (its write lock held elsewhere), and true when it can', { skip: onlyOn('sqlite'), timeout: 120_000 }, async () => {
    const t = await startTestApp();
    cleanup.push(() => t.close());
    const seed = await t.seed();
    let sent = 0;
    const send = () => t.call('send_message', { api_key: seed.projectKey, arguments: { recipients: [`a${sent++}@example.test`], content: { 'text/plain': 'hi' }, headers: { subject: 'x', from: 'f@example.test' } } });
    assert.equal((await send()).status, 200);
    assert.equal((await readyz(t.url)).status, 200);
    // Another connection (another process, an operator's sqlite3 shell) holds the write lock.
    const holder = new SqliteDatabase(path.join(t.dataDir, 'posthorn.db'));
    holder.exec('BEGIN IMMEDIATE');
    try {
      const locked = await send();
      assert.equal(locked.status, 503, JSON.stringify(locked.body));
      assert.match(locked.body.response.message, /^The database is unavailable \(database locked by another connection\); nothing/);
      assert.ok(!locked.body.response.message.includes(t.dataDir), 'no path in the answer');
      const down = await readyzUntil(t.url, 503);
      assert.match(down.body.checks.database, /^unavailable: /);
      assert.ok(!JSON.stringify(down.body).includes(t.dataDir), 'no path in /readyz');
      assert.equal(down.body.checks.migrations, 'ok', 'passed once, not asked again');
      await scrapeUntil(t.url, 'posthorn_database_up 0', (s) => s.some((x) => x.name === 'posthorn_database_up' && x.value === 0));
    } finally {
      holder.exec('ROLLBACK');
      holder.close();
    }
    // Nothing is sent meanwhile: readiness finds out by a write of its own.
    const back = await readyzUntil(t.url, 200);
    assert.equal(back.body.checks.database, 'ok');
    await scrapeUntil(t.url, 'posthorn_database_up 1', (s) => s.some((x) => x.name === 'posthorn_database_up' && x.value === 1));
    const again = await send();
    assert.equal(again.status, 200, JSON.stringify(again.body));
  });

  it('turns false when PostgreSQL is stopped and true when it is back', { skip: pgSkip, timeout: 180_000 }, async () => {
    const t = await startTestApp();
    cleanup.push(() => t.close());
    assert.equal((await readyz(t.url)).status, 200);
    try {
      controlPostgresCluster('stop');
      const down = await readyzUntil(t.url, 503);
      assert.match(down.body.checks.database, /^unavailable: /);
      assert.ok(!down.body.checks.database.includes('postgres://'), 'no connection string in the answer');
      // Alive all the same: a liveness probe must not restart a process for its database's outage.
      assert.equal((await fetch(t.url + '/healthz')).status, 200);
      // Metrics still answer, saying the database is down.
      const metrics = await (await fetch(t.url + '/metrics')).text();
      assert.match(metrics, /^posthorn_database_up 0$/m);
    } finally {
      controlPostgresCluster('start');
      await waitForPostgres();
    }
    const back = await readyzUntil(t.url, 200);
    assert.equal(back.body.checks.database, 'ok');
  });
});

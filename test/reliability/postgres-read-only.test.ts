// PostgreSQL that answers but cannot write now (docs/reliability.md, "What PostgreSQL errors count as
// unavailable"): after a failover a process may reach a standby or a demoted primary, and an
// operator may set default_transaction_read_only; every write then fails with 25006. That is an
// outage like a stopped server: the API answers 503 with Retry-After (never 500), a job's claim
// pauses the job, /readyz is not ready, and everything works again once the server takes writes.
//
// The read-only server is real: the test's own scratch database (made for this test, dropped after)
// gets `default_transaction_read_only = on`, and the sessions opened before are ended so the pool
// opens new ones under it. Errors no test can provoke safely (disk full, out of memory, ...) are
// classed here from their SQLSTATE alone.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import pino from 'pino';
import { postgresUnavailable } from '../../src/storage/dialects/postgres.ts';
import { claimDueOutbound } from '../../src/storage/outbound.ts';
import { isStoreUnavailable } from '../../src/storage/store.ts';
import { OutageWatch } from '../../src/workers/outage.ts';
import { startTestApp } from '../helpers/app.ts';
import { onlyOn } from '../helpers/databases.ts';
import { adminQuery } from '../helpers/postgres.ts';
import { until } from '../helpers/wait.ts';

describe('which PostgreSQL errors count as unavailable (by SQLSTATE; runs on every database)', () => {
  const classed = (code: string, message = 'the server said no') => postgresUnavailable(Object.assign(new Error(message), { code }));

  it('what means the server cannot write now: unavailable, named by its cause', () => {
    for (const [code, prefix] of [
      ['57P01', 'database unreachable'],
      ['57P02', 'database unreachable'],
      ['57P03', 'database unreachable'],
      ['57P05', 'database unreachable'],
      ['53300', 'database unreachable'],
      ['08006', 'database unreachable'],
      ['ECONNREFUSED', 'database unreachable'],
      ['25006', 'database read-only'],
      ['53100', 'database disk full'],
      ['58030', 'database I/O error'],
    ]) {
      const error = classed(code);
      assert.ok(error, `${code} is unavailable`);
      assert.equal(error.message, `${prefix}: ${code} the server said no`);
    }
  });

  it('what clients are told names the kind and the code, never the server\'s address', () => {
    const reasons: Array<[string, string, string]> = [
      ['ECONNREFUSED', 'connect ECONNREFUSED 127.0.0.1:47867', 'database unreachable (connection refused)'],
      ['ETIMEDOUT', 'connect ETIMEDOUT 10.0.0.7:5432', 'database unreachable (timeout)'],
      ['', 'Connection terminated due to connection timeout', 'database unreachable (timeout)'],
      ['', 'Query read timeout', 'database unreachable (timeout)'],
      ['', 'Connection terminated unexpectedly', 'database unreachable (connection lost)'],
      ['57P01', 'terminating connection due to administrator command', 'database unreachable (57P01)'],
      ['25006', 'cannot execute INSERT in a read-only transaction', 'database read-only (25006)'],
      ['53100', 'could not extend file "base/16384/16385": No space left on device', 'database disk full (53100)'],
    ];
    for (const [code, message, reason] of reasons) {
      const error = classed(code, message);
      assert.ok(error, `${message} is unavailable`);
      assert.equal(error.reason, reason);
      assert.ok(error.message.includes(message), 'the log keeps the driver\'s message');
    }
  });

  it('a statement that commits and lost its answer after reaching the server may have been written; one never sent, or one that does not commit, was not', () => {
    const lost = (message: string, code = '', syscall?: string) => Object.assign(new Error(message), { code, ...(syscall ? { syscall } : {}) });
    for (const error of [lost('Query read timeout'), lost('Connection terminated unexpectedly'), lost('read ECONNRESET', 'ECONNRESET', 'read'), lost('write EPIPE', 'EPIPE', 'write')]) {
      assert.equal(postgresUnavailable(error, true)?.mayHaveWritten, true, error.message);
      assert.equal(postgresUnavailable(error, false)?.mayHaveWritten, false, `${error.message}, not committing`);
    }
    for (const error of [
      lost('timeout exceeded when trying to connect'),
      lost('Connection terminated due to connection timeout'),
      lost('connect ECONNREFUSED 127.0.0.1:5432', 'ECONNREFUSED', 'connect'),
      lost('connect ETIMEDOUT 10.0.0.7:5432', 'ETIMEDOUT', 'connect'),
      lost('terminating connection due to administrator command', '57P01'),
    ]) {
      assert.equal(postgresUnavailable(error, true)?.mayHaveWritten, false, error.message);
    }
  });

  it('what one statement can cause is not: it stays an error to report (a pause would hide it)', () => {
    for (const code of ['53000', '53200', '53400', '55000', '57014', '57P04', '25P03', '25001', '40001', '40P01', '23505', '42P01', '42501', '']) {
      assert.equal(classed(code), null, `${code || 'no code'} is not unavailable`);
    }
  });
});

describe('a read-only PostgreSQL server', { skip: onlyOn('postgres') }, () => {
  it('writes answer 503 with Retry-After, a claim pauses its job, /readyz is not ready; all is back once it takes writes', async () => {
    const t = await startTestApp({ background: false });
    const database = decodeURIComponent(new URL(t.app.services.config.databaseUrl!).pathname.slice(1));
    assert.match(database, /^posthorn_t_/, 'only the test\'s own scratch database is altered');
    /** New sessions of the database are read-only or not; the ones open now are ended. */
    const setReadOnly = async (on: boolean) => {
      await adminQuery(`alter database "${database}" ${on ? 'set default_transaction_read_only = on' : 'reset default_transaction_read_only'}`);
      await adminQuery('select pg_terminate_backend(pid) from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()', [database]);
    };
    try {
      const seed = await t.seed();
      const send = (i: number) =>
        t.call('send_message', { api_key: seed.projectKey, arguments: { recipients: [`r${i}@example.test`], content: { 'text/plain': 'hello' }, headers: { subject: 'x', from: 'a@example.test' } } });
      assert.equal((await send(0)).status, 200);

      await setReadOnly(true);
      // The first calls may meet a session the server ended (57P01), answered 503 too; then every
      // write meets a read-only session. Only 503s meanwhile.
      let i = 1;
      const readOnly = await until('a 503 naming the read-only server', async () => {
        const r = await send(i++);
        assert.equal(r.status, 503, `while the server cannot write: ${JSON.stringify(r.body)}`);
        return /read-only/.test(r.body.response.message) && r;
      });
      assert.equal(readOnly.body.response.status, 'service_unavailable');
      assert.match(readOnly.body.response.message, /^The database is unavailable \(database read-only \(25006\)\); nothing of this call was stored/);
      assert.equal(readOnly.headers.get('retry-after'), '5');

      // Reads still work (the server answers); a job's claim, the dispatcher's own statement, is an
      // outage that pauses the job, as for a stopped server.
      const { store, clock } = t.app.services;
      assert.ok((await store.db.selectFrom('accounts').select('id').execute()).length >= 1);
      const claim = await store
        .writeStatement((db) => claimDueOutbound(db, { worker: 'w', now: clock.now(), leaseUntil: clock.now() + 1000, limit: 1 }))
        .then(() => null, (error: unknown) => error);
      assert.ok(isStoreUnavailable(claim), `the claim failed as unavailable: ${String(claim)}`);
      const lines: string[] = [];
      const watch = new OutageWatch(pino({ level: 'info' }, { write: (l: string) => void lines.push(l) }), 'webhooks');
      assert.equal(watch.failed(claim), true);
      assert.ok(watch.paused);
      const paused = lines.map((l) => JSON.parse(l)).find((l) => l.msg === 'database unavailable: job paused until it returns');
      assert.match(paused?.cause, /^database read-only: 25006 /);

      const notReady = await fetch(`${t.url}/readyz`);
      assert.equal(notReady.status, 503);
      assert.match((await notReady.json()).checks.database, /^unavailable: database read-only/);

      await setReadOnly(false);
      await until('send_message accepted again', async () => (await send(1000)).status === 200);
      assert.equal((await fetch(`${t.url}/readyz`)).status, 200);
    } finally {
      await adminQuery(`alter database "${database}" reset default_transaction_read_only`).catch(() => {});
      await t.close();
    }
  });
});

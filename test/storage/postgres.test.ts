// What only PostgreSQL has: migrations raced by many processes (Kysely's migrator takes an advisory
// lock), LISTEN/NOTIFY wake-ups across stores, the LISTEN connection's reconnect after the server
// drops it, and the pool's own type parsers. Skipped on the SQLite run.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import pg from 'pg';
import { CoalescingNotifier, NotificationListener, openPostgres } from '../../src/storage/dialects/postgres.ts';
import { migrateToLatest } from '../../src/storage/migrate.ts';
import { claimDueTransmissions } from '../../src/storage/delivery-queue.ts';
import { isStoreUnavailable, openStore, type Store } from '../../src/storage/store.ts';
import { onlyOn, openTestStore, seedProject, type TestStore } from '../helpers/databases.ts';
import { adminQuery, createFreshPostgresDatabase, dropPostgresDatabase } from '../helpers/postgres.ts';
import { until } from '../helpers/wait.ts';

const skip = onlyOn('postgres');

describe('PostgreSQL dialect', { skip }, () => {
  let t: TestStore;
  before(async () => {
    t = await openTestStore();
  });
  after(() => t?.close());

  it('concurrent migrations from many processes apply each migration exactly once', async () => {
    const url = await createFreshPostgresDatabase();
    const stores: Store[] = [];
    try {
      for (let i = 0; i < 5; i++) stores.push(await openStore({ databaseUrl: url, data: '/nonexistent', dbPoolSize: 2 }));
      const applied = await Promise.all(stores.map((s) => migrateToLatest(s.dialect)));
      const all = applied.flat();
      assert.ok(all.includes('001-core'), `001-core applied: ${JSON.stringify(applied)}`);
      assert.equal(new Set(all).size, all.length, `a migration applied twice: ${JSON.stringify(applied)}`);
      const rows = await stores[0].db
        .selectFrom('posthorn_migrations' as never)
        .select('name' as never)
        .execute();
      assert.equal(rows.length, all.length);
      assert.deepEqual(await migrateToLatest(stores[1].dialect), []);
    } finally {
      for (const s of stores) await s.close();
      await dropPostgresDatabase(url);
    }
  });

  it('a store closed after migrating and before any other statement leaves no connection open', async () => {
    // A process that fails at start after its migrations (a port in use) ends once its store is
    // closed, not after the pool's idle timeout.
    const url = await createFreshPostgresDatabase();
    const socketsToServer = () => (process as unknown as { _getActiveHandles(): Array<{ remotePort?: number; destroyed?: boolean }> })._getActiveHandles().filter((h) => h.remotePort === Number(new URL(url).port || 5432) && !h.destroyed).length;
    const before = socketsToServer();
    try {
      const store = await openStore({ databaseUrl: url, data: '/nonexistent', dbPoolSize: 2 });
      await store.migrate();
      assert.ok(socketsToServer() > before, 'the migrations used a connection');
      await store.close();
      // Its sockets close just after (the pool's idle timeout, which kept one open, is 10 s).
      await until('the closed store\'s connections to close', () => socketsToServer() === before, 3000);
    } finally {
      await dropPostgresDatabase(url);
    }
  });

  it('a wake() in one store reaches a listener of another store (another process) through NOTIFY', async () => {
    const other = await t.openAnother();
    let woken = 0;
    const unlisten = await other.onWake('transmissions', () => woken++);
    try {
      t.store.wake('transmissions');
      await until('the NOTIFY to arrive', () => woken === 1, 10_000, 20);
      t.store.wake('events'); // another channel: not delivered to this listener
      t.store.wake('transmissions');
      await until('the second NOTIFY', () => woken === 2, 10_000, 20);
      await new Promise((r) => setTimeout(r, 100));
      assert.equal(woken, 2);
    } finally {
      await unlisten();
    }
    t.store.wake('transmissions');
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(woken, 2, 'no wake-up after unlisten');
  });

  it('the LISTEN connection comes back after the server terminates it, and wakes its listeners once', async () => {
    const other = await t.openAnother();
    const database = new URL(t.url).pathname.slice(1);
    let woken = 0;
    const unlisten = await other.onWake('mailboxes', () => woken++);
    try {
      const listeners = () =>
        adminQuery<{ pid: number }>(
          `select pid from pg_stat_activity where datname = $1 and application_name = 'posthorn' and query ilike 'LISTEN%'`,
          [database],
        );
      await until('a LISTEN connection', async () => (await listeners()).length >= 1, 10_000, 20);
      const killed = await listeners();
      for (const { pid } of killed) await adminQuery('select pg_terminate_backend($1)', [pid]);
      // Missed notifications are unknown, so the restored connection wakes every listener once.
      await until('the wake-up that follows the reconnect', () => woken >= 1, 10_000, 20);
      const fresh = await listeners();
      assert.ok(fresh.length >= 1 && fresh.every((r) => !killed.some((k) => k.pid === r.pid)), 'a new LISTEN connection');
      const before = woken;
      t.store.wake('mailboxes');
      await until('a NOTIFY over the restored connection', () => woken === before + 1, 10_000, 20);
    } finally {
      await unlisten();
    }
  });

  it('after the server terminates every connection, the next write works and wake-ups come back', async () => {
    const other = await t.openAnother();
    const database = new URL(t.url).pathname.slice(1);
    let woken = 0;
    const unlisten = await other.onWake('events', () => woken++);
    try {
      await other.write((trx) => trx.selectFrom('accounts').select('id').execute()); // the pool holds a connection
      await adminQuery(`select pg_terminate_backend(pid) from pg_stat_activity where datname = $1 and application_name = 'posthorn' and pid <> pg_backend_pid()`, [database]);
      // Idle pooled connections that died are replaced on the next checkout (and the pool's error
      // event is handled: an unhandled one would have crashed this test process).
      await until('a write after the connections were terminated', async () => {
        try {
          await other.write((trx) => trx.insertInto('accounts').values({ uid: 'after-terminate', name: 'x', status: 'active', settings: '{}', created_at: 1, updated_at: 1 }).execute());
          return true;
        } catch {
          return false; // a query on a connection killed mid-flight fails once: that is expected
        }
      }, 10_000, 20);
      await until('the wake-up after the LISTEN reconnect', () => woken >= 1, 10_000, 20);
      const before = woken;
      t.store.wake('events');
      await until('a NOTIFY after the reconnect', () => woken > before, 10_000, 20);
    } finally {
      await unlisten();
    }
  });

  it('a listen() while a reconnect is pending connects once: one LISTEN connection, every channel heard', async () => {
    const clients: pg.Client[] = [];
    const listener = new NotificationListener(
      () => {
        const client = new pg.Client({ connectionString: t.url });
        clients.push(client);
        return client;
      },
      { reconnectMinMs: 300, reconnectMaxMs: 300 },
    );
    const heard: string[] = [];
    try {
      await listener.listen('ph_test_a', () => heard.push('a'));
      const first = clients[0] as pg.Client & { processID: number };
      const ended = new Promise((resolve) => first.once('end', resolve));
      await adminQuery('select pg_terminate_backend($1)', [first.processID]);
      await ended;
      // The reconnect timer is pending (300 ms); a new subscriber connects at once instead.
      await listener.listen('ph_test_b', () => heard.push('b'));
      assert.equal(clients.length, 2);
      assert.deepEqual(heard.sort(), ['a', 'b'], 'the restored connection woke every listener once');
      await new Promise((r) => setTimeout(r, 600)); // past the timer: it must not connect again
      assert.equal(clients.length, 2, 'no second connection after the pending timer fired');
      heard.length = 0;
      const notifier = new pg.Client({ connectionString: t.url }); // NOTIFY is per database
      await notifier.connect();
      await notifier.query(`select pg_notify('ph_test_a', ''), pg_notify('ph_test_b', '')`);
      await notifier.end();
      await until('both channels over the one connection', () => heard.length === 2, 10_000, 20);
    } finally {
      await listener.close();
    }
  });

  it('int8 and numeric are numbers on its own pool only; the global pg parsers are untouched', async () => {
    const plain = new pg.Pool({ connectionString: t.url, max: 1 });
    try {
      const { rows } = await plain.query('select 5::int8 as v');
      assert.equal(rows[0].v, '5', 'a plain pg pool still reads int8 as a string');
    } finally {
      await plain.end();
    }
    assert.equal(pg.types.getTypeParser(20, 'text')('7'), '7');
    const read = await sql<{ ms: number; n: number; avg: number }>`select 1800000000123::int8 as ms, 7::numeric as n, avg(x) as avg from (values (1), (2)) v(x)`.execute(t.store.db);
    assert.deepEqual(read.rows[0], { ms: 1_800_000_000_123, n: 7, avg: 1.5 });
    await assert.rejects(sql`select 9007199254740993::int8 as too_big`.execute(t.store.db), /does not fit a JS number/);
  });

  it('sessions are named posthorn and a transaction left idle is ended by the server after a minute', async () => {
    const { rows } = await sql<{ app: string; idle: string }>`select current_setting('application_name') as app, current_setting('idle_in_transaction_session_timeout') as idle`.execute(t.store.db);
    assert.deepEqual(rows[0], { app: 'posthorn', idle: '1min' });
  });

  it('a claim this process stopped waiting for is cancelled by the server, not run later: no rows taken behind its back', async () => {
    // A claim blocked on a lock past --db-timeout-ms fails here as a timeout; the server must not
    // run it once the lock is gone (it would take rows that the runner's next look for strays may
    // already have missed: they would wait for their lease).
    const url = await createFreshPostgresDatabase();
    // One connection: the migrations' handle and the bounded one take turns on it.
    const store = await openStore({ databaseUrl: url, data: '/nonexistent', dbPoolSize: 1, dbTimeoutMs: 400 });
    const locker = new pg.Client({ connectionString: url });
    const bound = async (db: typeof store.db) => (await sql<{ bound: string }>`select current_setting('statement_timeout') as bound`.execute(db)).rows[0].bound;
    try {
      await migrateToLatest(store.dialect);
      // The server's bound is the pool's, a little over this process's; the migrations' handle
      // lifts it while it holds the connection, and gives it back with the bound.
      assert.equal(await bound(store.dialect.migrationDb!), '0');
      assert.equal(await bound(store.db), '500ms');
      const seed = await seedProject(store);
      await store.write((trx) =>
        trx
          .insertInto('transmissions')
          .values({ message_id: seed.messageId, project_id: seed.projectId, recipient: 'r@example.test', status: 'queued', attempts: 0, next_attempt_at: 1, created_at: 1, updated_at: 1 })
          .execute(),
      );
      await locker.connect();
      await locker.query('begin');
      await locker.query('lock table transmissions in access exclusive mode');
      const claim = store.writeStatement((db) => claimDueTransmissions(db, { worker: 'late', now: 10, leaseMs: 300_000, limit: 10 }));
      await assert.rejects(claim, (error: unknown) => isStoreUnavailable(error) && /timeout/.test((error as Error).message));
      // While the lock is still held, the blocked claim's wait for it ends on the server.
      await until('the abandoned claim to stop waiting for its lock on the server', async () => {
        const waiting = await adminQuery<{ n: string }>(
          "select count(*) as n from pg_locks l join pg_database d on d.oid = l.database where d.datname = $1 and not l.granted",
          [new URL(url).pathname.slice(1)],
        );
        return Number(waiting[0].n) === 0;
      }, 5000);
      await locker.query('commit');
      const held = await store.db.selectFrom('transmissions').select(['locked_by']).execute();
      assert.deepEqual(held, [{ locked_by: null }]);
    } finally {
      await locker.end().catch(() => {});
      await store.close();
      await dropPostgresDatabase(url);
    }
  });

  it('warns at start when the database orders text linguistically (unlike SQLite), not under C', async (tc) => {
    const [{ v }] = await adminQuery<{ v: string }>('show server_version_num');
    if (Number(v) < 150000) return tc.skip('ICU database locales need PostgreSQL 15');
    const { Writable } = await import('node:stream');
    const pino = (await import('pino')).default;
    const capture = () => {
      const lines: string[] = [];
      const log = pino({ level: 'warn' }, new Writable({ write: (chunk, _enc, done) => (lines.push(String(chunk)), done()) }));
      return { log, lines };
    };
    const name = `posthorn_t_${process.pid}_${randomBytes(6).toString('hex')}`; // the runner's leftover pattern
    await adminQuery(`CREATE DATABASE "${name}" TEMPLATE template0 ENCODING 'UTF8' LOCALE 'C' LOCALE_PROVIDER icu ICU_LOCALE 'en-US'`);
    const linguisticUrl = t.url.replace(/\/[^/]+$/, `/${name}`);
    try {
      const icu = capture();
      await (await openPostgres(linguisticUrl, { poolSize: 1, log: icu.log })).close();
      assert.match(icu.lines.join(''), /database collation is not C/);
      const c = capture();
      await (await openPostgres(t.url, { poolSize: 1, log: c.log })).close();
      assert.deepEqual(c.lines, []);
    } finally {
      await dropPostgresDatabase(linguisticUrl);
    }
  });

  it('refuses to start against an unreachable server with a clear error that hides the password', async () => {
    await assert.rejects(
      openPostgres('postgres://posthorn:hunter2@127.0.0.1:1/nowhere', { poolSize: 1, timeoutMs: 2000 }),
      (error: Error) => {
        assert.match(error.message, /cannot connect to PostgreSQL/);
        assert.doesNotMatch(error.message, /hunter2/);
        return true;
      },
    );
  });
});

describe('NOTIFY coalescing (pure; runs on every database)', () => {
  it('a burst costs one NOTIFY in flight plus one after it; every call is followed by a NOTIFY sent after it', async () => {
    const sent: string[] = [];
    const releases: Array<() => void> = [];
    const notifier = new CoalescingNotifier(
      (channel) =>
        new Promise<void>((resolve) => {
          sent.push(channel);
          releases.push(resolve);
        }),
    );
    const burst = Array.from({ length: 50 }, () => notifier.notify('posthorn_transmissions'));
    void notifier.notify('posthorn_events');
    assert.deepEqual(sent, ['posthorn_transmissions', 'posthorn_events'], 'one in flight per channel');
    releases.shift()!();
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(sent.filter((c) => c === 'posthorn_transmissions').length, 2, 'the burst is followed by exactly one more');
    const late = notifier.notify('posthorn_transmissions'); // arrives while the second is in flight
    releases.shift()!(); // events
    releases.shift()!(); // second transmissions NOTIFY
    await new Promise((r) => setImmediate(r));
    assert.equal(sent.filter((c) => c === 'posthorn_transmissions').length, 3, 'a call during the trailing NOTIFY gets its own');
    releases.shift()!();
    await Promise.all([...burst, late]);
    void notifier.notify('posthorn_transmissions');
    assert.equal(sent.filter((c) => c === 'posthorn_transmissions').length, 4, 'idle again: sent at once');
    releases.shift()!();
  });
});

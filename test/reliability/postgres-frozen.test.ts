// PostgreSQL frozen or cut off by a partition (docs/operations.md, "When the database is away"): the
// server refuses nothing, it just never answers (a postmaster and its backends stopped with
// SIGSTOP, a network that drops packets). The service reaches the test's own scratch database
// through a TCP proxy on 127.0.0.1 that the test freezes (test/helpers/tcp-proxy.ts); the shared
// server behind it is never stopped.
//
// While frozen, send_message answers a 503 with Retry-After once --db-timeout-ms has passed (not
// when the freeze ends), naming the kind of the cause and not the server's address; the delivery
// job pauses and /readyz is not ready, as when the server is down. Thawed, every message is stored
// once whatever its client was told: retried with its uid, it is stored now or answered as a
// duplicate, never a second copy, and everything stored is delivered once.
import assert from 'node:assert/strict';
import os from 'node:os';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import { isStoreUnavailable, openStore } from '../../src/storage/store.ts';
import { startTestApp, type TestApp, type Seed } from '../helpers/app.ts';
import { onlyOn } from '../helpers/databases.ts';
import { ADMIN_URL, createFreshPostgresDatabase, dropPostgresDatabase } from '../helpers/postgres.ts';
import { startSmtpPeer, type SmtpPeer } from '../helpers/smtp-peers.ts';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.ts';
import { until } from '../helpers/wait.ts';

const FROZEN_SENDS = 6;

describe('PostgreSQL frozen behind a proxy', { skip: onlyOn('postgres'), timeout: 120_000 }, () => {
  let sink: SmtpPeer;
  let proxy: TcpProxy;
  let databaseUrl: string;
  let t: TestApp;
  let seed: Seed;
  const lines: Array<Record<string, unknown>> = [];

  before(async () => {
    sink = await startSmtpPeer();
    databaseUrl = await createFreshPostgresDatabase();
    const server = new URL(ADMIN_URL);
    proxy = await startTcpProxy({ host: server.hostname, port: Number(server.port || 5432) });
    const proxied = new URL(databaseUrl);
    proxied.port = String(proxy.port);
    const log = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
    t = await startTestApp({
      log,
      config: { databaseUrl: proxied.toString(), dbTimeoutMs: 1000, workers: 4, pollMs: 100, transportMap: [sink.transportFor('example.test')] },
    });
    seed = await t.seed();
  });

  after(async () => {
    proxy?.thaw();
    await t?.close();
    await proxy?.close();
    await sink?.close();
    if (databaseUrl) await dropPostgresDatabase(databaseUrl).catch(() => {});
  });

  const send = (uid: string, signal?: AbortSignal) =>
    fetch(`${t.url}/v.1.1/send_message`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ api_key: seed.projectKey, uid, arguments: { recipients: [`${uid}@example.test`], content: { 'text/plain': 'hello' }, headers: { subject: uid, from: 'a@example.test' } } }),
      signal,
    });

  it('answers 503 with Retry-After while frozen, pauses the jobs, and stores each message once when it thaws', async () => {
    for (const uid of ['before-0', 'before-1']) assert.equal((await send(uid)).status, 200);
    await sink.waitForReceived(2, 30_000);

    proxy.freeze();
    // Bounded: without a bound of its own a request would wait as long as the freeze, which lasts
    // until this test ends it, after these answers.
    const answers = await Promise.all(
      Array.from({ length: FROZEN_SENDS }, async (_, i) => {
        const r = await send(`frozen-${i}`, AbortSignal.timeout(20_000));
        return { status: r.status, retryAfter: r.headers.get('retry-after'), body: await r.json() };
      }),
    );
    for (const a of answers) {
      assert.equal(a.status, 503, JSON.stringify(a.body));
      assert.equal(a.retryAfter, '5');
      assert.equal(a.body.response.status, 'service_unavailable');
      // Nothing stored when no statement reached the server (no connection in time); else the
      // statement's answer was lost and it may have been.
      assert.match(a.body.response.message, /^The database is unavailable \(database unreachable \(timeout\)\); (nothing of this call was stored|its answer was lost, so this call may have been stored: retry it with the same uid)/);
      assert.ok(!a.body.response.message.includes(String(proxy.port)), 'no port in the answer');
    }

    const readyz = await fetch(`${t.url}/readyz`);
    assert.equal(readyz.status, 503);
    const checks = (await readyz.json()).checks;
    assert.match(checks.database, /^unavailable: /);
    assert.ok(!JSON.stringify(checks).includes(String(proxy.port)), `no port in /readyz: ${JSON.stringify(checks)}`);
    await until('the delivery job paused', () => lines.some((l) => l.msg === 'database unavailable: job paused until it returns' && l.job === 'delivery'), 20_000);

    proxy.thaw();
    let refused = FROZEN_SENDS;
    await until('send_message accepted again', async () => {
      const status = (await send(`after-${Date.now()}`)).status;
      if (status === 503) refused++;
      return status === 200;
    }, 30_000);
    // The outage's end is logged with its total, and the running count before it adds up to it.
    const end = lines.find((l) => l.msg?.toString().startsWith('database available again: the API answers'));
    assert.equal(end?.answered, refused, JSON.stringify(end));
    const counted = lines.filter((l) => l.msg === 'database unavailable: answered 503').reduce((n, l) => n + Number(l.answered), 0);
    assert.equal(counted, refused);
    assert.ok(!lines.some((l) => /postgres:\/\//.test(JSON.stringify(l))), 'no connection string in the log');
    // What was answered "nothing of this call was stored" is not, once the freeze is over.
    const db = t.app.services.store.db;
    const storedNow = new Set((await db.selectFrom('messages').select(['uid']).where('uid', 'like', 'frozen-%').execute()).map((m) => m.uid));
    const unsure = answers.filter((a) => /may have been stored/.test(a.body.response.message)).length;
    console.log(`# frozen: ${FROZEN_SENDS} answered 503, ${unsure} of them "may have been stored"; ${storedNow.size} stored once thawed`);
    answers.forEach((a, i) => {
      if (/nothing of this call was stored/.test(a.body.response.message)) assert.ok(!storedNow.has(`frozen-${i}`), `frozen-${i} was answered as not stored, and is`);
    });
    // Each client retries with its uid: stored now, or answered as a duplicate of what the freeze
    // hid from it (a commit whose answer never came); never 503 nor a second copy.
    for (let i = 0; i < FROZEN_SENDS; i++) {
      const r = await send(`frozen-${i}`);
      const body = await r.json();
      assert.ok(r.status === 200 || /already exists/.test(body.response.message), `frozen-${i}: ${r.status} ${JSON.stringify(body)}`);
    }
    const stored = await db.selectFrom('messages').select(['uid']).where('uid', 'like', 'frozen-%').execute();
    assert.deepEqual(stored.map((m) => m.uid).sort(), Array.from({ length: FROZEN_SENDS }, (_, i) => `frozen-${i}`).sort(), 'each message stored once');
    const total = (await db.selectFrom('messages').select(db.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n;
    await sink.waitForReceived(total, 60_000);
    await until('every transmission done', async () => {
      const open = await db.selectFrom('transmissions').select('id').where('status', 'in', ['queued', 'retry']).execute();
      return open.length === 0;
    }, 30_000);
    const subjects = sink.received.map((m) => /^Subject: (.*)$/m.exec(m.raw.toString())?.[1]);
    assert.equal(new Set(subjects).size, subjects.length, `each delivered once: ${subjects.join(', ')}`);
    assert.equal(subjects.length, total);
  });

  it('a statement and a transaction on a pooled connection fail as unavailable once the bound passes; the connection is not reused', async () => {
    const proxied = new URL(databaseUrl);
    proxied.port = String(proxy.port);
    const store = await openStore({ databaseUrl: proxied.toString(), data: os.tmpdir(), dbPoolSize: 1, dbTimeoutMs: 500 });
    try {
      // The pool's one connection is open and idle: only the statement's own bound can end the wait.
      await store.db.selectFrom('accounts').select('id').execute();
      proxy.freeze();
      const read = await store.db.selectFrom('accounts').select('id').execute().then(() => null, (error: unknown) => error);
      assert.ok(isStoreUnavailable(read), String(read));
      assert.equal(read.reason, 'database unreachable (timeout)');
      const write = await store.write((trx) => trx.selectFrom('accounts').select('id').execute()).then(() => null, (error: unknown) => error);
      assert.ok(isStoreUnavailable(write), String(write));
      proxy.thaw();
      // A fresh connection answers: the one that timed out was closed, its late answer never read.
      assert.deepEqual(await store.db.selectFrom('accounts').select('id').orderBy('id').execute(), (await t.app.services.store.db.selectFrom('accounts').select('id').orderBy('id').execute()));
    } finally {
      proxy.thaw();
      await store.close();
    }
  });
});

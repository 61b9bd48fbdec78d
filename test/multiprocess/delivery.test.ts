// Many processes on one PostgreSQL: one `serve --role api` and two `serve --role worker` (real
// `node bin/posthorn.js` children), thousands of messages sent through the HTTP API, every one
// delivered through the transport map to a real SMTP server in this process (counted by
// Message-ID and recipient).
//
//   phase 1, all healthy:    no transmission is delivered twice.
//   phase 2, one worker SIGKILLed while it holds claimed rows: every message is still delivered
//     (the survivor sees the dead worker gone from the registry of live processes and releases its
//     rows at once, long before their 300 s leases end: within RESUME_LIMIT_MS of the kill,
//     docs/decisions/0008-lease-runner.md); the only duplicates are rows the dead worker held when
//     it died, so they are at most its --workers.
//
// Bounded: message counts are fixed, every wait has a deadline, all children are killed in
// teardown. Sizes can be raised for a soak run: POSTHORN_MP_PHASE1, POSTHORN_MP_PHASE2.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type net from 'node:net';
import pg from 'pg';
import { SMTPServer } from 'smtp-server';
import { onlyOn } from '../helpers/databases.ts';
import { createFreshPostgresDatabase, dropPostgresDatabase } from '../helpers/postgres.ts';
import { BIN, sendNumberedMessages, startPosthorn, stopAll, type PosthornProcess } from '../helpers/processes.ts';
import { headerOf } from '../helpers/smtp-peers.ts';

const PHASE1 = Number(process.env.POSTHORN_MP_PHASE1 ?? 1000);
const PHASE2 = Number(process.env.POSTHORN_MP_PHASE2 ?? 2000);
/** delivery concurrency of each worker process: the bound on the killed worker's duplicates */
const WORKERS = 32;
/** the default lease: the dead worker's rows must come back through the registry, not by expiry */
const LEASE_MS = 300_000;
const RESUME_LIMIT_MS = 15_000;
const SEND_CONCURRENCY = 16;
/** the sink holds each message this long before its 250, so a worker always has rows in flight */
const SINK_DELAY_MS = 15;
const DOMAIN = 'sink.test';

interface Sink {
  port: number;
  /** deliveries per key `<message-id> <rcpt>` */
  counts: Map<string, number>;
  deliveries: number;
  distinct(): number;
  close(): Promise<void>;
}

async function startSink(): Promise<Sink> {
  const counts = new Map<string, number>();
  const sockets = new Set<net.Socket>();
  let deliveries = 0;
  const server = new SMTPServer({
    hideSTARTTLS: true,
    authOptional: true,
    disabledCommands: ['AUTH', 'STARTTLS'],
    logger: false,
    closeTimeout: 100,
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        const messageId = headerOf(Buffer.concat(chunks), 'message-id') ?? '(none)';
        for (const rcpt of session.envelope.rcptTo) {
          const key = `${messageId} ${rcpt.address}`;
          counts.set(key, (counts.get(key) ?? 0) + 1);
          deliveries++;
        }
        setTimeout(() => callback(null, '2.0.0 Ok: queued'), SINK_DELAY_MS);
      });
    },
  });
  server.on('error', () => {});
  const netServer = (server as unknown as { server: net.Server }).server;
  netServer.on('connection', (s: net.Socket) => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (netServer.address() as net.AddressInfo).port,
    counts,
    get deliveries() {
      return deliveries;
    },
    distinct: () => counts.size,
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

async function waitFor(check: () => boolean | Promise<boolean>, what: string, timeoutMs: number, intervalMs = 50): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

describe('many processes on one PostgreSQL database', { skip: onlyOn('postgres'), timeout: 300_000 }, () => {
  let databaseUrl: string;
  let db: pg.Pool;
  let sink: Sink;
  let dataDir: string;
  let api: PosthornProcess;
  let workerA: PosthornProcess;
  let workerB: PosthornProcess;
  let apiUrl: string;
  let projectKey: string;
  let sent = 0;

  const baseEnv = () => ({
    DATABASE_URL: databaseUrl,
    POSTHORN_SECRET_KEY: 'multiprocess-shared-secret',
    POSTHORN_MAILER_HOST: 'posthorn.test',
    POSTHORN_TRANSPORT_MAP: `${DOMAIN}=127.0.0.1:${sink.port}`,
    // Nothing here should resolve names; if something tried, it would ask loopback and fail.
    POSTHORN_DNS_SERVERS: '127.0.0.1:9',
    POSTHORN_LEASE_MS: String(LEASE_MS),
    POSTHORN_POLL_MS: '200',
    POSTHORN_WORKERS: String(WORKERS),
    POSTHORN_DB_POOL_SIZE: '5',
    // Two workers on one machine: each its own operations port.
    POSTHORN_OPS_PORT: '0',
    LOG_LEVEL: 'info',
  });
  const envFor = (name: string) => ({ ...baseEnv(), POSTHORN_DATA: path.join(dataDir, name) });

  before(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'posthorn-mp-'));
    databaseUrl = await createFreshPostgresDatabase();
    db = new pg.Pool({ connectionString: databaseUrl, max: 2 });
    sink = await startSink();
    // All three start at once on the empty database, as a deploy would start them: each runs the
    // migrations on start, racing for the migrator's advisory lock.
    api = startPosthorn('api', ['serve', '--role', 'api', '--port', '0'], envFor('api'));
    workerA = startPosthorn('worker-a', ['serve', '--role', 'worker'], envFor('worker-a'));
    workerB = startPosthorn('worker-b', ['serve', '--role', 'worker'], envFor('worker-b'));
    const [apiRunning] = await Promise.all([api.waitUntilRunning(), workerA.waitUntilRunning(), workerB.waitUntilRunning()]);
    apiUrl = apiRunning.url!;
    const init = spawnSync(process.execPath, [BIN, 'init', '--json'], { env: { ...process.env, ...envFor('init'), LOG_LEVEL: 'warn' }, encoding: 'utf8', timeout: 60_000 });
    assert.equal(init.status, 0, init.stderr);
    projectKey = JSON.parse(init.stdout).project.api_key;
  });

  after(async () => {
    await stopAll();
    await db?.end();
    await sink?.close();
    if (databaseUrl) await dropPostgresDatabase(databaseUrl);
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  /** Sends `count` one-recipient messages through the API, SEND_CONCURRENCY at a time. */
  async function sendMessages(count: number): Promise<void> {
    const first = sent;
    sent += count;
    await sendNumberedMessages({ apiUrl, projectKey, uidPrefix: 'mp', domain: DOMAIN, first, count, concurrency: SEND_CONCURRENCY });
  }

  async function completedCount(): Promise<number> {
    const { rows } = await db.query<{ n: string }>(`select count(*) as n from transmissions where status = 'completed'`);
    return Number(rows[0].n);
  }

  function duplicates(): Array<[string, number]> {
    return [...sink.counts].filter(([, n]) => n > 1);
  }

  /** The worker id (hostname:pid:random) a process's delivery service claims under. */
  async function workerIdsOf(proc: PosthornProcess): Promise<string[]> {
    const { rows } = await db.query<{ worker: string }>(`select distinct worker from attempts where worker like $1`, [`%:${proc.pid}:%`]);
    return rows.map((r) => r.worker);
  }

  it('phase 1, all processes healthy: every message delivered exactly once', async (t) => {
    const startedAt = Date.now();
    await sendMessages(PHASE1);
    const acceptedMs = Date.now() - startedAt;
    await waitFor(() => sink.distinct() >= PHASE1, `${PHASE1} messages at the sink (have ${sink.distinct()})`, 120_000);
    await waitFor(async () => (await completedCount()) >= PHASE1, 'every transmission recorded completed', 30_000);
    const deliveredMs = Date.now() - startedAt;
    assert.equal(sink.distinct(), PHASE1);
    assert.deepEqual(duplicates(), [], 'a transmission was delivered twice while every process was healthy');
    assert.equal(sink.deliveries, PHASE1);
    // Every Message-ID that arrived is one the database fixed at acceptance.
    const { rows } = await db.query<{ key: string }>(`select '<' || m.unique_id || '> ' || t.recipient as key from transmissions t join messages m on m.id = t.message_id`);
    assert.deepEqual(new Set(rows.map((r) => r.key)), new Set(sink.counts.keys()));
    // Both workers took part; the API process delivered nothing.
    assert.equal((await workerIdsOf(workerA)).length, 1, 'worker A delivered');
    assert.equal((await workerIdsOf(workerB)).length, 1, 'worker B delivered');
    assert.deepEqual(await workerIdsOf(api), [], 'the api process delivered nothing');
    const { rows: split } = await db.query<{ worker: string; n: string }>(`select worker, count(*) as n from attempts group by worker order by worker`);
    t.diagnostic(
      `phase 1: ${PHASE1} messages accepted in ${acceptedMs} ms (${Math.round((PHASE1 * 1000) / acceptedMs)}/s), all delivered in ${deliveredMs} ms; ` +
        `attempts per worker: ${split.map((r) => r.n).join(' / ')}; duplicates 0`,
    );
  });

  it('phase 2, a worker SIGKILLed holding claimed rows: everything still delivered, duplicates only among its rows', async (t) => {
    const base = sink.distinct();
    const sending = sendMessages(PHASE2);
    const [workerBId] = await workerIdsOf(workerB);
    assert.ok(workerBId, 'worker B has a worker id');
    const held = async () => Number((await db.query<{ n: string }>(`select count(*) as n from transmissions where locked_by = $1`, [workerBId])).rows[0].n);
    // Mid-way, at a moment worker B holds claimed rows. It is stopped (SIGSTOP) before it is
    // killed, so that it finishes nothing between the look and the kill: once the statements it
    // sent before it stopped have run (no claim or finish running on the server), what it still
    // holds stays held. Holding none by then, it goes on, and the next moment is taken.
    await waitFor(() => sink.distinct() >= base + PHASE2 * 0.3, 'a third of phase 2 delivered', 120_000, 10);
    const queueStatementsRunning = async () =>
      Number(
        (await db.query<{ n: string }>(`select count(*) as n from pg_stat_activity where datname = current_database() and state = 'active' and (query like 'UPDATE transmissions AS t%' or query like 'select "id", "message_id"%posthorn_claim_transmissions%')`)).rows[0].n,
      );
    // What it holds, read while it is stopped: it can change nothing, and the survivor releases
    // nothing of a live process. Read after the kill, it could already be released (the
    // survivor's next heartbeat sees the pid gone).
    const holding = async () =>
      (
        await db.query<{ id: number; key: string }>(
          `select t.id, '<' || m.unique_id || '> ' || t.recipient as key from transmissions t join messages m on m.id = t.message_id where t.locked_by = $1`,
          [workerBId],
        )
      ).rows;
    let stranded: Array<{ id: number; key: string }>;
    for (let tries = 1; ; tries++) {
      await waitFor(async () => (await held()) >= 4, 'worker B to hold claimed rows', 60_000, 5);
      workerB.child.kill('SIGSTOP');
      await waitFor(async () => (await queueStatementsRunning()) === 0, 'the statements worker B sent before it stopped to have run', 10_000, 2);
      stranded = await holding();
      if (stranded.length > 0) break;
      workerB.child.kill('SIGCONT');
      assert.ok(tries < 20, 'worker B held no rows at any of 20 moments it was stopped');
    }
    workerB.child.kill('SIGKILL');
    const killedAt = Date.now();
    await workerB.exited;
    // What it held when it died is stranded until the survivor sees it dead.
    assert.ok(stranded.length > 0 && stranded.length <= WORKERS, `worker B held ${stranded.length} rows when killed`);
    // The time to resume: until every row the dead worker held has reached the sink.
    const unfinished = async () =>
      Number((await db.query<{ n: string }>(`select count(*) as n from transmissions where id = any($1::bigint[]) and status <> 'completed'`, [stranded.map((r) => r.id)])).rows[0].n);
    await waitFor(async () => (await unfinished()) === 0, 'the dead worker\'s rows delivered and recorded', 60_000, 10);
    const resumeMs = Date.now() - killedAt;
    assert.ok(resumeMs < RESUME_LIMIT_MS, `the dead worker's rows were delivered ${resumeMs} ms after the kill (limit ${RESUME_LIMIT_MS} ms)`);
    await sending;
    const total = PHASE1 + PHASE2;
    await waitFor(() => sink.distinct() >= total, `${total} messages at the sink (have ${sink.distinct()})`, 120_000);
    await waitFor(async () => (await completedCount()) >= total, 'every transmission recorded completed', 30_000);
    const takeoverMs = Date.now() - killedAt;
    assert.equal(sink.distinct(), total, 'every message delivered');
    // The stranded rows were finished by the survivor (released by it: no double claim).
    const { rows: finishers } = await db.query<{ worker: string; n: string }>(
      `select worker, count(*) as n from attempts where transmission_id = any($1::bigint[]) group by worker`,
      [stranded.map((r) => r.id)],
    );
    const [workerAId] = await workerIdsOf(workerA);
    assert.deepEqual(finishers.map((r) => r.worker), [workerAId], 'the survivor recorded the stranded rows');
    const dups = duplicates();
    const strandedKeys = new Set(stranded.map((r) => r.key));
    for (const [key, n] of dups) {
      assert.equal(n, 2, `${key} delivered ${n} times`);
      assert.ok(strandedKeys.has(key), `${key} was delivered twice but the killed worker did not hold it`);
    }
    assert.ok(dups.length <= WORKERS, `${dups.length} duplicates, more than the killed worker's --workers ${WORKERS}`);
    assert.equal(sink.deliveries, total + dups.length);
    t.diagnostic(
      `phase 2: ${PHASE2} messages; worker B killed holding ${stranded.length} rows; ${dups.length} delivered twice (bound ${WORKERS}); ` +
        `its rows delivered ${resumeMs} ms after the kill (limit ${RESUME_LIMIT_MS} ms, lease ${LEASE_MS} ms), everything ${takeoverMs} ms after it`,
    );
    // The survivors stop cleanly.
    assert.deepEqual(await workerA.stop(), { code: 0, signal: null });
    assert.deepEqual(await api.stop(), { code: 0, signal: null });
  });
});

// A worker that is slow is not dead (docs/reliability.md, "When a process is dead"): on one
// PostgreSQL, `posthorn serve` (API and worker in one process) and a second `serve --role worker`
// on the same host (real `node bin/posthorn.js` children), messages sent through the HTTP API and
// delivered through the transport map to a real SMTP server in this process.
//
//   the second worker is stopped (SIGSTOP) while it holds claimed rows, for longer than the
//     heartbeat limit: its sibling, which sees its pid alive, keeps its rows and its registration
//     (checked once the sibling has judged it more than once past the limit); continued (SIGCONT),
//     it delivers what it held, and no message arrives twice;
//   killed (SIGKILL) while it holds rows, it is released by the sibling within a few heartbeats.
//
// Bounded: message counts are fixed, every wait has a deadline, all children are killed in teardown.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type net from 'node:net';
import pg from 'pg';
import { SMTPServer } from 'smtp-server';
import { DEAD_AFTER_MS, HEARTBEAT_MS } from '../../src/workers/process-registry.ts';
import { onlyOn } from '../helpers/databases.ts';
import { createFreshPostgresDatabase, dropPostgresDatabase } from '../helpers/postgres.ts';
import { initProjectKey, sendNumberedMessages, startPosthorn, stopAll, type PosthornProcess } from '../helpers/processes.ts';
import { headerOf } from '../helpers/smtp-peers.ts';
import { until } from '../helpers/wait.ts';

const MESSAGES = 600;
const SEND_CONCURRENCY = 10;
/** the sink holds each message this long before its 250, so a worker always has rows in flight */
const SINK_DELAY_MS = 15;
const DOMAIN = 'sink.test';
/** a dead worker on the same host is released within this of its kill (its pid is seen gone at the next heartbeat) */
const RELEASE_LIMIT_MS = 3 * HEARTBEAT_MS + 2000;

interface Sink {
  port: number;
  /** deliveries per key `<message-id> <rcpt>` */
  counts: Map<string, number>;
  close(): Promise<void>;
}

async function startSink(): Promise<Sink> {
  const counts = new Map<string, number>();
  const sockets = new Set<net.Socket>();
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
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe('a stopped worker is not dead; a killed one is (PostgreSQL, same host)', { skip: onlyOn('postgres'), timeout: 300_000 }, () => {
  let databaseUrl: string;
  let db: pg.Pool;
  let sink: Sink;
  let dataDir: string;
  let main: PosthornProcess;
  let second: PosthornProcess;
  let apiUrl: string;
  let projectKey: string;
  let sent = 0;

  const envFor = (name: string) => ({
    DATABASE_URL: databaseUrl,
    POSTHORN_DATA: path.join(dataDir, name),
    POSTHORN_SECRET_KEY: 'liveness-shared-secret',
    POSTHORN_MAILER_HOST: 'posthorn.test',
    POSTHORN_TRANSPORT_MAP: `${DOMAIN}=127.0.0.1:${sink.port}`,
    POSTHORN_DNS_SERVERS: '127.0.0.1:9',
    POSTHORN_POLL_MS: '200',
    POSTHORN_WORKERS: '16',
    POSTHORN_DB_POOL_SIZE: '5',
    POSTHORN_OPS_PORT: '0',
    LOG_LEVEL: 'info',
  });

  before(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'posthorn-liveness-'));
    databaseUrl = await createFreshPostgresDatabase();
    db = new pg.Pool({ connectionString: databaseUrl, max: 2 });
    sink = await startSink();
    main = startPosthorn('main', ['serve', '--processes', '1', '--port', '0'], envFor('main'));
    apiUrl = (await main.waitUntilRunning()).url!;
    second = startPosthorn('second', ['serve', '--role', 'worker'], envFor('second'));
    await second.waitUntilRunning();
    projectKey = initProjectKey({ ...envFor('init'), LOG_LEVEL: 'warn' });
  });

  after(async () => {
    if (second?.exitCode === undefined) second.child.kill('SIGCONT');
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
    await sendNumberedMessages({ apiUrl, projectKey, uidPrefix: 'live', domain: DOMAIN, first, count, concurrency: SEND_CONCURRENCY });
  }

  async function registryRow(pid: number): Promise<{ id: string; heartbeat_at: number } | undefined> {
    const { rows } = await db.query<{ id: string; heartbeat_at: string }>(`select id, heartbeat_at from worker_processes where pid = $1`, [pid]);
    return rows[0] ? { id: rows[0].id, heartbeat_at: Number(rows[0].heartbeat_at) } : undefined;
  }

  async function heldBy(worker: string): Promise<number[]> {
    const { rows } = await db.query<{ id: string }>(`select id from transmissions where locked_by = $1 and status in ('queued', 'retry') order by id`, [worker]);
    return rows.map((r) => Number(r.id));
  }

  async function completed(): Promise<number> {
    return Number((await db.query<{ n: string }>(`select count(*) as n from transmissions where status = 'completed'`)).rows[0].n);
  }

  const releasedLines = () => main.lines.filter((l) => l.msg === 'released the claims of dead worker processes');

  it('stopped past the heartbeat limit: keeps its claims and delivers them when continued, nothing twice', async (t) => {
    const { id: secondId } = (await until('the second worker registered', () => registryRow(second.pid)))!;
    const sending = sendMessages(MESSAGES);
    const mainId = (await registryRow(main.pid))!.id;
    const mainBeat = async () => Number((await db.query<{ h: string }>(`select heartbeat_at as h from worker_processes where id = $1`, [mainId])).rows[0].h);
    let stalled: { id: string; heartbeat_at: number } | undefined;
    let stillHeld: number[] = [];
    let stoppedAt = 0;
    for (let tries = 0; stillHeld.length === 0; tries++) {
      assert.ok(tries < 5, 'the second worker held rows when stopped');
      if (tries > 0) second.child.kill('SIGCONT');
      await until('the second worker to hold claimed rows', async () => (await heldBy(secondId)).length >= 4, 60_000, 5);
      second.child.kill('SIGSTOP');
      stoppedAt = Date.now();
      // What it had sent before it stopped (a finish's COMMIT) lands by the sibling's next heartbeat.
      const before = await mainBeat();
      await until('the sibling to beat', async () => (await mainBeat()) > before, 30_000, 100);
      stalled = await registryRow(second.pid);
      stillHeld = await heldBy(secondId);
    }
    // The sibling keeps beating; each heartbeat is followed by its look for dead processes. Once
    // its heartbeat is past the stopped one's by the limit and two heartbeats, and it has beaten
    // once more, it has judged the stopped worker silent past the limit at least once.
    const past = await until('the sibling to beat past the limit', async () => {
      const beat = await mainBeat();
      return beat >= stalled!.heartbeat_at + DEAD_AFTER_MS + 2 * HEARTBEAT_MS && beat;
    }, 60_000, 200);
    await until('the sibling to beat once more', async () => (await mainBeat()) > past, 30_000, 200);
    const silentMs = Date.now() - stoppedAt;
    assert.deepEqual(await heldBy(secondId), stillHeld, 'its claims are its own still');
    assert.ok(await registryRow(second.pid), 'still registered');
    assert.deepEqual(releasedLines(), [], 'the sibling released nothing');
    second.child.kill('SIGCONT');
    await sending;
    await until(`${MESSAGES} transmissions completed`, async () => (await completed()) >= MESSAGES, 120_000, 100);
    const dups = [...sink.counts].filter(([, n]) => n > 1);
    assert.deepEqual(dups, [], 'nothing delivered twice');
    assert.equal(sink.counts.size, MESSAGES);
    assert.ok(!second.lines.some((l) => typeof l.msg === 'string' && l.msg.includes('presumed dead')), 'the stopped worker was never presumed dead');
    t.diagnostic(`stopped holding ${stillHeld.length} rows for ${silentMs} ms (limit ${DEAD_AFTER_MS} ms): kept; all ${MESSAGES} delivered once`);
  });

  it('killed while it holds rows: released by its sibling within a few heartbeats', async (t) => {
    const { id: secondId } = (await registryRow(second.pid))!;
    const sending = sendMessages(MESSAGES);
    await until('the second worker to hold claimed rows', async () => (await heldBy(secondId)).length >= 4, 60_000, 5);
    second.child.kill('SIGKILL');
    const killedAt = Date.now();
    await second.exited;
    const line = await until('the sibling to release the killed worker\'s claims', () =>
      releasedLines().find((l) => (l.processes as string[] | undefined)?.includes(secondId)), RELEASE_LIMIT_MS + 10_000, 20);
    const releasedMs = Date.now() - killedAt;
    assert.ok(releasedMs < RELEASE_LIMIT_MS, `released ${releasedMs} ms after the kill (limit ${RELEASE_LIMIT_MS} ms)`);
    await sending;
    await until(`${sent} transmissions completed`, async () => (await completed()) >= sent, 120_000, 100);
    assert.equal(sink.counts.size, sent, 'everything delivered');
    t.diagnostic(`killed; released ${JSON.stringify(line.released)} ${releasedMs} ms after the kill`);
    assert.deepEqual(await main.stop(), { code: 0, signal: null });
  });
});

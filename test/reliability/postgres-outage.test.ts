// posthorn-test: runs alone (it stops PostgreSQL; scripts/run-tests.js runs it after the others).
// PostgreSQL going away under load (docs/operations.md, "When the database is away"): a real
// `posthorn serve` child takes send_message calls while the server is stopped and started again.
// While it is away every answer is a 503 envelope naming the cause, or a 200 (accepted before or
// after): never a 500, never a crash. Everything acknowledged is delivered to a real SMTP sink once
// it is back, and the process is still alive and serving.
//
// PostgreSQL is ALWAYS started again (finally), whatever happens. Bounded: a fixed number of
// messages, every wait with a deadline.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { messageIdFor } from '../../src/domain/message-uid.ts';
import { onlyOn } from '../helpers/databases.ts';
import { canControlPostgres, controlPostgresCluster, createFreshPostgresDatabase, dropPostgresDatabase, waitForPostgres } from '../helpers/postgres.ts';
import { initProjectKey, startPosthorn, stopAll, type PosthornProcess } from '../helpers/processes.ts';
import { startSmtpPeer, type SmtpPeer } from '../helpers/smtp-peers.ts';

const TOTAL = 600;
const MAILER_HOST = 'outage.posthorn.test';
const CONCURRENCY = 8;

const skip = onlyOn('postgres') || (canControlPostgres() ? false : 'needs root and pg_ctlcluster to stop and start PostgreSQL');
if (skip && process.env.CI === 'true' && !onlyOn('postgres')) throw new Error(`postgres outage test cannot run under CI: ${skip}`);

describe('PostgreSQL stopped and started under a send load', { skip, timeout: 300_000 }, () => {
  let sink: SmtpPeer;
  let dataDir: string;
  let databaseUrl: string;
  let service: PosthornProcess;
  let url: string;
  let apiKey: string;

  before(async () => {
    sink = await startSmtpPeer({ starttls: false });
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'posthorn-pg-outage-'));
    databaseUrl = await createFreshPostgresDatabase();
    const env = {
      DATABASE_URL: databaseUrl,
      POSTHORN_DATA: dataDir,
      POSTHORN_SECRET_KEY: 'outage-secret',
      POSTHORN_MAILER_HOST: MAILER_HOST,
      POSTHORN_TRANSPORT_MAP: `example.test=127.0.0.1:${sink.port}`,
      POSTHORN_DNS_SERVERS: '127.0.0.1:9',
      POSTHORN_WORKERS: '8',
      POSTHORN_POLL_MS: '200',
      POSTHORN_DB_POOL_SIZE: '4',
      LOG_LEVEL: 'info',
    };
    apiKey = initProjectKey(env);
    service = startPosthorn('outage', ['serve', '--port', '0'], env);
    url = (await service.waitUntilRunning()).url!;
  });

  after(async () => {
    // Whatever happened above, PostgreSQL runs again for everyone else.
    try {
      controlPostgresCluster('start');
    } catch {
      // already running
    }
    await waitForPostgres().catch(() => {});
    await stopAll();
    await sink?.close();
    if (databaseUrl) await dropPostgresDatabase(databaseUrl).catch(() => {});
    if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('answers 200 or a 503 envelope while the database is away, never a 500 or a crash; delivers everything acknowledged once it is back', async () => {
    const accepted = new Set<number>();
    const answers = new Map<number, number>();
    const unavailable: string[] = [];
    let next = 0;
    let phase: 'before' | 'away' | 'back' = 'before';

    async function send(i: number): Promise<void> {
      const res = await fetch(`${url}/v.1.1/send_message`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          api_key: apiKey,
          uid: `outage-${i}`,
          arguments: { recipients: `r${i}@example.test`, headers: { from: 'load@posthorn.test', subject: `outage ${i}` }, content: { 'text/plain': `message ${i}` } },
        }),
        signal: AbortSignal.timeout(60_000),
      });
      const body = (await res.json()) as { response: { status: string; message?: string } };
      answers.set(res.status, (answers.get(res.status) ?? 0) + 1);
      if (res.status === 200) accepted.add(i);
      else if (res.status === 503) {
        assert.equal(body.response.status, 'service_unavailable', JSON.stringify(body));
        unavailable.push(body.response.message ?? '');
      } else assert.fail(`send ${i} during phase ${phase} answered ${res.status}: ${JSON.stringify(body)}`);
    }

    async function load(until: () => boolean): Promise<void> {
      await Promise.all(
        Array.from({ length: CONCURRENCY }, async () => {
          while (next < TOTAL && !until()) await send(next++);
        }),
      );
    }

    await load(() => accepted.size >= TOTAL / 4);
    let stoppedAt = 0;
    try {
      phase = 'away';
      // Stopped under the load: requests in flight meet the shutdown (57P01), later ones a refused connection.
      const loading = load(() => accepted.size >= TOTAL / 2 || (stoppedAt > 0 && Date.now() - stoppedAt > 3000 && unavailable.length >= 20));
      controlPostgresCluster('stop');
      stoppedAt = Date.now();
      await loading;
    } finally {
      controlPostgresCluster('start');
    }
    const startedAt = Date.now();
    await waitForPostgres();
    phase = 'back';
    assert.ok(unavailable.length > 0, 'some requests met the stopped database');
    assert.ok(unavailable.some((m) => /database/i.test(m)), `the 503 names the cause: ${unavailable[0]}`);

    // Back: the service answers again by itself (bounded), and takes the rest of the load.
    const deadline = Date.now() + 60_000;
    for (;;) {
      const before = accepted.size;
      await send(next++);
      if (accepted.size > before) break;
      assert.ok(Date.now() < deadline, 'the API answers 200 again after PostgreSQL is back');
      await new Promise((r) => setTimeout(r, 50));
    }
    const apiBackMs = Date.now() - startedAt;
    const outageMs = startedAt - stoppedAt;
    await load(() => false);
    assert.equal(service.exitCode, undefined, `the process is alive\n${service.tail()}`);

    // Everything acknowledged reaches the sink.
    const expected = [...accepted].map((i) => messageIdFor(`outage-${i}`, MAILER_HOST));
    const waitUntil = Date.now() + 120_000;
    for (;;) {
      const received = new Set(sink.received.map((m) => m.messageId));
      const missing = expected.filter((id) => !received.has(id));
      if (missing.length === 0) break;
      assert.ok(Date.now() < waitUntil, `${missing.length} acknowledged messages never arrived, e.g. ${missing.slice(0, 3).join(', ')}\n${service.tail()}`);
      await new Promise((r) => setTimeout(r, 250));
    }
    assert.equal(service.exitCode, undefined, 'the process is still alive');
    const paused = service.lines.filter((l) => l.msg === 'database unavailable: job paused until it returns' && l.job === 'delivery').length;
    const resumed = service.lines.some((l) => l.msg === 'database available again: job resumed' && l.job === 'delivery');
    console.log(
      `# postgres outage: stopped ${outageMs} ms, API answering 200 ${apiBackMs} ms after the start; ${next} requests, answers ${JSON.stringify(Object.fromEntries(answers))}, accepted ${accepted.size}, all delivered; ` +
        `delivery paused ${paused} time(s), resumed ${resumed}; first 503: ${unavailable[0]}`,
    );
    assert.ok(paused <= 2, `the outage is logged once per job (delivery logged it ${paused} times)`);
    // The API's 503s are logged once, then at most once per 10 s with their count: not a line each.
    const lines503 = service.lines.filter((l) => l.msg === 'database unavailable: answered 503');
    const answered503 = lines503.reduce((n, l) => n + Number(l.answered), 0);
    assert.ok(lines503.length >= 1, 'the 503s are logged');
    assert.ok(lines503.length <= Math.ceil((Date.now() - stoppedAt) / 10_000) + 1, `${lines503.length} log lines for ${unavailable.length} 503s`);
    assert.ok(answered503 >= lines503.length && answered503 <= unavailable.length, `the lines count ${answered503} of ${unavailable.length} 503s`);
    assert.deepEqual(await service.stop(), { code: 0, signal: null });
  });
});

// A message that kills its worker cannot stop delivery (domain/holder-deaths.ts, docs/reliability.md
// "A message that kills its worker").
//
//   in process: a transmission whose holders died three times in a row fails with WORKER_CRASHED
//     (attempt row, `failed` event) without being composed or sent; one whose holders died twice
//     is claimed alone (never two at once in a process) while other mail flows.
//   real processes: `posthorn serve` (the supervisor, its delivery process and an API process), a
//     real SMTP server that never answers the DATA of one recipient: the delivery process is killed
//     (kill -9) while holding it, three times; the supervisor restarts it each time; then the copy
//     fails with WORKER_CRASHED, its `failed` event recorded, and every other message is delivered
//     once, including one that was held with it at the first two kills.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
/** the documented result code (docs/delivery.md, "Outcomes and result codes") */
const WORKER_CRASHED = 'WORKER_CRASHED';
import { openStore, type Store } from '../../src/storage/store.ts';
import { freshDatabaseUrl, releaseDatabaseUrl, testDatabase } from '../helpers/databases.ts';
import { initInstallation, startPosthorn, stopAll, type LogLine, type PosthornProcess } from '../helpers/processes.ts';
import { startSmtpPeer, type SmtpPeer } from '../helpers/smtp-peers.ts';
import { until } from '../helpers/wait.ts';
import { simpleMessage, startDeliveryHarness, type DeliveryHarness } from './harness.ts';

describe('transmissions whose holders died (in process)', () => {
  let h: DeliveryHarness;
  let peer: SmtpPeer;
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  before(async () => {
    peer = await startSmtpPeer({ hold: (mail) => (mail.to.includes('suspect-a@example.test') ? gate : null) });
    h = await startDeliveryHarness({ config: { transportMap: [peer.transportFor('*')], socketTimeoutMs: 60_000 } });
  });
  after(async () => {
    open();
    await h?.close();
    await peer?.close();
  });

  it('fails at the third death with WORKER_CRASHED, sending nothing; works those at the second alone', async () => {
    for (const to of ['poison@example.test', 'suspect-a@example.test', 'suspect-b@example.test', 'plain@example.test']) await h.send(simpleMessage(to));
    const deaths: Record<string, number> = { 'poison@example.test': 3, 'suspect-a@example.test': 2, 'suspect-b@example.test': 2 };
    const store = h.t.app.services.store;
    for (const [recipient, n] of Object.entries(deaths)) {
      await store.write((trx) => trx.updateTable('transmissions').set({ holder_deaths: n }).where('recipient', '=', recipient).execute());
    }
    // The poison (the first suspect due) and the plain one.
    await h.worker.runOnce();
    const poison = await h.transmission('poison@example.test');
    assert.equal(poison.status, 'failed');
    assert.equal(poison.result_code, WORKER_CRASHED);
    assert.match(poison.result_message, /died while holding this transmission 3 times in a row/);
    assert.equal(poison.attempts, 1);
    assert.equal(poison.holder_deaths, 0);
    assert.deepEqual((await h.attempts(poison.id)).map((a) => [a.outcome, a.result_code, a.mx_host]), [['failed', WORKER_CRASHED, null]]);
    const events = (await h.events('failed')).filter((e) => e.payload.transmission_id === poison.id);
    assert.equal(events.length, 1, 'a failed event, for the webhooks');
    assert.equal(events[0].payload.result_code, WORKER_CRASHED);
    // The next suspect, once the poison is done (at the next poll; here at once): held at the peer.
    await h.worker.claimNow();
    await until('the first other suspect at the peer', () => peer.attempts.some((m) => m.to.includes('suspect-a@example.test')));
    // While it is held, a claim takes no other suspect.
    await h.worker.claimNow();
    const b = await h.transmission('suspect-b@example.test');
    assert.equal(b.locked_by, null, 'the second suspect waits: one at a time');
    assert.ok(peer.received.some((m) => m.to.includes('plain@example.test')), 'other mail flows');
    open();
    // Once it is done (finish recorded, the worker told), the next suspect: at the next poll; here at once.
    await h.worker.idle();
    await h.worker.claimNow();
    await until('every transmission finished', async () => (await h.transmissions()).every((t) => t.status === 'completed' || t.status === 'failed'));
    const order = peer.received.map((m) => m.to[0]);
    assert.ok(!order.includes('poison@example.test'), 'the poison was never sent');
    assert.ok(order.indexOf('suspect-a@example.test') < order.indexOf('suspect-b@example.test'));
    for (const to of ['suspect-a@example.test', 'suspect-b@example.test', 'plain@example.test']) {
      const t = await h.transmission(to);
      assert.deepEqual([t.status, t.holder_deaths], ['completed', 0], to);
    }
  });
});

describe('a transmission failed WORKER_CRASHED whose message kills whoever reads it (in process)', () => {
  let h: DeliveryHarness;
  before(async () => {
    h = await startDeliveryHarness({ config: { transportMap: ['*=127.0.0.1:9'] } });
  });
  after(async () => {
    await h?.close();
  });

  it('has its failed event whichever step killed its holders, the payload never read', async () => {
    // Two copies of a message whose payload cannot be read (it stands for one whose reading kills
    // the process): failed at their third death, and after a fourth (the failure itself died
    // once more, reading the message).
    const sent = await h.send({ recipients: { 'third@example.test': { n: 3 }, 'fourth@example.test': { n: 4 } }, headers: { from: 'shop@posthorn.test', subject: 'Heavy' }, content: { 'text/plain': 'Heavy {{n}}' }, variables: { shared: true } });
    const messageId = sent.data.message.id as number;
    const store = h.t.app.services.store;
    await store.write(async (trx) => {
      await trx.updateTable('messages').set({ payload: '{"not json' }).where('id', '=', messageId).execute();
      await trx.updateTable('transmissions').set({ holder_deaths: 3 }).where('recipient', '=', 'third@example.test').execute();
      await trx.updateTable('transmissions').set({ holder_deaths: 4 }).where('recipient', '=', 'fourth@example.test').execute();
    });
    const message = await store.db.selectFrom('messages').select(['uid', 'unique_id']).where('id', '=', messageId).executeTakeFirstOrThrow();
    // Suspects both: claimed one at a time.
    for (let i = 0; i < 2; i++) {
      await h.worker.runOnce();
      await h.worker.idle();
    }
    for (const [recipient, deaths] of [['third@example.test', 3], ['fourth@example.test', 4]] as const) {
      const t = await h.transmission(recipient);
      assert.deepEqual([t.status, t.result_code, t.attempts, t.holder_deaths], ['failed', WORKER_CRASHED, 1, 0], recipient);
      const events = (await h.events('failed')).filter((e) => e.payload.transmission_id === t.id);
      assert.equal(events.length, 1, `${recipient}: its failed event, for the webhooks`);
      const p = events[0].payload;
      assert.deepEqual(
        [p.message_id, p.message_uid, p.unique_id, p.project_uid, p.recipient, p.delivered_to, p.status, p.result_code],
        [messageId, message.uid, message.unique_id, h.seed.projectUid, recipient, recipient, 'failed', WORKER_CRASHED],
        recipient,
      );
      assert.match(p.result_message, new RegExp(`died while holding this transmission ${deaths} times in a row`));
      // Stored events hold no variables: the dispatcher adds them when it posts (webhooks/event-variables.ts).
      assert.equal(p.variables, undefined);
    }
  });
});

describe(`a message whose delivery process is killed while holding it (${testDatabase()}, real processes)`, { timeout: 240_000 }, () => {
  const POISON = 'poison@sink.test';
  const INNOCENT = 'innocent@sink.test';
  /** the innocent copy is held at the sink with the poison while this is true */
  let holdInnocent = true;
  let sink: SmtpPeer;
  let dataDir: string;
  let databaseUrl: string | null;
  let apiKey: string;
  let serve: PosthornProcess;
  let store: Store;

  before(async () => {
    // The sink never answers the poison's DATA: its delivery process holds it until it is killed.
    sink = await startSmtpPeer({ starttls: false, data: (mail) => (mail.to.includes(POISON) || (holdInnocent && mail.to.includes(INNOCENT)) ? 'stall' : null) });
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'posthorn-poison-'));
    databaseUrl = await freshDatabaseUrl();
    const project = initInstallation(commonArgs(), { DATABASE_URL: '' });
    apiKey = project.api_key;
    store = await openStore({ databaseUrl, data: dataDir });
  });
  after(async () => {
    await stopAll();
    await store?.close();
    await sink?.close();
    await releaseDatabaseUrl(databaseUrl);
    if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
  });

  function commonArgs(): string[] {
    return ['--data', dataDir, '--secret-key', 'poison-test-secret', '--mailer-host', 'poison.posthorn.test', ...(databaseUrl ? ['--database-url', databaseUrl] : [])];
  }

  async function send(recipient: string, uid: string): Promise<void> {
    const res = await fetch(`${url}/v.1.1/send_message`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ api_key: apiKey, uid, arguments: { recipients: recipient, headers: { from: 'load@posthorn.test', subject: uid }, content: { 'text/plain': uid } } }),
    });
    assert.equal(res.status, 200, await res.text());
  }

  async function transmission(recipient: string) {
    return store.db.selectFrom('transmissions').selectAll().where('recipient', '=', recipient).executeTakeFirstOrThrow();
  }

  const attemptsAtSink = (recipient: string) => sink.attempts.filter((m) => m.to.includes(recipient)).length;
  const receivedAtSink = (recipient: string) => sink.received.filter((m) => m.to.includes(recipient)).length;
  let url: string;

  it('is failed with WORKER_CRASHED after three kills while held; everything else is delivered once', async (t) => {
    // The supervisor (serve on 2+ processes): a delivery process and an API process; a killed one is restarted.
    serve = startPosthorn(
      'serve',
      ['serve', ...commonArgs(), '--port', '0', '--processes', '2', '--api-processes', '1', '--workers', '8', '--poll-ms', '200', '--transport-map', `sink.test=127.0.0.1:${sink.port}`, '--dns-server', '127.0.0.1:9', '--log-level', 'info'],
      { DATABASE_URL: '', LOG_LEVEL: '', POSTHORN_OPS_PORT: '0' },
    );
    const running = await serve.waitForLog((l) => l.msg === 'posthorn is running', 'startup', 120_000);
    url = running.url as string;
    let workerPid = (running.processes as Array<{ role: string; pid: number }>).find((p) => p.role === 'worker')!.pid;
    await send(POISON, 'poison');
    await send(INNOCENT, 'innocent');
    let sent = 0;
    for (let kill = 1; kill <= 3; kill++) {
      // Held at the sink (the innocent one too at the first two kills), while other mail flows.
      await until(`the poison at the sink for the ${kill}th time`, () => attemptsAtSink(POISON) >= kill, 60_000);
      if (kill <= 2) await until(`the innocent one at the sink for the ${kill}th time`, () => attemptsAtSink(INNOCENT) >= kill, 60_000);
      await send(`other-${kill}@sink.test`, `other-${kill}`);
      sent++;
      // Delivered and recorded (a kill between the two would send it again, as after any crash).
      await until(`other-${kill} delivered while the poison is held`, async () => (await transmission(`other-${kill}@sink.test`)).status === 'completed', 60_000);
      assert.notEqual((await transmission(POISON)).locked_by, null, 'the poison is held');
      const restarts = serve.lines.filter((l) => l.msg === 'posthorn process restarted').length;
      process.kill(workerPid, 'SIGKILL');
      const restarted: LogLine = await until(
        'the delivery process restarted',
        () => serve.lines.filter((l) => l.msg === 'posthorn process restarted' && l.role === 'worker')[restarts],
        60_000,
      );
      workerPid = restarted.pid as number;
      if (kill === 2) holdInnocent = false;
    }
    const failed = await until('the poison failed', async () => {
      const row = await transmission(POISON);
      return row.status === 'failed' && row;
    }, 60_000, 100);
    assert.equal(failed.result_code, WORKER_CRASHED);
    assert.equal(failed.attempts, 1, 'one attempt: the failure; the deaths charged none');
    const events = await store.db.selectFrom('events').select(['type', 'payload']).where('type', '=', 'failed').execute();
    const poisonEvents = events.map((e) => JSON.parse(e.payload)).filter((p) => p.transmission_id === failed.id);
    assert.deepEqual(poisonEvents.map((p) => p.result_code), [WORKER_CRASHED], 'its failed event, for the webhooks');
    assert.equal(attemptsAtSink(POISON), 3, 'the poison reached the sink three times, never a fourth');
    assert.equal(receivedAtSink(POISON), 0);
    // The innocent one, held with it at the first two kills, is delivered; so is everything else.
    await send('after@sink.test', 'after');
    await until('the innocent one and the last message delivered', () => receivedAtSink(INNOCENT) === 1 && receivedAtSink('after@sink.test') === 1, 60_000);
    const innocent = await transmission(INNOCENT);
    assert.deepEqual([innocent.status, innocent.holder_deaths], ['completed', 0]);
    for (let i = 1; i <= sent; i++) assert.equal(receivedAtSink(`other-${i}@sink.test`), 1);
    t.diagnostic(`poison failed with ${failed.result_code} after 3 kills; ${sent + 2} other messages delivered once each`);
    assert.deepEqual(await serve.stop(), { code: 0, signal: null });
  });
});

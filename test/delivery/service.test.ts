// The delivery service as it runs inside `serve`: woken by send_message, bounded graceful stop,
// and defects (a throw past the adapters) turned into recorded deferrals.
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import pino from 'pino';
import { Writable } from 'node:stream';
import { createDeliveryWorker } from '../../src/delivery/deliver-transmissions.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { reply, startSmtpPeer, type SmtpPeer } from '../helpers/smtp-peers.ts';
import { simpleMessage, startDeliveryHarness } from './harness.ts';
import { until } from '../helpers/wait.ts';

describe('the delivery service in a running app', () => {
  const cleanup: Array<() => Promise<void>> = [];
  after(async () => {
    for (const f of cleanup.reverse()) await f();
  });

  it('delivers what send_message accepts, woken at once (no poll wait)', async () => {
    const peer = await startSmtpPeer();
    cleanup.push(() => peer.close());
    // A poll interval far longer than the test: only the wake-up can explain a prompt delivery.
    const t: TestApp = await startTestApp({ config: { workers: 8, pollMs: 600_000, transportMap: [peer.transportFor('*')] } });
    cleanup.push(() => t.close());
    assert.ok(t.app.background.some((b) => b.name === 'delivery'));
    const seed = await t.seed();
    const r = await t.call('send_message', { api_key: seed.projectKey, arguments: simpleMessage(['a@example.test', 'b@example.test', 'c@example.test']) });
    assert.equal(r.status, 200);
    await peer.waitForReceived(3);
    const db = t.app.services.store.db;
    await until('all completed', async () => {
      const rows = await db.selectFrom('transmissions').select('status').execute();
      return rows.length === 3 && rows.every((row) => row.status === 'completed');
    });
  });

  it('--workers 0 runs no delivery service', async () => {
    const t = await startTestApp({ config: { workers: 0 } });
    cleanup.push(() => t.close());
    assert.equal(t.app.background.some((b) => b.name === 'delivery'), false);
  });

  it('stop() lets a delivery in flight finish', async () => {
    const peer = await startSmtpPeer({ dataDelayMs: 300 });
    cleanup.push(() => peer.close());
    const h = await startDeliveryHarness({ config: { transportMap: [peer.transportFor('*')] } });
    cleanup.push(() => h.t.close());
    await h.send(simpleMessage('slow@example.test'));
    await h.worker.start();
    await until('the message is on the wire', async () => peer.connectionCount > 0);
    await h.worker.stop();
    assert.equal((await h.transmission('slow@example.test')).status, 'completed');
  });

  it('stop() gives back what is still in flight after the grace period, due at once', async () => {
    const peer = await startSmtpPeer({ data: () => 'stall' });
    cleanup.push(() => peer.close());
    const h = await startDeliveryHarness({ config: { transportMap: [peer.transportFor('*')], socketTimeoutMs: 30_000 }, delivery: { stopGraceMs: 200 } });
    cleanup.push(() => h.t.close());
    await h.send(simpleMessage('stuck@example.test'));
    await h.worker.start();
    await until('the message is in DATA', async () => peer.attempts.length > 0);
    await h.worker.stop();
    const t = await h.transmission('stuck@example.test');
    assert.equal(t.status, 'queued');
    assert.equal(t.locked_by, null);
    assert.ok(t.next_attempt_at <= Date.now());
    await peer.close(); // ends the stalled session; the late outcome must record nothing
    await new Promise((r) => setTimeout(r, 100));
    assert.equal((await h.attempts(t.id)).length, 0);
  });

  it('a throw past the adapters is logged, deferred as INTERNAL_ERROR and recorded; the rest of the batch is delivered', async () => {
    const peer = await startSmtpPeer();
    cleanup.push(() => peer.close());
    const lines: any[] = [];
    const log = pino({ level: 'error' }, new Writable({ write: (chunk, _e, cb) => (lines.push(JSON.parse(String(chunk))), cb()) }));
    const h = await startDeliveryHarness({ config: { transportMap: [peer.transportFor('*')] } });
    cleanup.push(() => h.close());
    const worker = createDeliveryWorker({ ...h.t.app.services, log });
    cleanup.push(() => worker.stop());
    await h.send(simpleMessage('good@example.test'));
    // A message whose stored payload is not JSON: loading it throws.
    const db = h.t.app.services.store.db;
    const good = await h.transmission('good@example.test');
    await h.t.app.services.store.write(async (trx) => {
      const msg = await trx.selectFrom('messages').selectAll().where('id', '=', good.message_id).executeTakeFirstOrThrow();
      const { id: _id, ...rest } = msg;
      const bad = await trx.insertInto('messages').values({ ...rest, uid: 'broken', payload: '{not json' }).returning('id').executeTakeFirstOrThrow();
      const { id: _tid, ...trow } = good;
      await trx.insertInto('transmissions').values({ ...trow, message_id: bad.id, recipient: 'broken@example.test' }).execute();
    });
    assert.equal(await worker.runOnce(), 2);
    assert.equal((await h.transmission('good@example.test')).status, 'completed');
    const broken = await h.transmission('broken@example.test');
    assert.equal(broken.status, 'retry');
    assert.equal(broken.result_code, 'INTERNAL_ERROR');
    assert.equal((await h.attempts(broken.id))[0].outcome, 'deferred');
    assert.ok(lines.some((l) => l.msg === 'delivery defect' && l.transmission === broken.id));
    assert.ok(!JSON.stringify(lines).includes('{not json'), 'payloads are not logged');
    void db;
  });

  it('one finish that cannot be written does not stop the others of its batch', async () => {
    const peer = await startSmtpPeer({ rcpt: (to) => (to.startsWith('gone') ? reply(550, '5.1.1 user unknown') : null) });
    cleanup.push(() => peer.close());
    const h = await startDeliveryHarness({ config: { transportMap: [peer.transportFor('*')] } });
    cleanup.push(() => h.close());
    await h.send(simpleMessage(['fine1@example.test', 'fine2@example.test']));
    const good = await h.transmission('fine1@example.test');
    // A transmission whose project does not exist: its hard bounce cannot be recorded (the
    // suppression row's foreign key fails), so its whole finish fails.
    await h.t.app.services.store.write(async (trx) => {
      const { id: _id, ...row } = good;
      await trx.insertInto('transmissions').values({ ...row, project_id: 999_999, recipient: 'gone@example.test' }).execute();
    });
    assert.equal(await h.worker.runOnce(), 3);
    assert.equal((await h.transmission('fine1@example.test')).status, 'completed');
    assert.equal((await h.transmission('fine2@example.test')).status, 'completed');
    const bad = await h.transmission('gone@example.test');
    assert.equal(bad.status, 'queued', 'nothing written for it: the lease still holds it');
    assert.equal(bad.locked_by, h.worker.workerId);
    assert.equal((await h.attempts(bad.id)).length, 0);
  });
});

// The sandbox mode is the message's own, fixed when it is accepted (docs/sandbox.md): switching
// the project's setting between acceptance and delivery (a send_at ahead, a retry waiting) changes
// nothing for it. The only route is a real SMTP peer on 127.0.0.1: a sandboxed copy must never
// reach it, a real one must. Also: the events of a sandboxed copy say `sandbox: true`, and its
// attempts are counted by posthorn_sandbox_attempts_total, not as delivery attempts.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ManualClock } from '../../src/domain/clock.ts';
import { simpleMessage, startDeliveryHarness, type DeliveryHarness } from './harness.ts';
import { startSmtpPeer, type SmtpPeer } from '../helpers/smtp-peers.ts';
import { sampleValue, scrape } from '../ops/prometheus.ts';

const HOUR = 3_600_000;

describe('the sandbox mode is fixed per message at acceptance', () => {
  const clock = new ManualClock(Date.UTC(2026, 5, 1, 12));
  let h: DeliveryHarness;
  let peer: SmtpPeer;

  before(async () => {
    peer = await startSmtpPeer({ starttls: false });
    h = await startDeliveryHarness({ clock, config: { transportMap: [peer.transportFor('*')], retrySchedule: '1m,5m' } });
  });
  after(async () => {
    await h?.close();
    await peer?.close();
  });

  async function setSandbox(on: boolean): Promise<void> {
    const r = await h.t.call('update_project', { api_key: h.seed.accountKey, arguments: { uid: h.seed.projectUid, settings: { sandbox: on } } });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.data.project.settings.sandbox, on);
  }

  const inAnHour = () => ({ send_at: new Date(clock.now() + HOUR).toISOString() });
  const metrics = () => scrape(h.t.url);

  it('a message accepted in sandbox mode and scheduled is answered by the sandbox after sandbox is switched off', async () => {
    await setSandbox(true);
    await h.send(simpleMessage('scheduled@example.test', { ...inAnHour() }));
    await setSandbox(false);
    const before = await metrics();
    assert.equal(await h.drain(), 0, 'nothing is due before send_at');
    clock.advance(HOUR + 1000);
    assert.equal(await h.drain(), 1);
    const t = await h.transmission('scheduled@example.test');
    assert.equal(t.status, 'completed');
    assert.match(t.result_message, /accepted by the sandbox; nothing was sent/);
    assert.deepEqual((await h.attempts(t.id)).map((a: any) => a.mx_host), ['sandbox']);
    assert.equal(peer.connectionCount, 0, 'a sandboxed copy connected to the SMTP route');
    assert.equal(peer.received.length, 0);
    const delivered = (await h.events('delivered')).filter((e) => e.payload.recipient === 'scheduled@example.test');
    assert.equal(delivered.length, 1);
    assert.equal(delivered[0].payload.sandbox, true, 'the event of a sandboxed copy says so');
    const after = await metrics();
    assert.equal(sampleValue(after, 'posthorn_sandbox_attempts_total', { outcome: 'sent' }) - sampleValue(before, 'posthorn_sandbox_attempts_total', { outcome: 'sent' }), 1);
    assert.equal(sampleValue(after, 'posthorn_delivery_attempts_total'), sampleValue(before, 'posthorn_delivery_attempts_total'), 'no delivery attempt counted');
    assert.equal(sampleValue(after, 'posthorn_delivery_latency_seconds_count'), sampleValue(before, 'posthorn_delivery_latency_seconds_count'));
  });

  it('a sandboxed copy waiting for a retry stays in the sandbox after sandbox is switched off', async () => {
    await setSandbox(true);
    await h.send(simpleMessage('delay+retry@simulator.posthorn.test'));
    assert.equal(await h.drain(), 1);
    assert.equal((await h.transmission('delay+retry@simulator.posthorn.test')).status, 'retry');
    await setSandbox(false);
    for (let i = 0; i < 3; i++) {
      clock.advance(10 * 60_000);
      await h.drain();
    }
    const t = await h.transmission('delay+retry@simulator.posthorn.test');
    assert.equal(t.status, 'completed');
    assert.equal(t.attempts, 3, 'the sandbox answered the third attempt, as for any sandbox copy');
    assert.deepEqual((await h.attempts(t.id)).map((a: any) => a.mx_host), ['sandbox', 'sandbox', 'sandbox']);
    assert.equal(peer.connectionCount, 0, 'a sandboxed retry connected to the SMTP route');
    const retries = (await h.events('retry')).filter((e) => e.payload.recipient === 'delay+retry@simulator.posthorn.test');
    assert.equal(retries.length, 2);
    assert.ok(retries.every((e) => e.payload.sandbox === true));
  });

  it('real mail accepted with sandbox off and scheduled is delivered after sandbox is switched on', async () => {
    await setSandbox(false);
    await h.send(simpleMessage('real@example.test', { ...inAnHour() }));
    await setSandbox(true);
    const before = await metrics();
    clock.advance(HOUR + 1000);
    assert.equal(await h.drain(), 1);
    await peer.waitForReceived(1, 10_000);
    assert.deepEqual(peer.received[0].to, ['real@example.test']);
    const t = await h.transmission('real@example.test');
    assert.equal(t.status, 'completed');
    assert.doesNotMatch(t.result_message ?? '', /sandbox/);
    assert.notEqual((await h.attempts(t.id))[0].mx_host, 'sandbox');
    const delivered = (await h.events('delivered')).filter((e) => e.payload.recipient === 'real@example.test');
    assert.equal(delivered.length, 1);
    assert.equal('sandbox' in delivered[0].payload, false, 'a real copy\'s event has no sandbox field');
    const after = await metrics();
    assert.equal(sampleValue(after, 'posthorn_delivery_attempts_total', { outcome: 'sent' }) - sampleValue(before, 'posthorn_delivery_attempts_total', { outcome: 'sent' }), 1);
    assert.equal(sampleValue(after, 'posthorn_sandbox_attempts_total'), sampleValue(before, 'posthorn_sandbox_attempts_total'));
  });

  it('a copy completed at acceptance (null.postageapp.com) of a sandboxed message has sandbox: true in its event', async () => {
    await setSandbox(true);
    await h.send(simpleMessage(['sink@null.postageapp.com']));
    await setSandbox(false);
    const delivered = (await h.events('delivered')).filter((e) => e.payload.recipient === 'sink@null.postageapp.com');
    assert.equal(delivered.length, 1);
    assert.equal(delivered[0].payload.sandbox, true);
  });
});

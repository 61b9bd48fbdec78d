// Scheduled sends (docs/api/send-message.md, "Scheduled sends"): send_at stores the message at once
// and makes its copies due then; a worker started later (a restart) delivers it when due; the Date
// header and the retry deadline count from the scheduled time. A ManualClock stands for time.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { simpleParser } from 'mailparser';
import { ManualClock } from '../../src/domain/clock.ts';
import { parseSendAt } from '../../src/domain/send-at.ts';
import { createDeliveryWorker } from '../../src/delivery/deliver-transmissions.ts';
import { metricsOf } from '../../src/observability/metrics.ts';
import { simpleMessage, startDeliveryHarness, type DeliveryHarness } from '../delivery/harness.ts';
import { reply, startSmtpPeer, type SmtpPeer } from '../helpers/smtp-peers.ts';

const HOUR = 3_600_000;

describe('send_at parsing', () => {
  const now = Date.UTC(2026, 0, 1);
  const DAYS_90 = 90 * 24 * HOUR;
  it('reads ISO 8601 with a zone and the Mandrill UTC form; the past means now', () => {
    assert.equal(parseSendAt('2026-01-02T00:00:00Z', now, DAYS_90), Date.UTC(2026, 0, 2));
    assert.equal(parseSendAt('2026-01-02T02:00:00+02:00', now, DAYS_90), Date.UTC(2026, 0, 2));
    assert.equal(parseSendAt('2026-01-01T20:30:00.250-0330', now, DAYS_90), Date.UTC(2026, 0, 2, 0, 0, 0, 250));
    assert.equal(parseSendAt('2026-01-02 00:00:00', now, DAYS_90), Date.UTC(2026, 0, 2));
    assert.equal(parseSendAt('2020-05-05 10:00:00', now, DAYS_90), now);
    assert.equal(parseSendAt(null, now, DAYS_90), null);
    assert.equal(parseSendAt('', now, DAYS_90), null);
  });
  it('refuses no zone, impossible dates, other forms and times beyond the limit (406)', () => {
    for (const bad of ['2026-01-02T00:00:00', '2026-02-30 10:00:00', '2026-01-02 24:00:00', 'tomorrow', '1767312000', '2026-01-02T00:00:00+25:00']) {
      assert.throws(() => parseSendAt(bad, now, DAYS_90), (e: any) => e.status === 'call_error' && /send_at/.test(e.message), bad);
    }
    assert.throws(() => parseSendAt('2026-04-02T00:00:01Z', now, DAYS_90), /more than 90 days ahead/);
    assert.equal(parseSendAt('2026-04-01T00:00:00Z', now, DAYS_90), now + DAYS_90);
  });
  it('echoes the value exactly as it was sent, quoted, in every refusal', () => {
    assert.throws(() => parseSendAt('2026-02-30T10:00:00Z', now, DAYS_90), (e: any) => e.message.includes('("2026-02-30T10:00:00Z") is not a time'));
    assert.throws(() => parseSendAt(' 2026-02-30 10:00:00', now, DAYS_90), (e: any) => e.message.includes('(" 2026-02-30 10:00:00") is not a time'));
    assert.throws(() => parseSendAt('2026-04-02T00:00:01Z', now, DAYS_90), (e: any) => e.message.includes('("2026-04-02T00:00:01Z") is more than 90 days ahead'));
  });
});

describe('scheduled sends', () => {
  let peer: SmtpPeer;
  let h: DeliveryHarness;
  const clock = new ManualClock(Date.UTC(2026, 5, 1, 12));
  // Deferred at the scheduled time only for addresses at defer.test.
  before(async () => {
    peer = await startSmtpPeer({ rcpt: (address) => (address.endsWith('@defer.test') ? reply(451, '4.7.1 try later') : null) });
    h = await startDeliveryHarness({ clock, config: { transportMap: [peer.transportFor('*')], maxRetryAgeMs: 2 * HOUR, retrySchedule: '1m' } });
  });
  after(async () => {
    await h.close();
    await peer.close();
  });

  it('stores at once, is not due before send_at, and a new worker (a restart) delivers it then with that Date', async () => {
    const at = clock.now() + 3 * HOUR;
    const sent = await h.send(simpleMessage('later@example.test', { send_at: new Date(at).toISOString().replace('Z', '+00:00') }));
    const t = await h.transmission('later@example.test');
    assert.equal(t.status, 'queued');
    assert.equal(Number(t.next_attempt_at), at);
    assert.equal(await h.drain(), 0);
    clock.advance(3 * HOUR - 1);
    assert.equal(await h.drain(), 0);
    assert.equal(peer.received.length, 0);

    // Another worker (as after a restart: nothing of the schedule is in memory) finds it in the database.
    const next = createDeliveryWorker(h.t.app.services);
    try {
      clock.advance(1);
      assert.equal(await next.runOnce(), 1);
    } finally {
      await next.stop();
    }
    await peer.waitForReceived(1);
    const mail = await simpleParser(peer.received[0].raw);
    assert.equal(mail.date?.getTime(), at);
    assert.equal((await h.transmission('later@example.test')).status, 'completed');
    assert.ok(sent.data.message.id);
  });

  it('measures the delivery latency from the scheduled time, not from acceptance', async () => {
    const latency = async () => {
      const values = (await metricsOf(h.t.app.services).deliveryLatency.get()).values;
      return { count: values.find((v) => v.metricName?.endsWith('_count'))?.value ?? 0, sum: values.find((v) => v.metricName?.endsWith('_sum'))?.value ?? 0 };
    };
    const before = await latency();
    await h.send(simpleMessage('ontime@example.test', { send_at: new Date(clock.now() + 3 * HOUR).toISOString() }));
    clock.advance(3 * HOUR + 5_000);
    assert.equal(await h.drain(), 1);
    assert.equal((await h.transmission('ontime@example.test')).status, 'completed');
    const after = await latency();
    assert.equal(after.count - before.count, 1);
    // Sent 5 s after it was due: 5 s late, not 3 hours.
    assert.equal(after.sum - before.sum, 5);
  });

  it('accepts the Mandrill form; a time in the past is due now; bad values are 406', async () => {
    const inOneHour = new Date(clock.now() + HOUR).toISOString().replace('T', ' ').slice(0, 19);
    await h.send(simpleMessage('mandrill@example.test', { send_at: inOneHour }));
    assert.equal(Number((await h.transmission('mandrill@example.test')).next_attempt_at), clock.now() + HOUR);
    await h.send(simpleMessage('past@example.test', { send_at: '2001-01-01T00:00:00Z' }));
    assert.equal(Number((await h.transmission('past@example.test')).next_attempt_at), clock.now());
    const bad = await h.t.call('send_message', { api_key: h.seed.projectKey, arguments: simpleMessage('x@example.test', { send_at: '2026-06-01T12:00:00' }) });
    assert.equal(bad.status, 406);
    assert.match(bad.body.response.message, /send_at/);
    const far = await h.t.call('send_message', { api_key: h.seed.projectKey, arguments: simpleMessage('x@example.test', { send_at: '2030-01-01T00:00:00Z' }) });
    assert.equal(far.status, 406);
    assert.match(far.body.response.message, /days ahead/);
  });

  it('counts the retry deadline from the scheduled time, not from acceptance', async () => {
    // Scheduled 3 h ahead with a 2 h retry deadline: a deferral at the scheduled time is retried.
    await h.send(simpleMessage('slow@defer.test', { send_at: new Date(clock.now() + 3 * HOUR).toISOString() }));
    clock.advance(3 * HOUR);
    await h.drain();
    const t = await h.transmission('slow@defer.test');
    assert.equal(t.status, 'retry', `${t.status} ${t.result_message}`);
    // Two hours after the scheduled time it is given up.
    clock.advance(2 * HOUR + 1);
    await h.drain();
    assert.equal((await h.transmission('slow@defer.test')).status, 'failed');
  });
});

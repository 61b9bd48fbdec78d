// Real traffic through the running service, then /metrics and the log: deliveries to an SMTP peer
// (one accepted, one rejected 550) and a webhook to an HTTP sink each leave one counted outcome and
// one structured log line, with the recipient's domain and never the address.
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { after, describe, it } from 'node:test';
import pino from 'pino';
import { startTestApp } from '../helpers/app.ts';
import { startHttpSink } from '../helpers/http-sink.ts';
import { reply, startSmtpPeer } from '../helpers/smtp-peers.ts';
import { simpleMessage } from '../delivery/harness.ts';
import { sampleValue, scrapeUntil } from './prometheus.ts';

describe('attempt metrics and log lines from real traffic', () => {
  const cleanup: Array<() => Promise<void>> = [];
  after(async () => {
    for (const f of cleanup.reverse()) await f();
  });

  it('counts delivery outcomes and webhook attempts, one log line each', async () => {
    const peer = await startSmtpPeer({ starttls: false, rcpt: (address) => (address.startsWith('nobody@') ? reply(550, '5.1.1 No such user') : null) });
    cleanup.push(() => peer.close());
    const sink = await startHttpSink();
    cleanup.push(() => sink.close());
    const lines: Array<Record<string, unknown>> = [];
    const log = pino({ level: 'info' }, new Writable({ write: (chunk, _e, cb) => (lines.push(JSON.parse(String(chunk))), cb()) }));
    const t = await startTestApp({ log, config: { workers: 4, pollMs: 100, transportMap: [peer.transportFor('*')], allowPrivateWebhooks: true } });
    cleanup.push(() => t.close());
    const seed = await t.seed();
    const hook = await t.call('create_webhook', { api_key: seed.accountKey, arguments: { url: `${sink.url}/hook`, events: ['delivered'] } });
    assert.equal(hook.status, 200, JSON.stringify(hook.body));

    for (const to of ['ada@example.test', 'nobody@example.test']) {
      const r = await t.call('send_message', { api_key: seed.projectKey, arguments: simpleMessage(to) });
      assert.equal(r.status, 200, JSON.stringify(r.body));
    }
    const samples = await scrapeUntil(t.url, 'both outcomes and the webhook attempt', (s) =>
      sampleValue(s, 'posthorn_delivery_attempts_total') === 2 && sampleValue(s, 'posthorn_outbound_attempts_total') >= 1,
    );
    assert.equal(sampleValue(samples, 'posthorn_delivery_attempts_total', { outcome: 'sent', code_class: '2xx', domain_group: 'other' }), 1);
    assert.equal(sampleValue(samples, 'posthorn_delivery_attempts_total', { outcome: 'failed', code_class: '5xx', domain_group: 'other' }), 1);
    assert.equal(sampleValue(samples, 'posthorn_delivery_latency_seconds_count'), 1);
    assert.equal(sampleValue(samples, 'posthorn_outbound_attempts_total', { kind: 'webhook', outcome: 'delivered', status_class: '2xx' }), 1);
    // Both attempts reached the peer over plain text (it offers no STARTTLS here), and the pooled
    // connection stays open, idle, after its messages.
    assert.equal(sampleValue(samples, 'posthorn_smtp_sessions_total', { tls: 'false' }), 2);
    assert.ok(sampleValue(samples, 'posthorn_smtp_connections_open') >= 1, 'the idle pooled connection is counted');

    const deliveries = lines.filter((l) => l.event === 'delivery_attempt');
    assert.equal(deliveries.length, 2);
    assert.deepEqual(deliveries.map((l) => l.code).sort(), ['SMTP_250', 'SMTP_550']);
    for (const l of deliveries) {
      assert.equal(l.domain, 'example.test');
      assert.equal(typeof l.transmission, 'number');
      assert.equal(typeof l.duration_ms, 'number');
    }
    assert.ok(!JSON.stringify(deliveries).includes('ada@'), 'no address without --log-addresses');
    const outbound = lines.filter((l) => l.event === 'outbound_attempt');
    assert.equal(outbound.length, 1);
    assert.equal(outbound[0].outcome, 'delivered');
    assert.equal(outbound[0].code, 200);
  });
  it('masks the addresses in a logged reply unless --log-addresses', async () => {
    const peer = await startSmtpPeer({ starttls: false, rcpt: (address) => reply(550, `5.1.1 <${address}>: Recipient address rejected`) });
    cleanup.push(() => peer.close());
    for (const logAddresses of [false, true]) {
      const lines: Array<Record<string, unknown>> = [];
      const log = pino({ level: 'info' }, new Writable({ write: (chunk, _e, cb) => (lines.push(JSON.parse(String(chunk))), cb()) }));
      const t = await startTestApp({ log, config: { workers: 1, pollMs: 100, logAddresses, transportMap: [peer.transportFor('*')] } });
      cleanup.push(() => t.close());
      const seed = await t.seed();
      const r = await t.call('send_message', { api_key: seed.projectKey, arguments: simpleMessage('reject-bob@fail.test') });
      assert.equal(r.status, 200, JSON.stringify(r.body));
      await scrapeUntil(t.url, 'the failed attempt', (s) => sampleValue(s, 'posthorn_delivery_attempts_total') === 1);
      const line = lines.find((l) => l.event === 'delivery_attempt')!;
      assert.equal(line.code, 'SMTP_550');
      if (logAddresses) assert.equal(line.reply, '5.1.1 <reject-bob@fail.test>: Recipient address rejected');
      else {
        assert.equal(line.reply, '5.1.1 <***@fail.test>: Recipient address rejected', 'the domain, not the person');
        assert.ok(!lines.some((l) => JSON.stringify(l).includes('reject-bob')), 'no line names the address');
      }
    }
  });
});

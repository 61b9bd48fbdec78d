// /metrics, /healthz, /readyz and the request observers, scraped over HTTP after real traffic:
// API requests, accepted messages, the delivery queue, real deliveries to an SMTP peer, and a
// worker-only process's own operations listener.
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { after, describe, it } from 'node:test';
import pino from 'pino';
import { OperationsService } from '../../src/http/ops/listener.ts';
import { recordDeliveryAttempt, recordOutboundAttempt } from '../../src/observability/attempts.ts';
import { domainGroup, smtpCodeClass } from '../../src/observability/metrics.ts';
import { startTestApp } from '../helpers/app.ts';
import { simpleMessage } from '../delivery/harness.ts';
import { startHttpSink } from '../helpers/http-sink.ts';
import { recordEvent } from '../../src/storage/events.ts';
import type { OutboundDispatcher } from '../../src/webhooks/index.ts';
import { sampleValue, scrape, scrapeUntil } from './prometheus.ts';

function captureLog(): { log: pino.Logger; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const log = pino({ level: 'info' }, new Writable({ write: (chunk, _e, cb) => (lines.push(JSON.parse(String(chunk))), cb()) }));
  return { log, lines };
}

describe('operations endpoints', () => {
  const cleanup: Array<() => Promise<void>> = [];
  after(async () => {
    for (const f of cleanup.reverse()) await f();
  });

  it('healthz, readyz and the old /health answer; every response names its request id', async () => {
    const t = await startTestApp();
    cleanup.push(() => t.close());
    for (const path of ['/healthz', '/health']) {
      const r = await fetch(t.url + path);
      assert.equal(r.status, 200);
      assert.deepEqual(await r.json(), { status: 'ok' });
      assert.match(r.headers.get('x-request-id') ?? '', /\S/);
    }
    const ready = await fetch(t.url + '/readyz');
    assert.equal(ready.status, 200);
    const body = await ready.json();
    assert.equal(body.status, 'ready');
    assert.equal(body.checks.database, 'ok');
    assert.equal(body.checks.migrations, 'ok');
    // Background loops ran (role all): the operations service marked them running.
    assert.equal(body.checks.loops, 'running');
  });

  it('counts API requests by method and status, with bounded method labels, and accepted messages', async () => {
    const t = await startTestApp();
    cleanup.push(() => t.close());
    const seed = await t.seed();
    const before = await scrape(t.url);
    assert.equal(sampleValue(before, 'posthorn_api_requests_total', { method: 'send_message' }), 0);
    for (let i = 0; i < 3; i++) {
      const r = await t.call('send_message', { api_key: seed.projectKey, arguments: simpleMessage([`a${i}@example.test`, `b${i}@gmail.com`]) });
      assert.equal(r.status, 200, JSON.stringify(r.body));
    }
    const bad = await t.call('send_message', { api_key: 'wrong-key', arguments: simpleMessage('x@example.test') });
    assert.equal(bad.status, 401);
    // A made-up method name is counted as "other", never as a label of its own.
    await t.call('no_such_method_abc', { api_key: seed.projectKey });

    const after = await scrapeUntil(t.url, 'the queue gauges to show 6 queued', (s) => sampleValue(s, 'posthorn_transmissions', { state: 'queued' }) === 6);
    assert.equal(sampleValue(after, 'posthorn_api_requests_total', { method: 'send_message', status: '200' }), 3);
    assert.equal(sampleValue(after, 'posthorn_api_requests_total', { method: 'send_message', status: '401' }), 1);
    assert.equal(sampleValue(after, 'posthorn_api_requests_total', { method: 'other' }), 1);
    assert.ok(!after.some((s) => Object.values(s.labels).includes('no_such_method_abc')));
    assert.equal(sampleValue(after, 'posthorn_api_request_duration_seconds_count', { method: 'send_message' }), 4);
    assert.equal(sampleValue(after, 'posthorn_transmissions_due'), 6);
    assert.equal(sampleValue(after, 'posthorn_messages_accepted_total'), 3);
    assert.equal(sampleValue(after, 'posthorn_recipients_accepted_total'), 6);
    assert.ok(sampleValue(after, 'posthorn_transmissions_oldest_due_age_seconds') >= 0);
    assert.equal(sampleValue(after, 'posthorn_database_up'), 1);
    // Store writes are timed; default process metrics (event-loop lag among them) are present.
    assert.ok(sampleValue(after, 'posthorn_db_write_duration_seconds_count') >= 3);
    assert.ok(after.some((s) => s.name === 'nodejs_eventloop_lag_seconds'));
    // Its label is not "quantile", a name Prometheus keeps for summaries (promtool check metrics).
    const loopDelay = after.filter((s) => s.name === 'posthorn_event_loop_delay_seconds');
    assert.deepEqual(loopDelay.map((s) => s.labels.stat).sort(), ['max', 'p50', 'p99']);
    assert.ok(loopDelay.every((s) => !('quantile' in s.labels)));
    // No label anywhere carries an address.
    assert.ok(!after.some((s) => Object.values(s.labels).some((v) => v.includes('@'))));
  });

  it('times message acceptance as a store write on an API process (the acceptance thread, the PostgreSQL statement); reports the pool on PostgreSQL', async () => {
    // role api: on a SQLite file acceptance is the thread's, on PostgreSQL one statement per turn;
    // neither is a unit of store.write (storage/messages.ts).
    const t = await startTestApp({ config: { role: 'api' } });
    cleanup.push(() => t.close());
    const seed = await t.seed();
    const before = await scrape(t.url);
    for (let i = 0; i < 3; i++) {
      const r = await t.call('send_message', { api_key: seed.projectKey, arguments: simpleMessage(`w${i}@example.test`) });
      assert.equal(r.status, 200, JSON.stringify(r.body));
    }
    const after = await scrape(t.url);
    const writes = (s: typeof after) => sampleValue(s, 'posthorn_db_write_duration_seconds_count');
    assert.ok(writes(after) - writes(before) >= 3, `acceptances timed: ${writes(before)} -> ${writes(after)}`);
    assert.equal(sampleValue(after, 'posthorn_db_write_errors_total'), 0);
    const pool = after.filter((s) => s.name === 'posthorn_db_pool_connections');
    if (t.app.services.store.kind === 'postgres') {
      assert.deepEqual(pool.map((s) => s.labels.state).sort(), ['idle', 'total', 'waiting']);
      assert.ok(sampleValue(after, 'posthorn_db_pool_connections', { state: 'total' }) >= 1);
      assert.equal(sampleValue(after, 'posthorn_db_pool_connections', { state: 'waiting' }), 0);
    } else {
      assert.deepEqual(pool, [], 'no pool on SQLite');
    }
  });

  it('logs one access line per request with its request id when --access-log is set, and never the key', async () => {
    const { log, lines } = captureLog();
    const t = await startTestApp({ log, config: { accessLog: true } });
    cleanup.push(() => t.close());
    const seed = await t.seed();
    const r = await t.call('get_account_info', { api_key: seed.accountKey });
    assert.equal(r.status, 200);
    const reqId = r.headers.get('x-request-id');
    const access = lines.filter((l) => l.event === 'http_request');
    const mine = access.find((l) => l.reqId === reqId);
    assert.ok(mine, `an access line with reqId ${reqId}: ${JSON.stringify(access)}`);
    assert.equal(mine.status, 200);
    assert.equal(mine.api_method, 'get_account_info');
    assert.equal(mine.path, '/v.1.1/get_account_info');
    assert.ok(!JSON.stringify(lines).includes(seed.accountKey), 'the API key never reaches the log');
  });

  it('records delivery attempts: outcome, code class, destination group, latency, one log line each', async () => {
    const { log, lines } = captureLog();
    const t = await startTestApp({ log });
    cleanup.push(() => t.close());
    const services = t.app.services;
    const now = services.clock.now();
    recordDeliveryAttempt(services, { transmissionId: 1, messageId: 7, recipient: 'Someone@Gmail.com', outcome: 'sent', resultCode: 'SMTP_250', mxHost: 'gmail-smtp-in.l.google.com', durationMs: 120, dueAt: now - 2000, tls: true });
    recordDeliveryAttempt(services, { transmissionId: 2, recipient: 'x@corp.example', outcome: 'deferred', resultCode: 'SMTP_451', resultMessage: 'try later', mxHost: 'mx.corp.example', durationMs: 30, tls: false });
    recordDeliveryAttempt(services, { transmissionId: 3, recipient: 'y@outlook.com', outcome: 'failed', resultCode: 'SUPPRESSED', durationMs: 1 });
    recordOutboundAttempt(services, { requestId: 9, kind: 'webhook', outcome: 'retry', statusCode: 503, durationMs: 12, url: 'https://hooks.example/path?token=secret-token' });
    const s = await scrape(t.url);
    assert.equal(sampleValue(s, 'posthorn_delivery_attempts_total', { outcome: 'sent', code_class: '2xx', domain_group: 'gmail' }), 1);
    assert.equal(sampleValue(s, 'posthorn_delivery_attempts_total', { outcome: 'deferred', code_class: '4xx', domain_group: 'other' }), 1);
    assert.equal(sampleValue(s, 'posthorn_delivery_attempts_total', { outcome: 'failed', code_class: 'none', domain_group: 'microsoft' }), 1);
    assert.equal(sampleValue(s, 'posthorn_delivery_latency_seconds_count'), 1);
    assert.equal(sampleValue(s, 'posthorn_delivery_latency_seconds_bucket', { le: '1' }), 0);
    assert.equal(sampleValue(s, 'posthorn_delivery_latency_seconds_bucket', { le: '5' }), 1);
    assert.equal(sampleValue(s, 'posthorn_smtp_sessions_total', { tls: 'true' }), 1);
    assert.equal(sampleValue(s, 'posthorn_smtp_sessions_total', { tls: 'false' }), 1);
    assert.equal(sampleValue(s, 'posthorn_outbound_attempts_total', { kind: 'webhook', outcome: 'retry', status_class: '5xx' }), 1);
    const attempts = lines.filter((l) => l.event === 'delivery_attempt');
    assert.equal(attempts.length, 3);
    assert.equal(attempts[0].domain, 'gmail.com');
    assert.equal(attempts[0].code, 'SMTP_250');
    assert.equal(attempts[0].recipient, undefined, 'addresses are not logged by default');
    assert.ok(!JSON.stringify(lines).includes('Someone@'), 'no address anywhere');
    const outbound = lines.find((l) => l.event === 'outbound_attempt');
    assert.equal(outbound?.host, 'hooks.example');
    assert.ok(!JSON.stringify(lines).includes('secret-token'), 'URLs are logged by host only');
  });

  it('names full addresses in delivery lines only with --log-addresses', async () => {
    const { log, lines } = captureLog();
    const t = await startTestApp({ log, config: { logAddresses: true } });
    cleanup.push(() => t.close());
    recordDeliveryAttempt(t.app.services, { transmissionId: 1, recipient: 'who@example.test', outcome: 'sent', resultCode: 'SMTP_250', durationMs: 5 });
    assert.equal(lines.find((l) => l.event === 'delivery_attempt')?.recipient, 'who@example.test');
  });

  it('a worker-only process serves the operations endpoints on its own listener', async () => {
    const t = await startTestApp({ config: { role: 'worker', opsPort: 0, opsHost: '127.0.0.1' } });
    cleanup.push(() => t.close());
    assert.equal(t.app.url, null, 'no API listener');
    const ops = t.app.background.find((b) => b.name === 'operations') as OperationsService | undefined;
    assert.ok(ops?.url, 'the operations listener runs');
    assert.equal((await fetch(ops.url + '/healthz')).status, 200);
    const ready = await fetch(ops.url + '/readyz');
    assert.equal(ready.status, 200, await ready.clone().text());
    assert.equal((await ready.json()).checks.loops, 'running');
    const samples = await scrape(ops.url);
    assert.ok(samples.some((s) => s.name === 'posthorn_transmissions_due'));
    // Not the API: the operations listener answers nothing else.
    assert.equal((await fetch(ops.url + '/v.1.1/get_account_info', { method: 'POST', body: '{}' })).status, 404);
    await t.close();
    cleanup.pop();
    await assert.rejects(fetch(ops.url + '/healthz'), 'the listener closes with the process');
  });

  it('groups destinations by MX or domain suffix and SMTP codes by class', () => {
    assert.equal(domainGroup('googlemail.com'), 'gmail');
    assert.equal(domainGroup('company.example', 'aspmx.l.google.com'), 'gmail');
    assert.equal(domainGroup('hotmail.co.uk'), 'microsoft');
    assert.equal(domainGroup('corp.example', 'corp-example.mail.protection.outlook.com'), 'microsoft');
    assert.equal(domainGroup('ymail.com'), 'yahoo');
    assert.equal(domainGroup('icloud.com'), 'apple');
    assert.equal(domainGroup('notgmail.com'), 'other');
    assert.equal(domainGroup(''), 'other');
    assert.equal(smtpCodeClass('SMTP_250'), '2xx');
    assert.equal(smtpCodeClass('SMTP_550'), '5xx');
    assert.equal(smtpCodeClass('TIMEOUT'), 'none');
    assert.equal(smtpCodeClass(null), 'none');
  });

  it('numbers outbound attempts from 1 in their log lines', async () => {
    const { log, lines } = captureLog();
    const sink = await startHttpSink();
    cleanup.push(() => sink.close());
    const t = await startTestApp({ log, config: { allowPrivateWebhooks: true } });
    cleanup.push(() => t.close());
    const seed = await t.seed();
    await t.call('create_webhook', { api_key: seed.accountKey, arguments: { url: sink.url + '/hook', events: ['delivered'] } });
    sink.answer(() => 500);
    const services = t.app.services;
    await services.store.write((trx) => recordEvent(trx, { accountId: seed.accountId, projectId: seed.projectId, type: 'delivered', payload: {}, now: services.clock.now() }));
    await (t.app.background.find((s) => s.name === 'webhooks') as OutboundDispatcher).drain();
    const attempts = lines.filter((l) => l.event === 'outbound_attempt');
    assert.equal(attempts.length, 1, JSON.stringify(attempts));
    assert.equal(attempts[0].attempt, 1);
    assert.equal(attempts[0].outcome, 'retry');
  });
});

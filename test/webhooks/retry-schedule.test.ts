// --webhook-retry-schedule (docs/webhooks.md, "Retries"): a schedule shortened to milliseconds runs
// on the real clock, through the running dispatcher: the receiver is tried once, then once per
// delay, each no sooner than its delay after the last, and the request is failed after the last.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { recordEvent } from '../../src/storage/events.ts';
import { nextOutboundAttemptAt, parseWebhookRetrySchedule } from '../../src/webhooks/retry-schedule.ts';
import { startTestApp, type Seed, type TestApp } from '../helpers/app.ts';
import { startHttpSink, type HttpSink } from '../helpers/http-sink.ts';

describe('webhook retry schedule', () => {
  let t: TestApp;
  let seed: Seed;
  let sink: HttpSink;
  before(async () => {
    sink = await startHttpSink();
    t = await startTestApp({ config: { allowPrivateWebhooks: true, webhookRetrySchedule: '300ms,600ms', pollMs: 50 } });
    seed = await t.seed();
  });
  after(async () => {
    await t?.close();
    await sink?.close();
  });

  it('parses like --retry-schedule and gives up after the last delay', () => {
    const delays = parseWebhookRetrySchedule('5s,5m,30m,2h,5h,10h,10h');
    assert.deepEqual(delays, [5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000]);
    assert.ok(delays.reduce((a, b) => a + b) >= 24 * 3600_000, 'the default covers at least a day');
    assert.equal(nextOutboundAttemptAt(delays, 1, 1000), 6000);
    assert.equal(nextOutboundAttemptAt(delays, 7, 0), 36_000_000);
    assert.equal(nextOutboundAttemptAt(delays, 8, 0), null);
    assert.throws(() => parseWebhookRetrySchedule('soon'), /--webhook-retry-schedule/);
  });

  it('a shortened schedule: three tries spaced by the delays, then failed', async () => {
    const created = await t.call('create_webhook', { api_key: seed.accountKey, arguments: { url: sink.url + '/short', events: ['delivered'] } });
    assert.equal(created.status, 200);
    const at: number[] = [];
    sink.answer(() => {
      at.push(Date.now());
      return { status: 503, body: 'down' };
    });
    const now = Date.now();
    await t.app.services.store.write((trx) => recordEvent(trx, { accountId: seed.accountId, projectId: seed.projectId, type: 'delivered', payload: { n: 1 }, now }));
    t.app.services.store.wake('events');
    const deadline = Date.now() + 20_000;
    let failed: { attempts: number; attempt_log: Array<{ started_at: string }> } | undefined;
    while (!failed) {
      const list = await t.call('list_webhook_deliveries', { api_key: seed.accountKey, arguments: { webhook_uid: created.body.data.webhook.uid, status: 'failed' } });
      failed = list.body.data.deliveries[0];
      if (!failed) {
        assert.ok(Date.now() < deadline, 'the request failed after the shortened schedule');
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    assert.equal(failed.attempts, 3);
    assert.equal(sink.requests.length, 3);
    assert.ok(at[1] - at[0] >= 250, `first gap ${at[1] - at[0]} ms`);
    assert.ok(at[2] - at[1] >= 550, `second gap ${at[2] - at[1]} ms`);
  });
});

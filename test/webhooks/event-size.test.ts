// What a message's events cost is bounded by the message, not by its recipients times its
// variables (docs/webhooks.md, "How it works"): an event row and its webhook request store no copy
// of the variables; the message row holds the global ones once, each transmission its own, and the
// dispatcher adds them, merged, to every request it posts. Copies completed at acceptance
// (null.postageapp.com) write their `delivered` events in the acceptance transaction, so there a
// copy per event would be written while every other write waits.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { recordEvent } from '../../src/storage/events.ts';
import { startTestApp, type Seed, type TestApp } from '../helpers/app.ts';
import { startHttpSink, verifyWebhookSignature, type HttpSink } from '../helpers/http-sink.ts';
import { until } from '../helpers/wait.ts';

const RECIPIENTS = 200;
/** 50 variables of 1,000 characters: about 50 KB of global variables. */
const GLOBALS: Record<string, string> = Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`v${i}`, String(i % 10).repeat(1000)]));
/** What each event and request may store at most (a body without variables is well under 1 KB). */
const BYTES_PER_ROW = 2048;

describe('the size of events and webhook requests', () => {
  let sink: HttpSink;
  let t: TestApp;
  let seed: Seed;
  let secret: string;

  before(async () => {
    sink = await startHttpSink();
    t = await startTestApp({ config: { allowPrivateWebhooks: true, pollMs: 50 } });
    seed = await t.seed();
    const hook = await t.call('create_webhook', { api_key: seed.accountKey, arguments: { url: sink.url + '/events', events: ['delivered'] } });
    assert.equal(hook.status, 200, JSON.stringify(hook.body));
    secret = hook.body.data.webhook.secret;
  });
  after(async () => {
    await t?.close();
    await sink?.close();
  });

  it('stores no copy of the variables per recipient, and posts each recipient its merged variables', async () => {
    // Every tenth recipient has variables of its own, one of them over a global one.
    const recipients: Record<string, Record<string, string>> = {};
    for (let i = 0; i < RECIPIENTS; i++) recipients[`u${i}@null.postageapp.com`] = i % 10 === 0 ? { v0: `own ${i}`, name: `R${i}` } : {};
    const sent = await t.call('send_message', {
      api_key: seed.projectKey,
      arguments: { recipients, headers: { from: 'shop@acme.test', subject: 'Hi' }, content: { 'text/plain': 'Hi {{name}}' }, variables: GLOBALS },
    });
    assert.equal(sent.status, 200, JSON.stringify(sent.body).slice(0, 500));
    const messageId = sent.body.data.message.id as number;
    const db = t.app.services.store.db;

    const events = await db.selectFrom('events').select(['payload']).where('message_id', '=', messageId).execute();
    assert.equal(events.length, RECIPIENTS, 'one delivered event per copy completed at acceptance');
    const eventBytes = events.reduce((sum, e) => sum + e.payload.length, 0);
    assert.ok(eventBytes < RECIPIENTS * BYTES_PER_ROW, `events of the message store ${eventBytes} bytes`);

    await sink.waitFor(RECIPIENTS, 60_000);
    const requests = await db.selectFrom('outbound_requests').select(['body']).where('account_id', '=', seed.accountId).execute();
    assert.equal(requests.length, RECIPIENTS);
    const requestBytes = requests.reduce((sum, r) => sum + r.body.length, 0);
    assert.ok(requestBytes < RECIPIENTS * BYTES_PER_ROW, `webhook requests store ${requestBytes} bytes`);

    const byRecipient = new Map<string, Record<string, unknown>>();
    for (const request of sink.requests) {
      assert.ok(verifyWebhookSignature(secret, request, 300), 'signed over the body as posted');
      const body = JSON.parse(request.body) as Record<string, unknown>;
      assert.equal(body.event, 'delivered');
      assert.equal(body.message_id, messageId);
      byRecipient.set(body.recipient as string, body);
    }
    assert.equal(byRecipient.size, RECIPIENTS);
    for (const [address, own] of Object.entries(recipients)) {
      const body = byRecipient.get(address);
      assert.ok(body, `a webhook for ${address}`);
      assert.deepEqual(body.variables, { ...GLOBALS, ...own }, `the variables of ${address}: global ones with its own over them`);
      assert.equal(Object.keys(body).at(-1), 'variables', 'where docs/webhooks.md shows them');
    }
  });

  it('posts an event recorded with its variables (as rows were written before) with those variables', async () => {
    sink.requests.length = 0;
    const now = t.app.services.clock.now();
    const payload = { project_uid: seed.projectUid, occurred_at: '2026-03-14T09:31:07Z', transmission_id: 999_999, message_id: 999_998, message_uid: 'old', unique_id: 'old@posthorn.test', recipient: 'old@example.com', variables: { name: 'Old', n: 1 }, status: 'completed' };
    await t.app.services.store.write((trx) => recordEvent(trx, { accountId: seed.accountId, projectId: seed.projectId, type: 'delivered', payload, now }));
    t.app.services.store.wake('events');
    const [request] = await sink.waitFor(1, 15_000);
    const body = JSON.parse(request.body) as Record<string, unknown>;
    assert.equal(body.recipient, 'old@example.com');
    assert.deepEqual(body.variables, { name: 'Old', n: 1 });
    const stored = await until('the request row', () =>
      t.app.services.store.db.selectFrom('outbound_requests').select(['variables_of', 'body']).where('body', 'like', '%old@example.com%').executeTakeFirst(),
    );
    assert.equal(stored.variables_of, null, 'posted as stored');
  });
});

// The whole path with the real delivery engine: send_message -> SMTP to a scripted server on
// 127.0.0.1 (250 for one recipient, 550 for the other) -> delivered/failed events -> signed
// webhooks to a real HTTP receiver; the delivered HTML carries signed tracking links whose click
// redirects and comes back as a clicked webhook.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startTestApp, type Seed, type TestApp } from '../helpers/app.ts';
import { startHttpSink, verifyWebhookSignature, type HttpSink } from '../helpers/http-sink.ts';
import { reply, startSmtpPeer, type SmtpPeer } from '../helpers/smtp-peers.ts';

describe('webhooks from real deliveries', () => {
  let smtp: SmtpPeer;
  let sink: HttpSink;
  let t: TestApp;
  let seed: Seed;
  let secret: string;

  before(async () => {
    smtp = await startSmtpPeer({ rcpt: (to) => (to.startsWith('bob@') ? reply(550, '5.1.1 <bob@mail.test>: Recipient address rejected: User unknown') : null) });
    sink = await startHttpSink();
    t = await startTestApp({ config: { allowPrivateWebhooks: true, transportMap: [smtp.transportFor('mail.test')], pollMs: 50, workers: 4 } });
    seed = await t.seed();
    const hook = await t.call('create_webhook', { api_key: seed.accountKey, arguments: { url: sink.url + '/events', project_uid: seed.projectUid } });
    assert.equal(hook.status, 200, JSON.stringify(hook.body));
    secret = hook.body.data.webhook.secret;
    const settings = await t.call('update_project', { api_key: seed.accountKey, arguments: { uid: seed.projectUid, settings: { tracking: true } } });
    assert.equal(settings.status, 200, JSON.stringify(settings.body));
  });
  after(async () => {
    await t.close();
    await sink.close();
    await smtp.close();
  });

  function bodies() {
    return sink.requests.map((r) => {
      assert.ok(verifyWebhookSignature(secret, r, 300), 'signed with the endpoint secret');
      return JSON.parse(r.body);
    });
  }

  it('posts delivered and bounced with the SMTP reply and the message variables, then clicked', async () => {
    const sent = await t.call('send_message', {
      api_key: seed.projectKey,
      uid: 'order-7781',
      arguments: {
        recipients: { 'ann@mail.test': { name: 'Ann' }, 'bob@mail.test': { name: 'Bob' } },
        headers: { from: 'shop@acme.test', subject: 'Your order' },
        content: { 'text/html': '<html><body><p>Hi {{name}}, <a href="https://acme.test/orders/7781?x=1&amp;y=2">see your order</a></p></body></html>', 'text/plain': 'Hi {{name}}' },
        variables: { order: '7781' },
      },
    });
    assert.equal(sent.status, 200, JSON.stringify(sent.body));
    const deadline = Date.now() + 20_000;
    while (bodies().filter((b) => b.event === 'delivered' || b.event === 'bounced').length < 2) {
      assert.ok(Date.now() < deadline, `webhooks so far: ${JSON.stringify(bodies())}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    const delivered = bodies().find((b) => b.event === 'delivered');
    // A 5xx naming the recipient unknown is a hard bounce: the event is `bounced`.
    const failed = bodies().find((b) => b.event === 'bounced');
    assert.equal(failed.status, 'failed');
    assert.equal(delivered.recipient, 'ann@mail.test');
    assert.equal(delivered.message_uid, 'order-7781');
    assert.equal(delivered.project_uid, seed.projectUid);
    assert.equal(delivered.result_code, 'SMTP_250');
    assert.equal(delivered.variables.name, 'Ann');
    assert.equal(delivered.variables.order, '7781');
    assert.equal(typeof delivered.message_id, 'number');
    assert.match(delivered.event_id, /^evt_\d+$/);
    assert.equal(failed.recipient, 'bob@mail.test');
    assert.equal(failed.result_code, 'SMTP_550');
    assert.match(failed.result_message, /User unknown/);
    assert.equal(failed.variables.name, 'Bob');

    // The delivered HTML: links rewritten to signed tracking links, with a pixel.
    assert.equal(smtp.received.length, 1);
    const raw = smtp.received[0].raw.toString('utf8').replace(/=\r\n/g, '').replace(/=3D/g, '=');
    const link = /href="(http[^"]*\/t\/c\/[^"]+)"/.exec(raw);
    assert.ok(link, 'a tracking link in the delivered HTML');
    assert.ok(!raw.includes('acme.test/orders'), 'the original URL only inside the signed token');
    assert.match(raw, /\/t\/o\/[\w-]+\.[\w-]+\.gif/);
    const path = new URL(link[1]).pathname;
    const click = await fetch(t.url + path, { redirect: 'manual' });
    assert.equal(click.status, 302);
    assert.equal(click.headers.get('location'), 'https://acme.test/orders/7781?x=1&y=2');

    while (!bodies().some((b) => b.event === 'clicked')) {
      assert.ok(Date.now() < deadline, 'clicked webhook');
      await new Promise((r) => setTimeout(r, 50));
    }
    const clicked = bodies().find((b) => b.event === 'clicked');
    assert.equal(clicked.recipient, 'ann@mail.test');
    assert.equal(clicked.url, 'https://acme.test/orders/7781?x=1&y=2');
    const tx = await t.call('get_message_transmissions', { api_key: seed.projectKey, arguments: { uid: 'order-7781' } });
    assert.equal(tx.status, 200, JSON.stringify(tx.body));
    const mine = (Object.values(tx.body.data) as any[]).flat().find((x) => JSON.stringify(x).includes('ann@mail.test')) ?? tx.body.data;
    assert.match(JSON.stringify(mine), /"clicked_at":"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d"/, JSON.stringify(tx.body.data));
    // The metrics see the open (a click counts as one) and the click.
    const metrics = await t.call('get_metrics', { api_key: seed.projectKey });
    assert.equal(metrics.status, 200, JSON.stringify(metrics.body));
    assert.equal(metrics.body.data.metrics.hour.opened.current_value, 1);
    assert.equal(metrics.body.data.metrics.hour.clicked.current_value, 1);
  });
});

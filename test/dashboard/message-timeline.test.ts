// One message's page with real delivery and real webhooks on both databases: a local SMTP server
// accepts one recipient and refuses the other (550), a local HTTP receiver takes the webhooks.
// The page shows, per recipient, the attempt the server answered (MX host, code and text,
// duration, whether the session used TLS) and the final state, and lists the webhook deliveries the message caused; a message of
// the same project sent at the same time does not borrow them.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { recordEvent } from '../../src/storage/events.ts';
import { startTestApp, type Seed, type TestApp } from '../helpers/app.ts';
import { startHttpSink, type HttpSink } from '../helpers/http-sink.ts';
import { reply, startSmtpPeer, type SmtpPeer } from '../helpers/smtp-peers.ts';
import { signedInClient, type SessionClient } from './session-client.ts';

describe('one message: timeline and webhook deliveries', () => {
  let t: TestApp;
  let peer: SmtpPeer;
  /** offers STARTTLS: its attempt records TLS (migration 150) */
  let securePeer: SmtpPeer;
  let sink: HttpSink;
  let seed: Seed;
  let client: SessionClient;

  before(async () => {
    peer = await startSmtpPeer({ starttls: false, rcpt: (to) => (to.startsWith('gone@') ? reply(550, '5.1.1 <gone@customer.example>: user unknown') : null) });
    securePeer = await startSmtpPeer({ starttls: true });
    sink = await startHttpSink();
    t = await startTestApp({ config: { workers: 2, transportMap: [securePeer.transportFor('secure.example'), peer.transportFor('*')], allowPrivateWebhooks: true, webhookTimeoutMs: 2000 } });
    seed = await t.seed('timeline');
    ({ client } = await signedInClient(t, seed.accountUid));
    const hook = await t.call('create_webhook', { api_key: seed.accountKey, arguments: { url: `${sink.url}/hooks`, events: ['delivered', 'failed', 'bounced'] } });
    assert.equal(hook.status, 200, JSON.stringify(hook.body));
  });
  after(async () => {
    await t?.close();
    await peer?.close();
    await securePeer?.close();
    await sink?.close();
  });

  it('shows each recipient\'s attempt and the webhooks the message caused, and no other message\'s', async () => {
    const send = (uid: string, recipients: string[]) =>
      t.call('send_message', { api_key: seed.projectKey, uid, arguments: { recipients, headers: { subject: uid, from: 'a@acme.example' }, content: { 'text/plain': 'x' } } });
    const mine = await send('timeline-1', ['ok@customer.example', 'gone@customer.example', 'tls@secure.example']);
    const theirs = await send('timeline-2', ['other@customer.example']);
    assert.equal(mine.status, 200);
    assert.equal(theirs.status, 200);
    await peer.waitForReceived(2, 20_000);
    await securePeer.waitForReceived(1, 20_000);
    await sink.waitFor(4, 20_000);

    const page = await client.get(`/messages/${mine.body.data.message.id}`);
    assert.equal(page.status, 200);
    const sections = page.text.split('<section class="card recipient"').slice(1);
    assert.equal(sections.length, 3);
    const ok = sections.find((s) => s.includes('ok@customer.example'))!;
    const gone = sections.find((s) => s.includes('gone@customer.example'))!;
    assert.match(ok, /<li class="attempt sent">[\s\S]*?<dd><bdi>127\.0\.0\.1<\/bdi><\/dd>[\s\S]*?<code><bdi>SMTP_250<\/bdi><\/code>[\s\S]*?\d+ ms/);
    assert.match(ok, /<strong><bdi>completed<\/bdi><\/strong>/);
    // The plain peer offers no STARTTLS; the other one does and the session is encrypted.
    assert.match(ok, /<dt>TLS<\/dt><dd><bdi>no<\/bdi><\/dd>/);
    assert.match(gone, /<dt>TLS<\/dt><dd><bdi>no<\/bdi><\/dd>/);
    const secure = sections.find((s) => s.includes('tls@secure.example'))!;
    assert.match(secure, /<li class="attempt sent">[\s\S]*?<dt>TLS<\/dt><dd><bdi>yes<\/bdi><\/dd>/);
    assert.match(gone, /<li class="attempt failed">[\s\S]*?<code><bdi>SMTP_550<\/bdi><\/code> <bdi>[^<]*user unknown/);
    assert.match(gone, /<span class="badge failed"><bdi>failed<\/bdi><\/span>/);

    const deliveries = page.text.slice(page.text.indexOf('Webhook deliveries</h2>'));
    const rows = deliveries.split('<tr>').slice(2);
    assert.ok(rows.length >= 2, deliveries);
    assert.ok(rows.every((r) => /ok@customer\.example|gone@customer\.example|tls@secure\.example/.test(r)), deliveries);
    assert.ok(rows.some((r) => r.includes('<td><bdi>delivered</bdi></td><td><bdi>ok@customer.example</bdi></td>')));
    // A 550 to RCPT is a hard bounce: its event is `bounced` (docs/webhooks.md).
    assert.ok(rows.some((r) => /<td><bdi>(failed|bounced)<\/bdi><\/td><td><bdi>gone@customer\.example<\/bdi><\/td>/.test(r)), deliveries);
    assert.ok(!deliveries.includes('other@customer.example'));
  });

  it('lists the webhook delivery of an event written hours after the attempt (a late bounce mail)', async () => {
    const before = sink.requests.length;
    const sent = await t.call('send_message', { api_key: seed.projectKey, uid: 'timeline-late', arguments: { recipients: ['late@customer.example'], headers: { subject: 'late', from: 'a@acme.example' }, content: { 'text/plain': 'x' } } });
    assert.equal(sent.status, 200);
    const id = sent.body.data.message.id;
    // Its delivered event reaches the webhook first.
    await sink.waitFor(before + 1, 20_000);
    // The bounce mail's event, six hours on (docs/domains-and-bounces.md: a DSN comes when it comes).
    const sixHoursOn = Date.now() + 6 * 3600_000;
    await t.app.services.store.write((trx) =>
      recordEvent(trx, { accountId: seed.accountId, projectId: seed.projectId, type: 'bounced', payload: { event: 'bounced', message_id: id, message_uid: 'timeline-late', recipient: 'late@customer.example' }, now: sixHoursOn }),
    );
    t.app.services.store.wake('events');
    await sink.waitFor(before + 2, 20_000);
    const page = await client.get(`/messages/${id}`);
    assert.equal(page.status, 200);
    const deliveries = page.text.slice(page.text.indexOf('Webhook deliveries</h2>'));
    assert.ok(deliveries.includes('<td><bdi>bounced</bdi></td><td><bdi>late@customer.example</bdi></td>'), deliveries);
  });
});

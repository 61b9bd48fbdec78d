// One message as the dashboard, `posthorn message show` and the read API show it, on both
// databases (docs/dashboard.md, "One message"; docs/cli.md, "Messages"; docs/api/reports.md):
// - a send scheduled with send_at says when it is due (the message list, the message page, the
//   CLI, get_message_transmissions, get_messages), and the page cancels it (a POST with the session's CSRF token,
//   the operation of cancel_message);
// - a send with recipient_override says where each copy really went (a local SMTP server sees the
//   override in RCPT TO);
// - a 1000-recipient message is shown 100 copies a page by keyset, every copy reachable (recipient
//   201 too: its timeline, its MIME source, its content), filtered by address or its beginning, and
//   its 1000 webhook deliveries 50 a page, filtered by the same recipient filter.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startTestApp, type Seed, type TestApp } from '../helpers/app.ts';
import { startHttpSink, type HttpSink } from '../helpers/http-sink.ts';
import { startSmtpPeer, type SmtpPeer } from '../helpers/smtp-peers.ts';
import { signedInClient, type SessionClient } from './session-client.ts';

const BIN = path.resolve('bin/posthorn.js');
const HOUR = 3_600_000;
const RECIPIENTS = 1000;
const address = (n: number) => `r${String(n).padStart(4, '0')}@null.postageapp.com`;

/** Every href of the page whose link text is `text`, entities decoded. */
function linkTo(page: string, text: string): string | null {
  const m = new RegExp(`<a href="([^"]+)"[^>]*>${text}</a>`).exec(page);
  return m ? m[1].replace(/&amp;/g, '&') : null;
}

function recipientCards(page: string): string[] {
  return [...page.matchAll(/<section class="card recipient" aria-label="Recipient ([^"]+)">/g)].map((m) => m[1]);
}

function deliveryRows(page: string): string[] {
  const table = page.slice(page.indexOf('<h2 id="webhook-deliveries">'));
  return table.split('<tr>').slice(2).map((r) => r.slice(0, r.indexOf('</tr>')));
}

describe('one message: schedule, cancel, recipient override, pages of recipients and webhook deliveries', () => {
  let t: TestApp;
  let peer: SmtpPeer;
  let sink: HttpSink;
  let seed: Seed;
  let client: SessionClient;
  let scheduled: { id: number; uid: string; sendAt: number };
  let overridden: { id: number; uid: string };
  let big: { id: number; uid: string };

  function cli(...args: string[]) {
    const config = t.app.services.config;
    const env: NodeJS.ProcessEnv = { ...process.env, POSTHORN_DATA: t.dataDir, LOG_LEVEL: 'warn', POSTHORN_SECRET_KEY: 'test-secret-key', POSTHORN_DNS_SERVERS: '127.0.0.1:9' };
    if (config.databaseUrl) env.DATABASE_URL = config.databaseUrl;
    else delete env.DATABASE_URL;
    const r = spawnSync(process.execPath, [BIN, ...args, '--account', seed.accountUid, '--project', seed.projectUid], { env, encoding: 'utf8', timeout: 120_000 });
    assert.equal(r.status, 0, `posthorn ${args.join(' ')}: ${r.stderr}`);
    return r.stdout;
  }

  before(async () => {
    peer = await startSmtpPeer({ starttls: false });
    sink = await startHttpSink();
    t = await startTestApp({ config: { workers: 1, transportMap: [peer.transportFor('*')], allowPrivateWebhooks: true } });
    seed = await t.seed('views');
    ({ client } = await signedInClient(t, seed.accountUid));
    const hook = await t.call('create_webhook', { api_key: seed.accountKey, arguments: { url: `${sink.url}/hooks`, events: ['delivered'] } });
    assert.equal(hook.status, 200, JSON.stringify(hook.body));
    const send = async (uid: string, args: Record<string, unknown>) => {
      const r = await t.call('send_message', { api_key: seed.projectKey, uid, arguments: { headers: { subject: uid, from: 'a@acme.example' }, content: { 'text/plain': 'Hello {{n}}' }, ...args } });
      assert.equal(r.status, 200, JSON.stringify(r.body));
      return { id: Number(r.body.data.message.id), uid };
    };
    const sendAt = Math.ceil((Date.now() + 2 * HOUR) / 1000) * 1000;
    scheduled = { ...(await send('later-1', { recipients: ['later@customer.example'], send_at: new Date(sendAt).toISOString() })), sendAt };
    overridden = await send('override-1', { recipients: ['r1@example.test', 'r2@example.test'], recipient_override: 'override@customer.example' });
    const recipients: Record<string, { n: number }> = {};
    for (let n = 1; n <= RECIPIENTS; n++) recipients[address(n)] = { n };
    big = await send('big-1', { recipients });
    await peer.waitForReceived(2, 20_000);
    // Every copy at null.postageapp.com completes at acceptance with a delivered event: one webhook request each.
    await sink.waitFor(RECIPIENTS + 2, 60_000);
  });
  after(async () => {
    await t?.close();
    await peer?.close();
    await sink?.close();
  });

  it('shows when a scheduled message is due: the list, its page, the CLI, get_message_transmissions and get_messages', async () => {
    const due = new Date(scheduled.sendAt).toISOString().replace('T', ' ').replace(/\.\d{3}Z$/, ' UTC');
    const list = await client.get(`/messages?project=${seed.projectUid}&uid=${scheduled.uid}`);
    assert.match(list.text, new RegExp(`scheduled for <time datetime="${new Date(scheduled.sendAt).toISOString()}"><bdi>${due}</bdi></time>`));
    const others = await client.get(`/messages?project=${seed.projectUid}&uid=${overridden.uid}`);
    assert.doesNotMatch(others.text, /scheduled for/, 'a message due at acceptance is not scheduled');

    const page = await client.get(`/messages/${scheduled.id}`);
    assert.match(page.text, new RegExp(`<dt>Scheduled for</dt><dd class="scheduled"><time [^>]+><bdi>${due}</bdi></time>`));
    assert.match(page.text, new RegExp(`<li class="due"><time [^>]+><bdi>${due}</bdi></time> <strong>due</strong>`));

    const shown = JSON.parse(cli('message', 'show', scheduled.uid, '--json'));
    assert.equal(shown.send_at, new Date(scheduled.sendAt).toISOString());
    assert.deepEqual(shown.recipients[0].timeline.map((e: { kind: string }) => e.kind), ['accepted', 'due']);
    assert.equal(shown.recipients[0].timeline[1].at, new Date(scheduled.sendAt).toISOString());
    assert.match(cli('message', 'show', scheduled.uid), new RegExp(`^scheduled for: ${new Date(scheduled.sendAt).toISOString()} \\(send_at\\)$`, 'm'));
    const found = JSON.parse(cli('message', 'find', '--uid', scheduled.uid, '--json'));
    assert.equal(found.messages[0].scheduled_for, new Date(scheduled.sendAt).toISOString());

    const report = await t.call('get_message_transmissions', { api_key: seed.projectKey, arguments: { uid: scheduled.uid } });
    assert.equal(report.body.data.message.send_at, due.replace(' UTC', ''));
    const plain = await t.call('get_message_transmissions', { api_key: seed.projectKey, arguments: { uid: overridden.uid } });
    assert.equal(plain.body.data.message.send_at, null);
    // get_messages says it too, as ISO-8601 like its created_at: the same instant.
    const listed = (await t.call('get_messages', { api_key: seed.projectKey })).body.data;
    assert.equal(listed[scheduled.uid].send_at, new Date(scheduled.sendAt).toISOString().replace('.000Z', 'Z'));
    assert.equal(listed[overridden.uid].send_at, null);
    assert.equal(listed[big.uid].send_at, null);
  });

  it('cancels a scheduled message from its page: a POST with the CSRF and form tokens, through cancel_message\'s operation', async () => {
    const page = await client.get(`/messages/${scheduled.id}`);
    assert.match(page.text, new RegExp(`<p class="cancel"><a class="button danger" href="/messages/${scheduled.id}/cancel">Cancel the copy not sent yet…</a></p>`));
    // It asks first (docs/dashboard.md, "Confirmations"): the confirmation's form cancels.
    const ask = await client.get(`/messages/${scheduled.id}/cancel`);
    assert.match(ask.text, new RegExp(`<form method="post" action="/messages/${scheduled.id}/cancel" class="actions"><input type="hidden" name="_csrf" value="[^"]+"><input type="hidden" name="_form" value="[^"]+"><button type="submit" class="danger"><bdi>Cancel the copy</bdi></button>`));
    // Without the token nothing happens.
    const forged = await client.post(`/messages/${scheduled.id}/cancel`, {}, { csrf: false });
    assert.equal(forged.status, 403);
    const still = await t.call('get_message_transmissions', { api_key: seed.projectKey, arguments: { uid: scheduled.uid } });
    assert.equal(still.body.data.transmissions['later@customer.example'].status, 'queued');
    // Another account's user does not find it.
    const stranger = await t.seed('stranger');
    const { client: theirs } = await signedInClient(t, stranger.accountUid);
    assert.equal((await theirs.post(`/messages/${scheduled.id}/cancel`, {})).status, 404);

    const done = await client.post(`/messages/${scheduled.id}/cancel`, {});
    assert.equal(done.status, 303);
    assert.equal(done.headers.get('location'), `/messages/${scheduled.id}`);
    const after = await client.get(`/messages/${scheduled.id}`);
    assert.match(after.text, /<p class="notice ok" role="status"><bdi>Cancelled 1 copy: they end as failed \(CANCELLED\) and are not sent\.<\/bdi><\/p>/);
    assert.doesNotMatch(after.text, /href="\/messages\/\d+\/cancel"/, 'nothing is left to cancel');
    assert.match((await client.get(`/messages/${scheduled.id}/cancel`)).text, /there is nothing to cancel/);
    const report = await t.call('get_message_transmissions', { api_key: seed.projectKey, arguments: { uid: scheduled.uid } });
    assert.equal(report.body.data.transmissions['later@customer.example'].status, 'failed');
    assert.equal(report.body.data.transmissions['later@customer.example'].result_code, 'CANCELLED');
    // A second cancel says so.
    await client.post(`/messages/${scheduled.id}/cancel`, {});
    assert.match((await client.get(`/messages/${scheduled.id}`)).text, /Nothing was cancelled: no copy was waiting\./);
  });

  it('says where a copy went under recipient_override: the page, the CLI and the API', async () => {
    assert.ok(peer.received.every((m) => m.to.length === 1 && m.to[0] === 'override@customer.example'), JSON.stringify(peer.received.map((m) => m.to)));
    const page = await client.get(`/messages/${overridden.id}`);
    assert.match(page.text, /<dt>Recipient override<\/dt><dd>every copy is sent to <strong><bdi>override@customer\.example<\/bdi><\/strong>/);
    const cards = page.text.split('<section class="card recipient"').slice(1);
    assert.equal(cards.length, 2);
    for (const card of cards) assert.match(card, /<p class="delivered-to">Delivery address: <strong><bdi>override@customer\.example<\/bdi><\/strong>/);
    assert.match(page.text, /<small>as sent to <bdi>r1@example\.test<\/bdi> \(delivered to <bdi>override@customer\.example<\/bdi>\)<\/small>/);

    const shown = JSON.parse(cli('message', 'show', overridden.uid, '--json'));
    assert.equal(shown.recipient_override, 'override@customer.example');
    assert.deepEqual(shown.recipients.map((r: { recipient: string; delivered_to: string; status: string }) => [r.recipient, r.delivered_to, r.status]), [
      ['r1@example.test', 'override@customer.example', 'completed'],
      ['r2@example.test', 'override@customer.example', 'completed'],
    ]);
    assert.match(cli('message', 'show', overridden.uid), /^r1@example\.test: completed \(SMTP_250\) -> override@customer\.example \(recipient override\)$/m);

    const report = await t.call('get_message_transmissions', { api_key: seed.projectKey, arguments: { uid: overridden.uid } });
    assert.equal(report.body.data.transmissions['r1@example.test'].delivered_to, 'override@customer.example');
    const content = await t.call('get_message_content', { api_key: seed.projectKey, arguments: { uid: overridden.uid, recipient: 'r2@example.test' } });
    assert.equal(content.body.data.message.recipient, 'r2@example.test');
    assert.equal(content.body.data.message.delivered_to, 'override@customer.example');
    const source = await t.call('get_message_source', { api_key: seed.projectKey, arguments: { uid: overridden.uid } });
    assert.equal(source.body.data.message.delivered_to, 'override@customer.example');
    // Without an override a copy went to its recipient.
    const own = await t.call('get_message_transmissions', { api_key: seed.projectKey, arguments: { uid: big.uid } });
    assert.equal(own.body.data.transmissions[address(7)].delivered_to, address(7));
  });

  it('pages a 1000-recipient message 100 copies at a time by keyset: every copy once, recipient 201 with its timeline and source', async () => {
    const seen: string[] = [];
    let url: string | null = `/messages/${big.id}`;
    let pages = 0;
    let third = '';
    while (url) {
      const page = await client.get(url);
      assert.equal(page.status, 200, url);
      const cards = recipientCards(page.text);
      assert.ok(cards.length <= 100, `${cards.length} cards on ${url}`);
      seen.push(...cards);
      if (++pages === 3) third = page.text;
      url = linkTo(page.text, 'Next recipients');
      if (url) assert.match(url, new RegExp(`^/messages/${big.id}\\?cursor=\\d+#recipients$`));
      assert.ok(pages <= 11, 'the pages end');
    }
    assert.equal(pages, 10);
    assert.deepEqual(seen, Array.from({ length: RECIPIENTS }, (_, i) => address(i + 1)));
    const card201 = third.slice(third.indexOf(`aria-label="Recipient ${address(201)}"`));
    assert.match(card201.slice(0, card201.indexOf('</section>')), /<strong><bdi>completed<\/bdi><\/strong>/);
    assert.ok(linkTo(third, 'First recipients'));

    // The MIME source and the content of a copy beyond the first 200.
    const source = await fetch(`${t.url}/messages/${big.id}/source?recipient=${encodeURIComponent(address(201))}`, { headers: { cookie: [...client.cookies].map(([k, v]) => `${k}=${v}`).join('; ') } });
    assert.equal(source.status, 200);
    assert.match(await source.text(), /^To: <r0201@null\.postageapp\.com>\r?$/m);
    const content = await t.call('get_message_content', { api_key: seed.projectKey, arguments: { uid: big.uid, recipient: address(999) } });
    assert.equal(content.body.data.message.recipient, address(999));
    assert.equal(content.body.data.message.text, 'Hello 999');

    // The CLI pages the same way.
    const first = JSON.parse(cli('message', 'show', big.uid, '--json'));
    assert.equal(first.recipients.length, 100);
    assert.equal(first.truncated, true);
    const second = JSON.parse(cli('message', 'show', big.uid, '--cursor', first.next, '--json'));
    assert.equal(second.recipients[0].recipient, address(101));
    assert.match(cli('message', 'show', big.uid), new RegExp(`^\\(more recipients: --cursor ${first.next}\\)$`, 'm'));
  });

  it('filters the copies by address or its beginning, case-insensitively', async () => {
    const one = await client.get(`/messages/${big.id}?recipient=${encodeURIComponent('R0201@Null.postageapp.com')}`);
    assert.deepEqual(recipientCards(one.text), [address(201)]);
    assert.match(one.text, /<input id="f-recipient" name="recipient" type="search" value="R0201@Null.postageapp.com">/);
    const prefix = await client.get(`/messages/${big.id}?recipient=r020`);
    assert.deepEqual(recipientCards(prefix.text), Array.from({ length: 10 }, (_, i) => address(200 + i)));
    assert.equal(linkTo(prefix.text, 'Next recipients'), null);
    const many = await client.get(`/messages/${big.id}?recipient=r0`);
    assert.equal(recipientCards(many.text).length, 100);
    const next = linkTo(many.text, 'Next recipients')!;
    assert.match(next, /recipient=r0&cursor=\d+#recipients$/);
    assert.equal(recipientCards((await client.get(next)).text)[0], address(101));
    const none = await client.get(`/messages/${big.id}?recipient=${encodeURIComponent('nobody%_@')}`);
    assert.deepEqual(recipientCards(none.text), []);
    assert.match(none.text, /No recipient of this message starts with “<bdi>nobody%_@<\/bdi>”/);
    // A cursor that is not one is refused with the error page, not a crash.
    const bad = await client.get(`/messages/${big.id}?cursor=abc`);
    assert.equal(bad.status, 406);
    assert.match(bad.text, /page cursor is malformed/);

    const shown = JSON.parse(cli('message', 'show', big.uid, '--recipient', 'r099', '--json'));
    assert.deepEqual(shown.recipients.map((r: { recipient: string }) => r.recipient), Array.from({ length: 10 }, (_, i) => address(990 + i)));
    assert.equal(shown.next, null);
  });

  it('filters the webhook deliveries by the recipient filter of the page: an address or its beginning, case-insensitively, paged', async () => {
    const recipientsOf = (text: string) => deliveryRows(text).map((r) => /<td><bdi>delivered<\/bdi><\/td><td><bdi>([^<]+)<\/bdi><\/td>/.exec(r)![1]);
    const one = await client.get(`/messages/${big.id}?recipient=${encodeURIComponent('R0201@Null.postageapp.com')}`);
    assert.deepEqual(recipientsOf(one.text), [address(201)]);
    assert.match(one.text, /<input id="f-hooks-recipient" name="recipient" type="search" value="R0201@Null.postageapp.com">/);
    assert.match(one.text, /<h2 id="webhook-deliveries">Webhook deliveries <small>about recipients starting with “<bdi>R0201@Null.postageapp.com<\/bdi>”<\/small><\/h2>/);
    const prefix = await client.get(`/messages/${big.id}?recipient=r020`);
    assert.deepEqual(recipientsOf(prefix.text), Array.from({ length: 10 }, (_, i) => address(200 + i)));
    assert.equal(linkTo(prefix.text, 'Next deliveries'), null);

    // 100 deliveries are to an address starting with r01: 50 a page, the filter kept by the pager, every one once.
    const seen: string[] = [];
    let url: string | null = `/messages/${big.id}?recipient=r01`;
    let pages = 0;
    while (url) {
      const page = await client.get(url);
      const shown = recipientsOf(page.text);
      assert.ok(shown.length <= 50);
      seen.push(...shown);
      url = linkTo(page.text, 'Next deliveries');
      if (url) assert.match(url, /recipient=r01&hooks=\d+#webhook-deliveries$/);
      assert.ok(++pages <= 4, 'the pages end');
    }
    assert.deepEqual(seen, Array.from({ length: 100 }, (_, i) => address(100 + i)));

    const none = await client.get(`/messages/${big.id}?recipient=${encodeURIComponent('nobody%_@')}`);
    assert.deepEqual(deliveryRows(none.text), []);
    assert.match(none.text, /<p class="empty">No webhook delivery about a recipient starting with “<bdi>nobody%_@<\/bdi>”\.<\/p>/);

    // A variable named recipient is not the recipient: only the copy to that address is matched.
    const r = await t.call('send_message', {
      api_key: seed.projectKey,
      uid: 'lookalike-1',
      arguments: { recipients: { 'ann@null.postageapp.com': {}, 'bob@null.postageapp.com': { recipient: 'ann@null.postageapp.com' } }, headers: { subject: 'x', from: 'a@acme.example' }, content: { 'text/plain': 'Hi {{recipient}}' } },
    });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    await sink.waitFor(RECIPIENTS + 4, 60_000);
    const lookalike = await client.get(`/messages/${r.body.data.message.id}?recipient=ann`);
    assert.deepEqual(recipientsOf(lookalike.text), ['ann@null.postageapp.com']);
    assert.deepEqual(recipientsOf((await client.get(`/messages/${r.body.data.message.id}`)).text).sort(), ['ann@null.postageapp.com', 'bob@null.postageapp.com']);
  });

  it('lists the webhook deliveries 50 a page, every one once', async () => {
    const ids = new Set<string>();
    let url: string | null = `/messages/${big.id}`;
    let pages = 0;
    let firstPageBytes = 0;
    while (url) {
      const page = await client.get(url);
      if (pages === 0) firstPageBytes = page.text.length;
      const rows = deliveryRows(page.text);
      assert.ok(rows.length <= 50, `${rows.length} rows`);
      for (const r of rows) {
        assert.match(r, /<td><bdi>delivered<\/bdi><\/td><td><bdi>r\d{4}@null\.postageapp\.com<\/bdi><\/td>/);
        ids.add(/<bdi>(r\d{4})@/.exec(r)![1]);
      }
      pages++;
      url = linkTo(page.text, 'Next deliveries');
      assert.ok(pages <= 21, 'the pages end');
    }
    assert.equal(pages, 20);
    assert.equal(ids.size, RECIPIENTS);
    assert.ok(firstPageBytes < 150_000, `the page is ${firstPageBytes} bytes`);
  });
});

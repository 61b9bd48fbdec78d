// Delivery against real SMTP servers on 127.0.0.1, each scripted to answer one way: what arrives,
// and what the transmission, its attempts, the suppression list and the event outbox then say.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { randomBytes } from 'node:crypto';
import { dkimVerify } from 'mailauth/lib/dkim/verify.js';
import { simpleParser } from 'mailparser';
import { ManualClock } from '../../src/domain/clock.ts';
import { findActiveSuppression } from '../../src/storage/suppressions.ts';
import { headerOf, reply, startSmtpPeer, type SmtpPeer } from '../helpers/smtp-peers.ts';
import { simpleMessage, startDeliveryHarness, type DeliveryHarness } from './harness.ts';

const T0 = Date.UTC(2026, 2, 1, 12, 0, 0);

describe('delivery outcomes against scripted SMTP servers', () => {
  let h: DeliveryHarness;
  let clock: ManualClock;
  const peers: SmtpPeer[] = [];
  let ok: SmtpPeer;
  let refusedPort: number;
  let slowDotPeer: SmtpPeer;

  before(async () => {
    // One peer per behaviour, each behind its own domain in the transport map.
    ok = await startSmtpPeer({ acceptText: (n) => `2.0.0 Ok: queued as Q${n}` });
    const rcpt550 = await startSmtpPeer({ rcpt: () => reply(550, '5.1.1 <x>: Recipient address rejected: User unknown') });
    const rcptPolicy = await startSmtpPeer({ rcpt: () => reply(554, '5.7.1 Message rejected due to policy') });
    // A reply text in UTF-8, as servers localised for their users send them.
    const data550 = await startSmtpPeer({ data: () => reply(554, '5.7.1 Message rejected as spam — Nachricht als Spam abgelehnt ✉') });
    const temp451 = await startSmtpPeer({ rcpt: () => reply(451, '4.7.1 Greylisted, try again later') });
    const greet421 = await startSmtpPeer({ connect: () => reply(421, '4.3.2 Too busy, come back later') });
    const drop = await startSmtpPeer({ data: () => 'drop' });
    const stall = await startSmtpPeer({ data: () => 'stall' });
    const silent = await startSmtpPeer({ connect: () => 'stall' });
    // Answers the end of the message after the socket timeout (400 ms), within the data-done one.
    const slowDot = await startSmtpPeer({ dataDelayMs: 1200 });
    peers.push(slowDot);
    slowDotPeer = slowDot;
    const closed = await startSmtpPeer();
    refusedPort = closed.port;
    await closed.close(); // nothing listens there any more: connection refused
    peers.push(ok, rcpt550, data550, temp451, greet421, drop, stall, silent);
    peers.push(rcptPolicy);
    clock = new ManualClock(T0);
    h = await startDeliveryHarness({
      clock,
      config: {
        socketTimeoutMs: 400,
        greetingTimeoutMs: 400,
        dataDoneTimeoutMs: 4000,
        transportMap: [
          slowDot.transportFor('slowdot.test'),
          ok.transportFor('ok.test'),
          rcpt550.transportFor('rcpt550.test'),
          rcptPolicy.transportFor('policy.test'),
          data550.transportFor('data550.test'),
          temp451.transportFor('temp451.test'),
          greet421.transportFor('greet421.test'),
          drop.transportFor('drop.test'),
          stall.transportFor('stall.test'),
          silent.transportFor('silent.test'),
          `refused.test=127.0.0.1:${refusedPort}`,
        ],
      },
    });
  });
  after(async () => {
    await h?.close();
    for (const p of peers) await p.close();
  });

  it('a 250 completes the transmission with the server text, one attempt, a delivered event', async () => {
    const sent = await h.send(simpleMessage('Ann Example <ann@ok.test>', { headers: { from: 'Sender <sender@posthorn.test>', subject: 'Hi', 'X-Campaign': 'spring' } }));
    assert.equal(await h.drain(), 1);
    const t = await h.transmission('ann@ok.test');
    assert.equal(t.status, 'completed');
    assert.equal(t.result_code, 'SMTP_250');
    assert.equal(t.result_message, '2.0.0 Ok: queued as Q1');
    assert.equal(t.completed_at, T0);
    assert.equal(t.attempts, 1);
    assert.equal(t.locked_by, null);
    const attempts = await h.attempts(t.id);
    assert.equal(attempts.length, 1);
    assert.equal(attempts[0].outcome, 'sent');
    assert.equal(attempts[0].mx_host, '127.0.0.1');
    assert.equal(attempts[0].result_code, 'SMTP_250');
    assert.equal(attempts[0].started_at, T0);
    assert.ok(attempts[0].duration_ms >= 0);

    const mail = ok.received.at(-1)!;
    assert.deepEqual(mail.to, ['ann@ok.test']);
    assert.match(mail.from, new RegExp(`^bounce-${t.id}-[0-9a-f]{16}@bounces\\.posthorn\\.test$`), 'VERP return path as MAIL FROM');
    assert.equal(mail.clientHostname, 'posthorn.test', 'EHLO name');
    assert.equal(mail.secure, true, 'opportunistic STARTTLS was used (self-signed certificate accepted)');
    const message = await h.t.app.services.store.db.selectFrom('messages').select(['payload', 'uid']).where('id', '=', t.message_id).executeTakeFirstOrThrow();
    assert.equal(mail.messageId, JSON.parse(message.payload).messageId, 'the Message-ID fixed at acceptance');
    assert.equal(headerOf(mail.raw, 'to'), 'Ann Example <ann@ok.test>');
    assert.equal(headerOf(mail.raw, 'x-campaign'), 'spring');
    assert.equal(headerOf(mail.raw, 'subject'), 'Hi');

    const events = await h.events('delivered');
    const event = events.find((e) => e.payload.transmission_id === t.id)!;
    assert.equal(event.payload.message_uid, message.uid);
    assert.equal(event.payload.recipient, 'ann@ok.test');
    assert.equal(event.payload.result_code, 'SMTP_250');
    assert.equal(event.payload.attempts, 1);
    assert.equal(sent.response.status, 'ok');
  });

  it('renders variables per recipient; the same content is shared by recipients without their own', async () => {
    await h.send(
      simpleMessage({ 'v1@ok.test': { name: 'Vera' }, 'v2@ok.test': { name: 'Viktor' }, 'v3@ok.test': {} }, {
        headers: { from: 'sender@posthorn.test', subject: 'Hello {{name}}' },
        content: { 'text/plain': 'Dear {{name}}, your code is {{code}}.' },
        variables: { name: 'friend', code: 'C-42' },
      }),
    );
    assert.equal(await h.drain(), 3);
    const byRcpt = new Map(ok.received.map((m) => [m.to[0], m.raw.toString('utf8')]));
    assert.match(byRcpt.get('v1@ok.test')!, /Subject: Hello Vera/);
    assert.match(byRcpt.get('v1@ok.test')!, /Dear Vera, your code is C-42\./);
    assert.match(byRcpt.get('v2@ok.test')!, /Dear Viktor, your code is C-42\./);
    assert.match(byRcpt.get('v3@ok.test')!, /Dear friend, your code is C-42\./);
  });

  it('sends attachments and delivers every copy to the recipient_override', async () => {
    const content = Buffer.from('hello attachment').toString('base64');
    await h.send(
      simpleMessage(['orig1@elsewhere.test', 'orig2@elsewhere.test'], {
        recipient_override: 'qa@ok.test',
        attachments: { 'notes.txt': { content_type: 'text/plain', content } },
      }),
    );
    assert.equal(await h.drain(), 2);
    const copies = ok.received.filter((m) => m.to[0] === 'qa@ok.test');
    assert.equal(copies.length, 2);
    const raw = copies[0].raw.toString('utf8');
    assert.match(raw, /filename=notes\.txt/);
    assert.match(raw, new RegExp(content));
    assert.deepEqual(copies.map((m) => headerOf(m.raw, 'to')).sort(), ['<orig1@elsewhere.test>', '<orig2@elsewhere.test>']);
    const t = await h.transmission('orig1@elsewhere.test');
    assert.equal(t.status, 'completed');
  });

  it('messages around the socket buffer size arrive whole', async () => {
    for (const size of [1, 15 * 1024, 17 * 1024, 40 * 1024, 70 * 1024]) {
      const text = 'Lorem ipsum dolor sit amet. '.repeat(Math.ceil(size / 28)).slice(0, size);
      await h.send(simpleMessage(`size${size}@ok.test`, { content: { 'text/plain': text } }));
      assert.equal(await h.drain(), 1);
      const parsed = await simpleParser(ok.received.find((m) => m.to[0] === `size${size}@ok.test`)!.raw);
      assert.equal(parsed.text?.trim(), text.trim(), `${size} bytes`);
    }
  });

  it('a large message (sent in parts, never copied per recipient) arrives whole and DKIM-signed', async () => {
    const domain = await h.t.call('create_domain', { api_key: h.seed.accountKey, arguments: { name: 'big.example' } });
    assert.equal(domain.status, 200, JSON.stringify(domain.body));
    const dkimRecord = domain.body.data.domain.dns_records.dkim;
    const bytes = randomBytes(400 * 1024);
    await h.send(
      simpleMessage(['big1@ok.test', 'big2@ok.test'], {
        headers: { from: 'Big <news@big.example>', subject: 'Large' },
        attachments: { 'data.bin': { content_type: 'application/octet-stream', content: bytes.toString('base64') } },
      }),
    );
    assert.equal(await h.drain(), 2);
    const resolver = async (name: string, type: string) => {
      if (type === 'TXT' && name === dkimRecord.name) return [[dkimRecord.value.slice(0, 255), dkimRecord.value.slice(255)]];
      throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' });
    };
    for (const rcpt of ['big1@ok.test', 'big2@ok.test']) {
      const mail = ok.received.find((m) => m.to[0] === rcpt)!;
      assert.ok(mail.raw.length > 400 * 1024);
      assert.equal(headerOf(mail.raw, 'to'), `<${rcpt}>`);
      const parsed = await simpleParser(mail.raw);
      assert.ok(parsed.attachments[0].content.equals(bytes), 'the attachment arrived byte for byte');
      const verified = await dkimVerify(mail.raw, { resolver });
      assert.equal(verified.results[0].status.result, 'pass', JSON.stringify(verified.results[0].status));
    }
  });

  it('a 550 on RCPT fails at once, suppresses the address (hard bounce) and says bounced', async () => {
    await h.send(simpleMessage('gone@rcpt550.test'));
    assert.equal(await h.drain(), 1);
    const t = await h.transmission('gone@rcpt550.test');
    assert.equal(t.status, 'failed');
    assert.equal(t.result_code, 'SMTP_550');
    assert.match(t.result_message, /User unknown/);
    assert.equal(t.failed_at, T0);
    const suppression = await findActiveSuppression(h.t.app.services.store.db, h.seed.projectId, 'gone@rcpt550.test', clock.now());
    assert.equal(suppression?.status, 'rejected');
    assert.equal(suppression?.suppression_state, 'hard_bounce');
    assert.ok((await h.events('bounced')).some((e) => e.payload.transmission_id === t.id));
  });

  it('a later send to a suppressed address fails with SUPPRESSED and no SMTP traffic', async () => {
    const peer = peers[1];
    const before = peer.connectionCount;
    await h.send(simpleMessage('gone@rcpt550.test', { headers: { from: 'sender@posthorn.test', subject: 'again' } }));
    assert.equal(await h.drain(), 1);
    const t = await h.transmission('gone@rcpt550.test');
    assert.equal(t.status, 'failed');
    assert.equal(t.result_code, 'SUPPRESSED');
    assert.match(t.result_message, /suppression list/);
    assert.equal(peer.connectionCount, before, 'no connection was made');
    assert.equal((await h.attempts(t.id))[0].mx_host, null);
  });

  it('an address suppressed under one spelling is suppressed under every other, the local part compared without case too', async () => {
    const added = await h.t.call('add_to_suppression_list', { api_key: h.seed.projectKey, arguments: { address: 'Sup.Case@Example.test' } });
    assert.equal(added.status, 200, JSON.stringify(added.body));
    const before = peers.map((peer) => peer.connectionCount);
    // A manual entry, and the hard bounce above (gone@rcpt550.test), each under another spelling.
    await h.send(simpleMessage(['sup.case@example.test', 'GONE@rcpt550.test'], { headers: { from: 'sender@posthorn.test', subject: 'spellings' } }));
    assert.equal(await h.drain(), 2);
    for (const recipient of ['sup.case@example.test', 'GONE@rcpt550.test']) {
      const t = await h.transmission(recipient);
      assert.deepEqual([t.status, t.result_code], ['failed', 'SUPPRESSED'], recipient);
      assert.match(t.result_message, /suppression list/);
    }
    assert.deepEqual(peers.map((peer) => peer.connectionCount), before, 'no connection was made');
  });

  it('a policy refusal (5.7.x) on RCPT fails without suppressing the address', async () => {
    await h.send(simpleMessage('reader@policy.test'));
    assert.equal(await h.drain(), 1);
    const t = await h.transmission('reader@policy.test');
    assert.deepEqual([t.status, t.result_code], ['failed', 'SMTP_554']);
    assert.equal(await findActiveSuppression(h.t.app.services.store.db, h.seed.projectId, 'reader@policy.test', clock.now()), undefined);
    assert.ok(!(await h.events('bounced')).some((e) => e.payload.transmission_id === t.id), 'no bounced event');
  });

  it('a 5xx after the message fails without suppressing the address', async () => {
    await h.send(simpleMessage('reader@data550.test'));
    assert.equal(await h.drain(), 1);
    const t = await h.transmission('reader@data550.test');
    assert.equal(t.status, 'failed');
    assert.equal(t.result_code, 'SMTP_554');
    // The reply text is read as UTF-8, not byte by byte.
    assert.match(t.result_message, /spam — Nachricht als Spam abgelehnt ✉/);
    assert.equal(await findActiveSuppression(h.t.app.services.store.db, h.seed.projectId, 'reader@data550.test', clock.now()), undefined);
    assert.ok((await h.events('failed')).some((e) => e.payload.transmission_id === t.id));
  });

  for (const [domain, code, pattern] of [
    ['temp451.test', 'SMTP_451', /Greylisted/],
    ['greet421.test', 'SMTP_421', /Too busy/],
    ['drop.test', 'CONNECTION_LOST', /./],
    // The whole message was sent; only the reply to its end never came.
    ['stall.test', 'TIMEOUT', /^timed out waiting for the reply to the end of the message data/],
    ['silent.test', 'TIMEOUT', /greeting/i],
    ['refused.test', 'CONNECTION_REFUSED', /ECONNREFUSED/],
  ] as const) {
    it(`${code} (${domain}) defers: status retry, next attempt after the first delay, a retry event`, async () => {
      await h.send(simpleMessage(`someone@${domain}`));
      assert.equal(await h.worker.runOnce(), 1);
      const t = await h.transmission(`someone@${domain}`);
      assert.equal(t.status, 'retry');
      assert.equal(t.result_code, code);
      assert.match(t.result_message, pattern);
      assert.equal(t.next_attempt_at, clock.now() + 60_000, 'default schedule starts at 1 minute');
      assert.equal(t.locked_by, null);
      const [attempt] = await h.attempts(t.id);
      assert.equal(attempt.outcome, 'deferred');
      assert.equal(attempt.result_code, code);
      const retry = (await h.events('retry')).find((e) => e.payload.transmission_id === t.id);
      assert.ok(retry);
      assert.equal(retry.payload.next_attempt_at, new Date(clock.now() + 60_000).toISOString().replace(/\.\d{3}Z$/, 'Z'));
      // Not due yet: nothing to claim.
      assert.equal(await h.worker.runOnce(), 0);
    });
  }

  it('a reply to the end of the message that comes after the socket timeout but within the data-done timeout: delivered once', async () => {
    await h.send(simpleMessage('someone@slowdot.test'));
    assert.equal(await h.worker.runOnce(), 1);
    const t = await h.transmission('someone@slowdot.test');
    assert.equal(t.status, 'completed', t.result_message);
    assert.equal(t.attempts, 1);
    assert.equal(slowDotPeer.attempts.length, 1, 'the message reached the server once');
    assert.equal(slowDotPeer.received.length, 1);
  });

  it('a destination that refuses connections more often than it has connection slots keeps answering: none waits for good', async () => {
    // Ten slots per destination by default: every refused connect must give its slot back.
    for (let i = 0; i < 13; i++) {
      await h.send(simpleMessage(`again-${i}@refused.test`));
      let timer: NodeJS.Timeout | undefined;
      const bounded = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`attempt ${i + 1} to the refusing destination never finished`)), 10_000)));
      try {
        assert.equal(await Promise.race([h.worker.runOnce(), bounded]), 1);
      } finally {
        clearTimeout(timer);
      }
      const t = await h.transmission(`again-${i}@refused.test`);
      assert.deepEqual([t.status, t.result_code], ['retry', 'CONNECTION_REFUSED']);
    }
  });

  it('the mid-DATA drop left no accepted copy, the stall none either', () => {
    assert.equal(peers[5].received.length, 0);
    assert.equal(peers[6].received.length, 0);
  });
});

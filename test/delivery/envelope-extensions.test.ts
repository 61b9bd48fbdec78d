// The envelope against what the receiving server offers (docs/delivery.md, "SMTP"): UTF-8
// addresses need SMTPUTF8 (RFC 6531), an 8-bit body needs 8BITMIME (RFC 6152), an
// internationalised domain goes in its ASCII (IDNA) form. Real smtp-server peers on 127.0.0.1,
// with and without those extensions; what they received in MAIL FROM and RCPT TO (parameters
// included), and what the API reports.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { authenticate } from '../../src/operations/authenticate.ts';
import type { ProjectCaller } from '../../src/operations/context.ts';
import { submitMessage } from '../../src/operations/submit-message.ts';
import { startDnsServer, type TestDnsServer } from '../helpers/dns-server.ts';
import { headerOf, reply, startSmtpPeer, type SmtpPeer } from '../helpers/smtp-peers.ts';
import { simpleMessage, startDeliveryHarness, type DeliveryHarness } from './harness.ts';

/** How many MAIL FROM commands a peer received. */
function mailCommands(peer: SmtpPeer): number {
  return peer.commands.filter((c) => /^MAIL FROM:/i.test(c)).length;
}

/** The RCPT TO lines a peer received, as sent. */
function rcptLines(peer: SmtpPeer): string[] {
  return peer.commands.filter((c) => /^RCPT TO:/i.test(c));
}

/** The API's report of a recipient (get_message_transmissions of its latest message). */
async function reported(h: DeliveryHarness, recipient: string): Promise<any> {
  const t = await h.transmission(recipient);
  const { uid } = await h.t.app.services.store.db.selectFrom('messages').select('uid').where('id', '=', t.message_id).executeTakeFirstOrThrow();
  const r = await h.t.call('get_message_transmissions', { api_key: h.seed.projectKey, arguments: { uid } });
  assert.equal(r.status, 200);
  return r.body.data.transmissions[recipient];
}

describe('SMTPUTF8, 8BITMIME and IDN domains on the envelope', () => {
  let h: DeliveryHarness;
  /** offers SMTPUTF8 and 8BITMIME */
  let full: SmtpPeer;
  /** offers 8BITMIME, not SMTPUTF8 */
  let noUtf8: SmtpPeer;
  /** offers SMTPUTF8, not 8BITMIME */
  let no8bit: SmtpPeer;
  /** offers SMTPUTF8 and 8BITMIME, not PIPELINING (Nodemailer's own envelope) */
  let unpipelined: SmtpPeer;

  before(async () => {
    full = await startSmtpPeer({ starttls: false });
    noUtf8 = await startSmtpPeer({ starttls: false, smtputf8: false, rcpt: (to) => (to.startsWith('gone@') ? reply(550, '5.1.1 User unknown') : null) });
    no8bit = await startSmtpPeer({ starttls: false, eightBitMime: false });
    unpipelined = await startSmtpPeer({ starttls: false, pipelining: false });
    h = await startDeliveryHarness({
      config: {
        // The IDN entry is written as a person would: its Unicode form.
        transportMap: [full.transportFor('utf8.test'), noUtf8.transportFor('ascii.test'), no8bit.transportFor('seven.test'), noUtf8.transportFor('bücher.example'), unpipelined.transportFor('unpipelined.test')],
      },
    });
  });
  after(async () => {
    await h?.close();
    for (const p of [full, noUtf8, no8bit, unpipelined]) await p?.close();
  });

  /** A message submitted as raw MIME (what SMTP submission stores), to `recipients`. */
  async function submit(recipients: string[], raw: string): Promise<void> {
    const caller = (await authenticate(h.t.app.services, h.seed.projectKey, 'project')) as ProjectCaller;
    await submitMessage(h.t.app.services, caller, { envelopeFrom: 'sender@posthorn.test', recipients, raw: Buffer.from(raw.replace(/\r?\n/g, '\r\n'), 'utf8') });
  }

  it('sends a UTF-8 local part with SMTPUTF8 on MAIL FROM to a server that offers it', async () => {
    await h.send(simpleMessage('josé@utf8.test'));
    assert.equal(await h.drain(), 1);
    const t = await h.transmission('josé@utf8.test');
    assert.equal(t.status, 'completed', t.result_message);
    const mail = full.received.at(-1)!;
    assert.deepEqual(mail.to, ['josé@utf8.test']);
    assert.equal(mail.mailArgs.SMTPUTF8, true);
    assert.equal((await reported(h, 'josé@utf8.test')).status, 'completed');
  });

  it('fails a UTF-8 local part at once (5.6.7) when the server does not offer SMTPUTF8: no MAIL FROM, no bounce', async () => {
    const mailsBefore = mailCommands(noUtf8);
    await h.send(simpleMessage('josé@ascii.test'));
    assert.equal(await h.drain(), 1);
    const t = await h.transmission('josé@ascii.test');
    assert.equal(t.status, 'failed');
    assert.equal(t.result_code, 'SMTPUTF8_UNSUPPORTED');
    assert.match(t.result_message, /^5\.6\.7 .*does not support SMTPUTF8/);
    assert.equal(t.attempts, 1, 'permanent: no retry');
    assert.equal(mailCommands(noUtf8), mailsBefore, 'no transaction was started');
    const report = await reported(h, 'josé@ascii.test');
    assert.equal(report.status, 'failed');
    assert.equal(report.result_code, 'SMTPUTF8_UNSUPPORTED');
    const failed = (await h.events('failed')).filter((e) => e.payload.recipient === 'josé@ascii.test');
    assert.equal(failed.length, 1);
    const suppressions = await h.t.app.services.store.db.selectFrom('suppressions').selectAll().execute();
    assert.equal(suppressions.length, 0, 'the address is not at fault: nothing suppressed');
  });

  it('a UTF-8 address in the headers needs SMTPUTF8 as well: announced where offered, failed where not', async () => {
    const from = { from: 'José <josé@posthorn.test>', subject: 'Hello' };
    await h.send(simpleMessage(['ann@utf8.test', 'ann@ascii.test', 'ann@unpipelined.test'], { headers: from }));
    assert.equal(await h.drain(), 3);
    const offered = await h.transmission('ann@utf8.test');
    assert.equal(offered.status, 'completed', offered.result_message);
    const mail = full.received.at(-1)!;
    assert.deepEqual(mail.to, ['ann@utf8.test']);
    assert.match(headerOf(mail.raw, 'from') ?? '', /josé@posthorn\.test/);
    assert.equal(mail.mailArgs.SMTPUTF8, true, 'the From header holds a UTF-8 address');
    assert.equal((await h.transmission('ann@unpipelined.test')).status, 'completed');
    assert.equal(unpipelined.received.at(-1)!.mailArgs.SMTPUTF8, true, 'without PIPELINING too');
    const refused = await h.transmission('ann@ascii.test');
    assert.equal(refused.status, 'failed');
    assert.equal(refused.result_code, 'SMTPUTF8_UNSUPPORTED');
  });

  it('an all-ASCII message goes without SMTPUTF8 and without BODY, even to servers offering neither (composed text is 7-bit)', async () => {
    const content = { 'text/plain': 'Grüße, ☃', 'text/html': '<p>Grüße, ☃</p>' };
    await h.send(simpleMessage(['bob@utf8.test', 'bob@ascii.test', 'bob@seven.test'], { content }));
    assert.equal(await h.drain(), 3);
    for (const [recipient, peer] of [['bob@utf8.test', full], ['bob@ascii.test', noUtf8], ['bob@seven.test', no8bit]] as const) {
      const t = await h.transmission(recipient);
      assert.equal(t.status, 'completed', `${recipient}: ${t.result_message}`);
      const mail = peer.received.at(-1)!;
      assert.deepEqual(mail.to, [recipient]);
      assert.deepEqual(mail.mailArgs, {}, recipient);
      assert.ok(mail.raw.every((b) => b < 0x80), `${recipient}: the message is 7-bit`);
    }
  });

  it('sends an IDN domain in its A-label form (transport map, RCPT TO, To header) to a server without SMTPUTF8, and reports it as written', async () => {
    await h.send(simpleMessage('Carl <carl@bücher.example>'));
    assert.equal(await h.drain(), 1);
    const t = await h.transmission('carl@bücher.example');
    assert.equal(t.status, 'completed', t.result_message);
    const mail = noUtf8.received.at(-1)!;
    assert.deepEqual(mail.to, ['carl@bücher.example'], 'smtp-server shows the domain decoded');
    assert.equal(rcptLines(noUtf8).at(-1), 'RCPT TO:<carl@xn--bcher-kva.example>');
    assert.deepEqual(mail.mailArgs, {});
    assert.equal(headerOf(mail.raw, 'to'), 'Carl <carl@xn--bcher-kva.example>');
    assert.ok(mail.raw.every((b) => b < 0x80), 'nothing 8-bit goes to a server without SMTPUTF8');
    assert.equal((await reported(h, 'carl@bücher.example')).status, 'completed');
  });

  it('a hard bounce of an IDN address suppresses the address as written: the next message to it is not sent', async () => {
    await h.send(simpleMessage('gone@bücher.example'));
    assert.equal(await h.drain(), 1);
    assert.equal((await h.transmission('gone@bücher.example')).result_code, 'SMTP_550');
    const rcpts = rcptLines(noUtf8).length;
    await h.send(simpleMessage('gone@bücher.example', { headers: { from: 'sender@posthorn.test', subject: 'Again' } }));
    assert.equal(await h.drain(), 1);
    const again = await h.transmission('gone@bücher.example');
    assert.equal(again.status, 'failed');
    assert.equal(again.result_code, 'SUPPRESSED', again.result_message);
    assert.match(again.result_message, /^gone@bücher\.example is on the suppression list/);
    assert.equal(rcptLines(noUtf8).length, rcpts, 'no RCPT TO for a suppressed address');
  });

  it('an 8-bit body goes with BODY=8BITMIME where offered, and fails (5.6.3) where not, before MAIL FROM', async () => {
    const mailsBefore = mailCommands(no8bit);
    await submit(
      ['dan@utf8.test', 'dan@seven.test'],
      'From: sender@posthorn.test\nTo: dan@utf8.test, dan@seven.test\nSubject: 8-bit\nContent-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: 8bit\n\nGrüße ☃\n',
    );
    assert.equal(await h.drain(), 2);
    const offered = await h.transmission('dan@utf8.test');
    assert.equal(offered.status, 'completed', offered.result_message);
    const mail = full.received.at(-1)!;
    assert.deepEqual(mail.to, ['dan@utf8.test']);
    assert.equal(mail.mailArgs.BODY, '8BITMIME');
    assert.equal(mail.mailArgs.SMTPUTF8, undefined, 'the envelope and headers are ASCII');
    assert.match(mail.raw.toString('utf8'), /Grüße ☃/);
    const refused = await h.transmission('dan@seven.test');
    assert.equal(refused.status, 'failed');
    assert.equal(refused.result_code, '8BITMIME_UNSUPPORTED');
    assert.match(refused.result_message, /^5\.6\.3 .*does not support 8BITMIME/);
    assert.equal(mailCommands(no8bit), mailsBefore, 'no transaction was started');
    assert.equal((await reported(h, 'dan@seven.test')).status, 'failed');
  });

  it('a submitted message with raw UTF-8 in its header section needs SMTPUTF8', async () => {
    await submit(['eve@utf8.test', 'eve@ascii.test'], 'From: sender@posthorn.test\nTo: eve@utf8.test\nSubject: Grüße\n\nhello\n');
    assert.equal(await h.drain(), 2);
    assert.equal((await h.transmission('eve@utf8.test')).status, 'completed');
    const mail = full.received.at(-1)!;
    assert.deepEqual(mail.to, ['eve@utf8.test']);
    assert.equal(mail.mailArgs.SMTPUTF8, true);
    assert.equal(mail.mailArgs.BODY, undefined, 'the body is 7-bit');
    const refused = await h.transmission('eve@ascii.test');
    assert.equal(refused.status, 'failed');
    assert.equal(refused.result_code, 'SMTPUTF8_UNSUPPORTED');
  });
});

describe('an IDN domain through MX lookup (a DNS server on 127.0.0.1)', () => {
  let dns: TestDnsServer;
  let peer: SmtpPeer;
  let h: DeliveryHarness;

  before(async () => {
    peer = await startSmtpPeer({ starttls: false, smtputf8: false });
    dns = await startDnsServer({
      'xn--bcher-kva.example': { mx: [{ exchange: 'mx.xn--bcher-kva.example', priority: 10 }] },
      'mx.xn--bcher-kva.example': { a: ['127.0.0.1'] },
    });
    h = await startDeliveryHarness({ config: { dnsServers: [dns.address] }, delivery: { mxPort: peer.port } });
  });
  after(async () => {
    await h?.close();
    await peer?.close();
    await dns?.close();
  });

  it('looks up the MX of the A-label form and delivers to a server without SMTPUTF8', async () => {
    await h.send(simpleMessage('ann@Bücher.example'));
    assert.equal(await h.drain(), 1);
    const t = await h.transmission('ann@bücher.example');
    assert.equal(t.status, 'completed', t.result_message);
    assert.equal((await h.attempts(t.id))[0].mx_host, 'mx.xn--bcher-kva.example');
    assert.ok(dns.countQueries('xn--bcher-kva.example', 'MX') > 0);
    const mail = peer.received.at(-1)!;
    assert.deepEqual(rcptLines(peer), ['RCPT TO:<ann@xn--bcher-kva.example>']);
    assert.equal(headerOf(mail.raw, 'to'), '<ann@xn--bcher-kva.example>');
    assert.ok(mail.raw.every((b) => b < 0x80));
    assert.equal((await reported(h, 'ann@bücher.example')).status, 'completed');
  });
});

// What Posthorn composes, as a real SMTP server (smtp-server on 127.0.0.1) receives it: header lines
// within RFC 5322's 998 octets whatever their values, body parts whose every CR ends a line, and a
// copy that cannot be rendered with its recipient's variables failed at once while the message's
// other copies are delivered (docs/delivery.md, docs/api/send-message.md).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { MailParser, simpleParser } from 'mailparser';
import { headerOf, startSmtpPeer, type SmtpPeer } from '../helpers/smtp-peers.ts';
import { startDeliveryHarness, type DeliveryHarness } from './harness.ts';

/** A header value with its RFC 2047 encoded-words decoded, by mailparser's decoder (it decodes the
 * Subject and addresses itself, and leaves other headers as they came). */
function decodeWords(value: string): string {
  const parser = new MailParser();
  try {
    return (parser as unknown as { libmime: { decodeWords(text: string): string } }).libmime.decodeWords(value);
  } finally {
    parser.destroy();
  }
}

describe('composition, at a real SMTP server', () => {
  let peer: SmtpPeer;
  let h: DeliveryHarness;

  before(async () => {
    peer = await startSmtpPeer();
    h = await startDeliveryHarness({ config: { transportMap: [peer.transportFor('*')] } });
  });
  after(async () => {
    await h?.close();
    await peer?.close();
  });

  /** send_message with the project key and a uid; the reply must be 200. */
  async function send(uid: string, args: Record<string, unknown>): Promise<void> {
    const r = await h.t.call('send_message', { api_key: h.seed.projectKey, uid, arguments: args });
    assert.equal(r.status, 200, JSON.stringify(r.body));
  }

  /** The copy of `recipient` the peer received (it must have). */
  function receivedBy(recipient: string): Buffer {
    const mail = peer.received.find((m) => m.to.includes(recipient));
    assert.ok(mail, `${recipient} received the message`);
    return mail.raw;
  }

  it('every header line is within 998 octets whatever the values, and decodes back to them exactly', async () => {
    // Runs without white space that no fold can break: the Subject, a custom header, the To line's
    // display name (plain and with a letter outside ASCII), and a custom header with a long run
    // that still fits, which goes as it is.
    const subject = `Order${'S'.repeat(2000)}end`;
    const custom = `ref-${'0123456789'.repeat(200)}`;
    const fits = `<https://example.test/${'u'.repeat(400)}>`;
    const names: Array<[string, string]> = [
      ['plain@lines.test', 'N'.repeat(1500)],
      ['zoe@lines.test', `Zo\u00eb${'z'.repeat(1500)} Smith`],
    ];
    await send('lines-1', {
      recipients: names.map(([address, name]) => `"${name}" <${address}>`),
      headers: { from: 'Shop <shop@posthorn.test>', subject, 'X-Reference': custom, 'List-Unsubscribe': fits },
      content: { 'text/plain': 'body' },
    });
    await h.drain();
    for (const [address, name] of names) {
      const raw = receivedBy(address);
      const head = raw.subarray(0, raw.indexOf('\r\n\r\n')).toString('latin1');
      for (const line of head.split('\r\n')) {
        assert.ok(line.length <= 998, `a header line of ${line.length} octets: ${line.slice(0, 60)}...`);
        // Where it can fold, within the 78 characters RFC 5322 asks for, but for the one that fits.
        if (!line.includes('https://example.test/')) assert.ok(line.length <= 78, `a header line of ${line.length} characters: ${line.slice(0, 60)}...`);
      }
      const parsed = await simpleParser(raw);
      assert.equal(parsed.subject, subject);
      assert.equal(decodeWords(parsed.headers.get('x-reference') as string), custom);
      assert.equal(headerOf(raw, 'list-unsubscribe'), fits, 'a header that fits is not encoded');
      const to = parsed.to as { value: Array<{ name: string; address: string }> };
      assert.deepEqual(to.value.map((a) => [a.name, a.address]), [[name, address]]);
    }
  });

  it('From, Reply-To and Cc display names that no fold can break go as encoded-words within 998 octets, and decode back exactly', async () => {
    // Nodemailer formats these headers itself: plain, quoted (a character that needs quoting, a
    // quote escaped) and non-ASCII names, each with a run longer than a line; and a long name that
    // folds at its spaces, which goes as it is.
    const from = 'F'.repeat(1500);
    const replyTo = `Help.Desk${'r'.repeat(1500)}"quoted"`;
    const cc = `Zo\u00eb${'c'.repeat(1500)}`;
    const folds = `Second ${'word '.repeat(300)}end`;
    const quote = (name: string) => `"${name.replace(/(["\\])/g, '\\$1')}"`;
    await send('lines-addresses', {
      recipients: ['ann@lines.test'],
      headers: {
        from: `${quote(from)} <shop@posthorn.test>`,
        'reply-to': `${quote(replyTo)} <help@posthorn.test>, ${quote(folds)} <second@posthorn.test>`,
        cc: `${quote(cc)} <cc@lines.test>`,
        subject: 'Names',
      },
      content: { 'text/plain': 'body' },
    });
    await h.drain();
    for (const address of ['ann@lines.test', 'cc@lines.test']) {
      const raw = receivedBy(address);
      const head = raw.subarray(0, raw.indexOf('\r\n\r\n')).toString('latin1');
      for (const line of head.split('\r\n')) {
        assert.ok(line.length <= 998, `a header line of ${line.length} octets: ${line.slice(0, 60)}...`);
        assert.ok(line.length <= 78, `a header line of ${line.length} characters: ${line.slice(0, 60)}...`);
      }
      const parsed = await simpleParser(raw);
      const names = (field: unknown) => (field as { value: Array<{ name: string; address: string }> }).value.map((a) => [a.name, a.address]);
      assert.deepEqual(names(parsed.from), [[from, 'shop@posthorn.test']]);
      assert.deepEqual(names(parsed.replyTo), [[replyTo, 'help@posthorn.test'], [folds, 'second@posthorn.test']]);
      assert.deepEqual(names(parsed.cc), [[cc, 'cc@lines.test']]);
      // The name that folds at its spaces is written as Nodemailer writes it (as it is), not encoded.
      assert.match(headerOf(raw, 'reply-to')!, /\?= <help@posthorn\.test>, Second word word /);
    }
  });

  it('every CR of a body part arrives as part of a CRLF, in 7bit and quoted-printable parts, rendered or not', async () => {
    // 7bit: plain ASCII with short lines. Quoted-printable: a line over 76 characters, and Latin
    // text with a letter outside ASCII (the HTML part). A lone CR given in the content, one brought
    // by a variable, and one at the very end.
    const cases: Array<[string, Record<string, string>]> = [
      ['cr-7bit@crlf.test', { 'text/plain': 'one\rtwo\r\nthree\nfour\r{{tail}}\r' }],
      ['cr-qp@crlf.test', { 'text/plain': `${'long '.repeat(20)}\rnext\r{{tail}}`, 'text/html': '<p>caf\u00e9</p>\r<p>two</p>\r' }],
    ];
    for (const [recipient, content] of cases) {
      await send(`crlf-${recipient}`, { recipients: { [recipient]: { tail: 'x\ry' } }, headers: { from: 'shop@posthorn.test', subject: 'Line ends' }, content });
    }
    await h.drain();
    const encodings = new Set<string>();
    for (const [recipient] of cases) {
      const raw = receivedBy(recipient).toString('latin1');
      for (const m of raw.matchAll(/^Content-Transfer-Encoding: (.+)\r$/gim)) encodings.add(m[1].toLowerCase());
      const lone = raw.search(/\r(?!\n)/);
      assert.equal(lone, -1, `${recipient}: a CR not followed by LF at ${lone}: ${JSON.stringify(raw.slice(Math.max(0, lone - 40), lone + 40))}`);
      const parsed = await simpleParser(receivedBy(recipient));
      assert.ok(!/\r(?!\n)/.test(parsed.text ?? ''), 'the decoded text part holds no lone CR either');
    }
    assert.deepEqual([...encodings].sort(), ['7bit', 'quoted-printable'], 'both encodings that keep a CR as it is were exercised');
    const sevenBit = receivedBy('cr-7bit@crlf.test').toString('latin1');
    assert.match(sevenBit, /\r\none\r\ntwo\r\nthree\r\nfour\r\nx\r\ny\r\n/);
  });

  it('a copy whose content cannot be rendered with its variables fails at once with the reason; the others are delivered', async () => {
    // An object whose toString is not a function cannot be printed by the template language: the
    // text part renders for one recipient and throws for the other.
    await send('render-1', {
      recipients: { 'good@render.test': { item: 'a pen' }, 'bad@render.test': { item: { toString: 'x' } }, 'also@render.test': { item: 'ink' } },
      headers: { from: 'Shop <shop@posthorn.test>', subject: 'Your order' },
      content: { 'text/plain': 'You ordered {{item}}.' },
    });
    await h.drain();

    const receipt = await h.t.call('get_message_transmissions', { api_key: h.seed.projectKey, arguments: { uid: 'render-1' } });
    assert.equal(receipt.status, 200, JSON.stringify(receipt.body));
    const shown = receipt.body.data.transmissions;
    assert.equal(shown['bad@render.test'].status, 'failed');
    assert.equal(shown['bad@render.test'].result_code, 'RENDER_FAILED');
    assert.equal(shown['bad@render.test'].result_message, "The text part could not be rendered with the recipient's variables: Cannot convert object to primitive value");
    assert.equal(shown['good@render.test'].status, 'completed');
    assert.equal(shown['also@render.test'].status, 'completed');

    // Failed on its first attempt, reported as failed, never as a retry; nothing reached the server.
    const bad = await h.transmission('bad@render.test');
    assert.equal(bad.attempts, 1);
    assert.equal((await h.attempts(bad.id)).length, 1);
    const events = (await h.events()).filter((e) => e.payload.transmission_id === bad.id);
    assert.deepEqual(events.map((e) => [e.type, e.payload.result_code]), [['failed', 'RENDER_FAILED']]);
    assert.ok(peer.attempts.every((m) => !m.to.includes('bad@render.test')));
    assert.match(receivedBy('good@render.test').toString('utf8'), /You ordered a pen\./);
    assert.match(receivedBy('also@render.test').toString('utf8'), /You ordered ink\./);
  });
});

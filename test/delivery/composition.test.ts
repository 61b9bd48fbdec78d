// What Posthorn composes, as a real SMTP server (smtp-server on 127.0.0.1) receives it: header lines
// within RFC 5322's 998 octets whatever their values, body parts whose every CR ends a line, and a
// copy that cannot be rendered with its recipient's variables failed at once while the message's
// other copies are delivered (docs/delivery.md, docs/api/send-message.md).
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { after, before, describe, it } from 'node:test';
import { simpleParser } from 'mailparser';
import { decodeWords } from '../helpers/mime.ts';
import { headerOf, startSmtpPeer, type SmtpPeer } from '../helpers/smtp-peers.ts';
import { startDeliveryHarness, type DeliveryHarness } from './harness.ts';

/** Whether python3 runs here (the check with Python's email package needs it). */
function hasPython(): boolean {
  return spawnSync('python3', ['-c', 'import email'], { stdio: 'ignore' }).status === 0;
}

type PythonReading = Record<'To' | 'From' | 'Cc' | 'Reply-To', Array<[string, string]> | null>;

/**
 * Each message's address headers as Python's email package reads them: with its default policy
 * (`modern`, display_name and addr_spec), and by getaddresses and decode_header (`decoded`, its
 * RFC 2047 decoder).
 */
async function readWithPython(messages: Buffer[]): Promise<Array<{ modern: PythonReading; decoded: PythonReading }>> {
  const script = `
import base64, email, json, re, sys
from email import policy
from email.header import decode_header, make_header
from email.utils import getaddresses
out = []
for raw in json.load(sys.stdin):
    data = base64.b64decode(raw)
    modern, legacy = email.message_from_bytes(data, policy=policy.default), email.message_from_bytes(data)
    entry = {'modern': {}, 'decoded': {}}
    for name in ['To', 'From', 'Cc', 'Reply-To']:
        entry['modern'][name] = [[a.display_name, a.addr_spec] for a in modern[name].addresses] if modern[name] is not None else None
        # Unfolded first (RFC 5322 2.2.3): this older parser ends a quoted string at a CR.
        values = [re.sub(r'\\r?\\n(?=[ \\t])', '', v) for v in legacy.get_all(name, [])]
        entry['decoded'][name] = [[str(make_header(decode_header(n))), a] for n, a in getaddresses(values)] if values else None
    out.append(entry)
json.dump(out, sys.stdout)
`;
  const child = spawn('python3', ['-c', script], { stdio: ['pipe', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  child.stdin.end(JSON.stringify(messages.map((m) => m.toString('base64'))));
  const [code] = (await once(child, 'close')) as [number];
  assert.equal(code, 0, stderr);
  return JSON.parse(stdout);
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

  // Display names that RFC 5322 readers misread unless written right: its specials (, ; : ( ) < > @
  // . [ ] " \) outside ASCII and in it (encoded-word-looking text aside: a name given as
  // encoded-words is passed on as such), and long ones: a long name with letters outside
  // ASCII among plain words, and one whose run of such letters is longer than one encoded-word may
  // be (RFC 2047: 75 characters), which must be several adjacent ones.
  const HOSTILE_NAMES = [
    'Smith, J\u00fcrgen', 'Team; Zo\u00eb', 'J\u00fcrgen (Support)', 'Dupont, H\u00e9l\u00e8ne', 'Sales <EU>', 'Zo\u00eb <EU>',
    'Smith, John', 'Team; Sales', 'Support (EU)', 'Re: billing', 'Re: Zo\u00eb', 'ops@night', 'ops@n\u00e4cht',
    'say "hi"', 'say "h\u00e9"', 'back\\slash', 'b\u00e4ck\\slash "q"', 'J. R. R. Tolkien', '[team] list', 'a:b;c,d(e)f<g>h@i.j[k]l"m\\n',
    "O'Brien & Sons", '(Support)', '\u00c9cole', '\u682a\u5f0f\u4f1a\u793e \u30c6\u30b9\u30c8',
    'Zo\u00eb \u{1F600} (fun)',
    'M\u00fcller-L\u00fcdenscheidt GmbH & Co. KG, Abteilung Kundenservice (Europa; S\u00fcd) "Team 2"',
    `Customer Support, Europe; Middle East & Africa (EMEA) <Sales> "Tier 2" ${'word '.repeat(40)}end`,
  ];
  /** A name whose run outside ASCII no single encoded-word can hold: adjacent encoded-words. */
  const SPLIT_NAME = '\u041e\u0431\u0449\u0435\u0441\u0442\u0432\u043e-\u0441-\u043e\u0433\u0440\u0430\u043d\u0438\u0447\u0435\u043d\u043d\u043e\u0439-\u043e\u0442\u0432\u0435\u0442\u0441\u0442\u0432\u0435\u043d\u043d\u043e\u0441\u0442\u044c\u044e';
  const quoted = (name: string) => `"${name.replace(/(["\\])/g, '\\$1')}"`;
  const hostileAddress = (i: number) => `n${i}@names.test`;
  const ccAddress = (i: number) => `cc${i}@names.test`;
  type Named = Array<[string, string]>;
  /** What each reader must find in every copy: [name, address] per address header. */
  const expectedHeaders = () => ({
    From: [[HOSTILE_NAMES[0], 'shop@posthorn.test']] as Named,
    'Reply-To': HOSTILE_NAMES.slice(0, 5).map((name, i): [string, string] => [name, `reply${i}@posthorn.test`]),
    Cc: [...HOSTILE_NAMES, SPLIT_NAME].map((name, i): [string, string] => [name, ccAddress(i)]),
  });

  it('display names with any character are written so that a reader gets back exactly the name and the address: To, Cc, From, Reply-To', async () => {
    const all = [...HOSTILE_NAMES, SPLIT_NAME];
    const expected = expectedHeaders();
    const recipients: Record<string, Record<string, string>> = {};
    all.forEach((name, i) => (recipients[`${quoted(name)} <${hostileAddress(i)}>`] = {}));
    // The forms of the report: quoted names with specials, a Cc of its own, angle brackets in a quoted name.
    await send('names-hostile', {
      recipients,
      headers: {
        from: `${quoted(expected.From[0][0])} <shop@posthorn.test>`,
        'reply-to': expected['Reply-To'].map(([name, address]) => `${quoted(name)} <${address}>`).join(', '),
        cc: expected.Cc.map(([name, address]) => `${quoted(name)} <${address}>`).join(', '),
        subject: 'Names',
      },
      content: { 'text/plain': 'body' },
    });
    await h.drain();
    const names = (field: unknown) => (field as { value: Array<{ name: string; address: string }> }).value.map((a) => [a.name, a.address]);
    for (let i = 0; i < all.length; i++) {
      const raw = receivedBy(hostileAddress(i));
      const head = raw.subarray(0, raw.indexOf('\r\n\r\n')).toString('latin1');
      for (const line of head.split('\r\n')) assert.ok(line.length <= 78, `a header line of ${line.length} characters: ${line.slice(0, 60)}...`);
      const parsed = await simpleParser(raw);
      assert.deepEqual(names(parsed.to), [[all[i], hostileAddress(i)]], headerOf(raw, 'to')!);
      assert.deepEqual(names(parsed.from), expected.From);
      assert.deepEqual(names(parsed.replyTo), expected['Reply-To']);
      assert.deepEqual(names(parsed.cc), expected.Cc);
    }
    // Every Cc address got its copy, with its own To line.
    for (let i = 0; i < all.length; i++) assert.deepEqual(names((await simpleParser(receivedBy(ccAddress(i)))).to), [[all[i], ccAddress(i)]]);
    // The report's To lines: one whole encoded-word each, nothing bare.
    assert.equal(headerOf(receivedBy(hostileAddress(0)), 'to'), '=?UTF-8?Q?Smith=2C_J=C3=BCrgen?= <n0@names.test>');
    assert.equal(headerOf(receivedBy(hostileAddress(4)), 'to'), '"Sales <EU>" <n4@names.test>');
  });

  it("Python's email reads the same names and addresses in those copies", { skip: hasPython() ? false : 'python3 is not installed' }, async () => {
    const all = [...HOSTILE_NAMES, SPLIT_NAME];
    const copies = all.map((_, i) => receivedBy(hostileAddress(i)));
    const read = await readWithPython(copies);
    const expected = expectedHeaders();
    // The email package's default policy reads a space into a name between adjacent encoded-words
    // (CPython issue 128110, against RFC 2047 6.2): the long name that needs them is checked with
    // its RFC 2047 decoder (decode_header) alone, and its address with both.
    const split = new Set([hostileAddress(all.length - 1), ccAddress(all.length - 1)]);
    const withoutSplit = (list: Array<[string, string]> | null) => list?.map(([name, address]) => (split.has(address) ? ['', address] : [name, address]));
    for (let i = 0; i < all.length; i++) {
      const want: PythonReading = { To: [[all[i], hostileAddress(i)]], ...expected };
      for (const header of Object.keys(want) as Array<keyof PythonReading>) {
        assert.deepEqual(read[i].decoded[header], want[header], `${header} of copy ${i}, decode_header`);
        assert.deepEqual(withoutSplit(read[i].modern[header]), withoutSplit(want[header]), `${header} of copy ${i}, policy.default`);
      }
    }
  });

  it("an attachment's part names its file once, in Content-Type and Content-Disposition, whatever name parameters content_type carried", async () => {
    const content = Buffer.from('attached').toString('base64');
    // content_type as clients send it: with the same name, a different one, filename (the Ruby
    // client's), in another case, in RFC 2231 parts, and with a charset that stays.
    const given: Record<string, string> = {
      'invoice.pdf': 'application/pdf; name=invoice.pdf',
      'report.csv': 'text/csv; name="other.csv"; header=present',
      'test.txt': 'text/plain; filename=test.txt; charset=iso-8859-1',
      'data.bin': 'application/octet-stream; NAME=x.bin; FileName="y.bin"',
      'parts.txt': "text/plain; name*0=pa; name*1*=utf-8''rts.txt; charset=utf-8",
      'plain.txt': 'text/plain; charset=utf-8',
    };
    await send('attachment-names', {
      recipients: ['files@attachments.test'],
      headers: { from: 'shop@posthorn.test', subject: 'Files' },
      content: { 'text/plain': 'see attached' },
      attachments: Object.fromEntries(Object.entries(given).map(([file, type]) => [file, { content_type: type, content }])),
    });
    await h.drain();
    const raw = receivedBy('files@attachments.test');
    const parsed = await simpleParser(raw);
    assert.deepEqual(parsed.attachments.map((a) => a.filename).sort(), Object.keys(given).sort());
    // Each part's header lines as received, unfolded: exactly one name parameter, the file's.
    const parts = raw.toString('utf8').split(/\r\n--[^\r\n]+\r\n/).slice(1);
    const heads = parts.map((part) => part.slice(0, part.indexOf('\r\n\r\n')).replace(/\r\n[ \t]+/g, ' '));
    for (const [file, type] of Object.entries(given)) {
      const head = heads.find((text) => new RegExp(`filename="?${file.replace('.', '\\.')}"?`).test(text));
      assert.ok(head, `the part of ${file}`);
      const contentType = /^Content-Type: (.*)$/im.exec(head)![1];
      assert.deepEqual(contentType.match(/(?:^|;)\s*(?:file)?name\*?[0-9]*\*?=/gi)?.length, 1, contentType);
      assert.match(contentType, new RegExp(`; name=${file.replace('.', '\\.')}$`), contentType);
      assert.deepEqual(/^Content-Disposition: (.*)$/im.exec(head)![1], `attachment; filename=${file}`);
      // The type and the other parameters, as given.
      assert.equal(contentType.split(';')[0], type.split(';')[0]);
      for (const kept of ['header=present', 'charset=iso-8859-1', 'charset=utf-8']) if (type.includes(kept)) assert.ok(contentType.includes(kept), `${kept} in ${contentType}`);
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

// domain/mime-build.ts writes a compiled MailComposer tree without Nodemailer's streams: its bytes
// must be exactly those of Nodemailer's own build() for every shape of message Posthorn composes
// (text, HTML, both, attachments of every length modulo 3, 7bit / quoted-printable / base64
// bodies, line endings of every kind, non-ASCII headers), and it must step aside for what only the
// streams can do.
import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { describe, it } from 'node:test';
import MailComposer from 'nodemailer/lib/mail-composer/index.js';
import MimeNode from 'nodemailer/lib/mime-node/index.js';
import mimeFuncs from 'nodemailer/lib/mime-funcs/index.js';
import qp from 'nodemailer/lib/qp/index.js';
import { decodeWords } from '../helpers/mime.ts';
import {
  buildMimeNow,
  compileMail,
  formatDisplayName,
  hasLongerLines,
  nodemailerEncodeAddressName,
  nodemailerHasLongerLines,
  nodemailerNormalizeAddress,
  nodemailerNormalizeHeaderKey,
  nodemailerParseAddresses,
  parseAddressHeader,
  quotedPrintable,
  wrapQuotedPrintable,
} from '../../src/domain/mime-build.ts';
import { composeMime } from '../../src/domain/compose-mime.ts';
import type { MessagePayload } from '../../src/domain/message-payload.ts';
import { prng } from '../helpers/prng.ts';

type Mail = ConstructorParameters<typeof MailComposer>[0] & { baseBoundary?: string; newline?: string };

/** Both builds of the same message (two trees: a tree is built once). */
async function bothBuilds(mail: Mail): Promise<{ direct: Buffer | null; streamed: Buffer }> {
  const fixed: Mail = { baseBoundary: 'f1xedb0undary', date: new Date(Date.UTC(2026, 10, 24, 9, 0, 0)), messageId: '<fixed@posthorn.test>', ...mail };
  const direct = buildMimeNow(new MailComposer(fixed).compile());
  const streamed = await new MailComposer(fixed).compile().build();
  return { direct, streamed };
}

async function assertSame(mail: Mail, label: string): Promise<void> {
  const { direct, streamed } = await bothBuilds(mail);
  assert.ok(direct, `${label}: built directly`);
  assert.equal(direct.toString('latin1'), streamed.toString('latin1'), label);
}

const PIECES = ['Hello', ' ', 'wörld', '\r\n', '\n', '\r', 'naïve café', '日本語のテキスト', '😀', '=', '.', '..', 'From ', '\t', 'x'.repeat(90), '<b>bold</b>', '&amp;', ' \r\n'];

function text(random: () => number, maxPieces: number): string {
  const n = Math.floor(random() * maxPieces);
  let out = '';
  for (let i = 0; i < n; i++) out += PIECES[Math.floor(random() * PIECES.length)];
  return out;
}

/** A random message of the shapes Posthorn composes, about `withAttachments` of them with one to three attachments. */
function randomMail(random: () => number, withAttachments: number): Mail {
  const mail: Mail = { from: `"${text(random, 3)}" <a@example.com>`, subject: text(random, 6) };
  if (random() < 0.8) mail.text = text(random, 40);
  if (random() < 0.6) mail.html = `<div>${text(random, 40)}</div>`;
  if (random() < 0.3) mail.textEncoding = random() < 0.5 ? 'base64' : 'quoted-printable';
  if (random() < 0.4) mail.headers = { 'X-Tag': text(random, 4), 'List-Unsubscribe': '<mailto:u@example.com>' };
  if (random() < withAttachments) {
    mail.attachments = Array.from({ length: 1 + Math.floor(random() * 3) }, (_, i) => ({
      filename: `${text(random, 2)}${i}.txt`,
      content: Buffer.from(text(random, 30)).toString('base64'),
      encoding: 'base64',
      contentType: random() < 0.5 ? 'text/plain' : 'application/octet-stream',
    }));
  }
  return mail;
}

describe('MIME built directly from the compiled tree', () => {
  it('equals Nodemailer build() for the common shapes', async () => {
    const lines = Array.from({ length: 16 }, (_, i) => `Line ${i} of the message body.`).join('\r\n');
    await assertSame({ from: 'a@example.com', subject: 'Plain', text: lines }, 'ASCII text, short lines (7bit)');
    await assertSame({ from: 'a@example.com', subject: 'Both', text: lines, html: `<p>${lines}</p>` }, 'text and HTML');
    await assertSame({ from: '"Zoë" <a@example.com>', subject: 'Ünïcode ✓ '.repeat(12), html: '<p>ünï</p>' }, 'HTML only, folded encoded subject');
    await assertSame({ from: 'a@example.com', text: 'y'.repeat(300) }, 'a long line (quoted-printable)');
    await assertSame({ from: 'a@example.com', text: '中文内容'.repeat(40), textEncoding: 'base64' }, 'base64 text');
    await assertSame({ from: 'a@example.com', text: 'ends with CR\r' }, 'text ending in CR');
    await assertSame({ from: 'a@example.com', text: 'ends with LF\n' }, 'text ending in LF');
    await assertSame({ from: 'a@example.com', text: '' }, 'empty text');
    await assertSame({ from: 'a@example.com', subject: 'No body' }, 'no body at all');
    await assertSame(
      { from: 'a@example.com', text: 'see attached', headers: { 'X-Campaign': 'nöel', 'x-lower-case': 'v' }, attachments: [{ filename: 'résumé.pdf', content: Buffer.from('%PDF-1.4 ...'), contentType: 'application/pdf' }] },
      'custom headers and an attachment',
    );
  });

  it('equals Nodemailer build() for attachments of every length modulo 3 and many random messages', async () => {
    for (let length = 0; length <= 200; length++) {
      const bytes = Buffer.alloc(length, 0);
      for (let i = 0; i < length; i++) bytes[i] = (i * 37 + length) & 0xff;
      await assertSame(
        { from: 'a@example.com', text: 'body', attachments: [{ filename: `f${length}.bin`, content: bytes.toString('base64'), encoding: 'base64' }] },
        `binary attachment of ${length} bytes`,
      );
    }
    const random = prng(20261124);
    for (let n = 0; n < 300; n++) await assertSame(randomMail(random, 0.4), `random message ${n} (seed 20261124)`);
  });

  it("builds MailComposer's tree itself for text, HTML or both: the same bytes, for the common shapes and many random messages", async () => {
    const same = async (mail: Mail, label: string) => {
      const fixed: Mail = { baseBoundary: 'f1xedb0undary', date: new Date(Date.UTC(2026, 10, 27, 9, 0, 0)), messageId: '<fixed@posthorn.test>', disableFileAccess: true, disableUrlAccess: true, ...mail };
      const composed = await new MailComposer(fixed).compile().build();
      const tree = compileMail(fixed);
      assert.equal(buildMimeNow(tree)?.toString('latin1'), composed.toString('latin1'), label);
    };
    const lines = Array.from({ length: 16 }, (_, i) => `Line ${i} of the message body.`).join('\r\n');
    await same({ from: 'a@example.com', subject: 'Plain', text: lines }, 'text');
    await same({ from: 'a@example.com', subject: 'Both', text: lines, html: `<p>${lines}</p>` }, 'text and HTML');
    await same({ from: '"Zoë" <a@example.com>', subject: 'Ünïcode ✓ '.repeat(12), html: '<p>ünï</p>' }, 'HTML only, folded encoded subject');
    await same({ from: 'a@example.com', text: '中文内容'.repeat(40), textEncoding: 'base64' }, 'base64 text');
    await same({ from: 'a@example.com', text: 'y'.repeat(300), textEncoding: 'quoted-printable' }, 'quoted-printable text');
    await same({ from: 'a@example.com', text: '', html: '<p>only</p>' }, 'empty text beside HTML');
    await same({ from: 'a@example.com', subject: 'No body' }, 'no body at all (MailComposer)');
    await same({ subject: 'no From', text: 'x', headers: { 'Reply-To': 'r@example.com', Cc: 'c@example.com', 'X-Campaign': 'nöel' } }, 'custom headers, no From');
    await same({ from: 'a@example.com', text: 'see attached', attachments: [{ filename: 'a.txt', content: 'YQ==', encoding: 'base64' }] }, 'an attachment (MailComposer)');
    const random = prng(20261127);
    for (let n = 0; n < 300; n++) await same(randomMail(random, 0.1), `random message ${n} (seed 20261127)`);
  });

  it('steps aside for streamed content, raw messages and user transforms', async () => {
    const streamed = new MailComposer({ from: 'a@example.com', text: 'x', attachments: [{ filename: 's.txt', content: Readable.from(['streamed']) }] }).compile();
    assert.equal(buildMimeNow(streamed), null);
    assert.equal(buildMimeNow(new MailComposer({ raw: 'Subject: raw\r\n\r\nbody\r\n' }).compile()), null);
    const transformed = new MailComposer({ from: 'a@example.com', text: 'x' }).compile();
    transformed.transform(new (await import('node:stream')).PassThrough());
    assert.equal(buildMimeNow(transformed), null);
    const unix: Mail = { from: 'a@example.com', text: 'x', newline: 'unix' };
    assert.equal(buildMimeNow(new MailComposer(unix).compile()), null);
  });

  it("memoises Nodemailer's header name normalisation without changing any name", () => {
    const node = new MimeNode('text/plain') as unknown as { _normalizeHeaderKey(key: unknown): string };
    assert.ok(nodemailerNormalizeHeaderKey, 'Nodemailer still has the method');
    assert.notEqual(node._normalizeHeaderKey, nodemailerNormalizeHeaderKey, 'the memoised version is installed');
    const names = ['content-type', 'Content-Type', 'MIME-VERSION', 'x-smtpapi', 'dkim-signature', 'arc-seal', 'bimi-selector', 'x-spf', 'x-fbl', 'message-id', 'content-md5', 'content-features', ' spaced \r\n name ', 'x-ünïcode', '', 'List-Unsubscribe-Post'];
    for (const name of [...names, ...names]) assert.equal(node._normalizeHeaderKey(name), nodemailerNormalizeHeaderKey!.call(node as never, name), name);
    for (const other of [undefined, null, 42]) assert.equal(node._normalizeHeaderKey(other), nodemailerNormalizeHeaderKey!.call(node as never, other));
  });

  it("memoises Nodemailer's address normalisation without changing any address", () => {
    const node = new MimeNode('text/plain') as unknown as { _normalizeAddress(address: unknown): string };
    assert.ok(nodemailerNormalizeAddress, 'Nodemailer still has the method');
    assert.notEqual(node._normalizeAddress, nodemailerNormalizeAddress, 'the memoised version is installed');
    const addresses = ['a@example.com', 'Sender@EXAMPLE.Com', 'j\u00f6rg@b\u00fccher.example', 'user name@example.com', '"quoted"@example.com', 'bare', '', 'a@', '@b', 'x\r\n<y>@z.example', `${'l'.repeat(300)}@example.com`];
    const original = (value: unknown) => nodemailerNormalizeAddress!.call(node as never, value);
    for (const address of [...addresses, ...addresses]) assert.equal(node._normalizeAddress(address), original(address), address);
    for (const other of [undefined, null, 42]) assert.equal(node._normalizeAddress(other), original(other));
  });

  it("memoises Nodemailer's address parsing: the same answers, and each caller's copy its own", () => {
    const node = new MimeNode('text/plain') as unknown as { _parseAddresses(value: unknown): Array<{ name: string; address?: string; group?: unknown[] }> };
    assert.ok(nodemailerParseAddresses, 'Nodemailer still has the method');
    assert.notEqual(node._parseAddresses, nodemailerParseAddresses, 'the memoised version is installed');
    const values = [
      'a@example.com', 'Bench Sender <sender@example.com>', '"Doe, Jane" <jane@example.com>, bob@example.org', 'team: a@x.example, B <b@y.example>;, c@z.example',
      '=?UTF-8?Q?J=C3=B6rg?= <j@example.com>', 'broken <unterminated', '', ' , ', 'Ünïcode Name <ü@exämple.com>', 'a@b.c (comment)',
      // longer than what is memoised: parsed each time, the same answer
      `${'Very Long Name '.repeat(30)}<long@example.com>, ${Array.from({ length: 40 }, (_, i) => `r${i}@example.org`).join(', ')}`,
    ];
    const original = (value: unknown) => nodemailerParseAddresses!.call(node as never, value);
    for (const value of [...values, ...values]) assert.deepEqual(node._parseAddresses(value), original(value), value);
    for (const other of [['a@b.c', 'd@e.f'], { address: 'A@B.C', name: 'x' }, undefined]) assert.deepEqual(node._parseAddresses(structuredClone(other)), original(structuredClone(other)));
    // MimeNode normalises the addresses it was given in place: that must not reach the next caller.
    const first = node._parseAddresses('team: a@x.example, B <b@y.example>;');
    first[0].name = 'changed';
    (first[0].group![0] as { address: string }).address = 'changed';
    assert.deepEqual(node._parseAddresses('team: a@x.example, B <b@y.example>;'), original('team: a@x.example, B <b@y.example>;'));
  });

  it("writes an address's display name with formatDisplayName: quoted or one encoded-word when short, encoded-words only where they must be", () => {
    const node = new MimeNode('text/plain') as unknown as { _encodeAddressName(name: string): string };
    assert.ok(nodemailerEncodeAddressName, 'Nodemailer still has the method');
    assert.notEqual(node._encodeAddressName, nodemailerEncodeAddressName, 'formatDisplayName is installed');
    const written: Array<[string, string]> = [
      ['', ''],
      ['Ann', 'Ann'],
      ['Ann Smith', 'Ann Smith'],
      ['Doe, Jane', '"Doe, Jane"'],
      ['say "hi" \\o/', '"say \\"hi\\" \\\\o/"'],
      ['Team: Sales;', '"Team: Sales;"'],
      ['Smith, J\u00fcrgen', '=?UTF-8?Q?Smith=2C_J=C3=BCrgen?='],
      ['\u682a\u5f0f\u4f1a\u793e', '=?UTF-8?B?5qCq5byP5Lya56S+?='],
      // Longer than one encoded-word: the plain words between as a quoted string.
      ['M\u00fcller-L\u00fcdenscheidt GmbH & Co. KG, Abteilung Kundenservice', '=?UTF-8?B?TcO8bGxlci1Mw7xkZW5zY2hlaWR0?= "GmbH & Co. KG, Abteilung Kundenservice"'],
    ];
    for (const [name, expected] of written) {
      assert.equal(node._encodeAddressName(name), expected, name);
      assert.equal(formatDisplayName(name, 10), expected, name);
    }
    // Names that fit a line, folded at their spaces where long: plain or quoted, never encoded.
    for (const name of ['x'.repeat(987), `${'y'.repeat(900)} ${'z'.repeat(900)}`, `"${'w'.repeat(900)}" ${'v'.repeat(900)}`]) {
      assert.doesNotMatch(node._encodeAddressName(name), /=\?/, name.slice(0, 40));
    }
    // A run one longer than what fits after "Reply-To: " and the quote marks, plain, quoted or not
    // ASCII; and a run outside ASCII longer than one encoded-word may be.
    for (const name of ['x'.repeat(989), `a.${'x'.repeat(1200)}`, `${'\\"'.repeat(330)}`, `Zo\u00eb${'z'.repeat(1200)}`, '\u0436'.repeat(40)]) {
      const words = node._encodeAddressName(name);
      assert.match(words, /^=\?UTF-8\?[QB]\?/, name.slice(0, 40));
      assert.ok(words.split(' ').every((word) => word.length <= 75), 'encoded-words of at most 75 characters, which a fold can separate');
      assert.equal(decodeWords(words), name);
    }
  });

  it('names the first address of the From header, groups flattened, as the DKIM key lookup needs it', async () => {
    const payload = (from: string) => ({ v: 1, from, subject: 's', text: 'x', html: null, headers: {}, messageId: '<m@x>' }) as unknown as MessagePayload;
    for (const [from, expected] of [
      ['Bench Sender <sender@example.com>', 'sender@example.com'],
      ['"Doe, Jane" <jane@example.com>, bob@example.org', 'jane@example.com'],
      ['team: a@x.example, B <b@y.example>;', 'a@x.example'],
      ['team: a@x.example;', 'a@x.example'],
    ] as const) {
      for (let twice = 0; twice < 2; twice++) assert.equal((await composeMime(payload(from), {}, { date: new Date(0) })).fromAddress, expected, from);
    }
    assert.deepEqual(parseAddressHeader('team: a@x.example;'), [{ name: 'team', group: [{ address: 'a@x.example', name: '' }] }]);
  });

  it("encodes quoted-printable as Nodemailer's encoder does, byte for byte", () => {
    const random = prng(20261130);
    // Bytes of every kind, with more of those the encoder treats apart: "=", tab, space, CR, LF.
    const special = [0x3d, 0x09, 0x20, 0x0d, 0x0a, 0x2e, 0x7e, 0x7f, 0x3c, 0x3e];
    const cases = [Buffer.alloc(0), Buffer.from(' '), Buffer.from('\t'), Buffer.from('a \r\nb\t\nc  '), Buffer.from('x=y\u00e9 \u2014 \u20ac', 'utf8'), Buffer.from(Array.from({ length: 256 }, (_, i) => i))];
    for (let n = 0; n < 5000; n++) {
      const bytes = Buffer.alloc(Math.floor(random() * 48));
      for (let i = 0; i < bytes.length; i++) bytes[i] = random() < 0.4 ? special[Math.floor(random() * special.length)] : Math.floor(random() * 256);
      cases.push(bytes);
    }
    for (const bytes of cases) assert.equal(quotedPrintable(bytes), qp.encode(bytes), JSON.stringify([...bytes]));
  });

  it("wraps quoted-printable into the same lines as Nodemailer's wrap", () => {
    const random = prng(20261131);
    // What wrapping decides by: line breaks, the spaces and marks it breaks after, escapes of
    // ASCII, of UTF-8 sequences' first and continuation bytes, and long runs without any of them.
    const pieces = ['a', 'word ', 'x'.repeat(30), 'y'.repeat(80), '.', ',', '!', '?', '\t', ' ', '\n', '\r\n', '\r', '=', '\u00e9', '\u20ac', '\u{1f600}', '\u0000'];
    const cases = ['', 'short', 'x'.repeat(76), 'x'.repeat(77), `${'x'.repeat(74)}\u00e9\u00e9tail`, `${'=\u20ac'.repeat(40)}`];
    for (let n = 0; n < 4000; n++) cases.push(Array.from({ length: 1 + Math.floor(random() * 40) }, () => pieces[Math.floor(random() * pieces.length)]).join(''));
    const inputs = cases.map((text) => Buffer.from(text, 'utf8'));
    // Bytes that are not UTF-8 too (a lead byte without its continuation, 0xC0 and above alone).
    for (let n = 0; n < 2000; n++) inputs.push(Buffer.from(Array.from({ length: Math.floor(random() * 200) }, () => (random() < 0.5 ? 0x61 : Math.floor(random() * 256)))));
    for (const bytes of inputs) {
      const encoded = quotedPrintable(bytes);
      for (const length of [76, 20]) assert.equal(wrapQuotedPrintable(encoded, length), qp.wrap(encoded, length), JSON.stringify({ bytes: [...bytes], length }));
    }
  });

  it("answers Nodemailer's long-line test as its RegExp does, for every kind of line end", () => {
    assert.ok(nodemailerHasLongerLines, 'Nodemailer still has the function');
    assert.equal(mimeFuncs.hasLongerLines, hasLongerLines, 'the one-pass version is installed');
    const random = prng(77);
    const pieces = ['a', 'é', '😀', ' ', '\n', '\r', '\r\n', '\u2028', '\u2029', '\t', 'x'.repeat(70), 'y'.repeat(76), 'z'.repeat(77)];
    const cases = ['', 'x'.repeat(76), 'x'.repeat(77), `${'x'.repeat(76)}\n`, `\n${'x'.repeat(77)}`, `${'x'.repeat(77)}\r`, `a\u2028${'x'.repeat(77)}`, `${'😀'.repeat(38)}a`, 'x'.repeat(128 * 1024 + 1)];
    for (let n = 0; n < 3000; n++) cases.push(Array.from({ length: 1 + Math.floor(random() * 12) }, () => pieces[Math.floor(random() * pieces.length)]).join(''));
    for (const text of cases) {
      for (const length of [76, 10, 0]) assert.equal(hasLongerLines(text, length), nodemailerHasLongerLines!(text, length), JSON.stringify({ text: text.slice(0, 200), length }));
    }
  });
});

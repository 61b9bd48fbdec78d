// The HTML parts of finished MIME rewritten, the rest kept byte for byte (src/domain/rewrite-html-parts.ts):
// messages as Nodemailer writes them (quoted-printable, base64) and as other senders do (8bit,
// ISO-8859-1, nested multipart/mixed > alternative > related with an HTML attachment), each
// result decoded again by mailparser, an independent reader.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { simpleParser } from 'mailparser';
import MailComposer from 'nodemailer/lib/mail-composer/index.js';
import { applyTracking } from '../../src/delivery/tracking.ts';
import { rewriteHtmlParts } from '../../src/domain/rewrite-html-parts.ts';
import { readTrackingToken } from '../../src/domain/tracking-token.ts';

/** A rewrite with a visible result: links to shop.example go through t.example, a pixel before </body>. */
function mark(html: string): string {
  return html.replace(/href="https:\/\/shop\.example\/([^"]*)"/g, 'href="https://t.example/c/$1"').replace(/<\/body>/i, '<img src="https://t.example/o.gif"></body>');
}

function crlf(...lines: string[]): string {
  return lines.join('\r\n');
}

async function compose(options: ConstructorParameters<typeof MailComposer>[0]): Promise<Buffer> {
  return new MailComposer({ from: 'a@example.test', to: 'b@example.test', subject: 'rewrite', messageId: '<m@example.test>', date: new Date(0), ...options }).compile().build();
}

async function parse(mime: Buffer) {
  return simpleParser(mime, { skipHtmlToText: true, skipTextToHtml: true, skipImageLinks: true, skipTextLinks: true });
}

/** The body of the first text/html part of a CRLF message: to the next boundary line of any multipart of the message. */
function htmlBodyRange(mime: Buffer): { start: number; end: number } {
  const text = mime.toString('latin1');
  const header = text.search(/Content-Type: text\/html/i);
  assert.ok(header >= 0, 'the fixture has an HTML part');
  const start = text.indexOf('\r\n\r\n', header) + 4;
  const boundaries = [...text.matchAll(/boundary="?([^";\r\n]+)"?/gi)].map((m) => m[1]);
  const ends = boundaries.map((b) => text.indexOf(`\r\n--${b}`, start)).filter((i) => i !== -1);
  return { start, end: ends.length > 0 ? Math.min(...ends) : text.length };
}

/** Line breaks as mailparser gives them back (LF). */
function lf(text: string): string {
  return text.replace(/\r?\n/g, '\n');
}

/** Everything but the HTML body is the same bytes, in the same places. */
function assertOnlyHtmlBodyChanged(before: Buffer, after: Buffer): void {
  const { start, end } = htmlBodyRange(before);
  assert.ok(after.subarray(0, start).equals(before.subarray(0, start)), 'the bytes before the HTML body are unchanged');
  const tail = before.subarray(end);
  assert.ok(after.subarray(after.length - tail.length).equals(tail), 'the bytes after the HTML body are unchanged');
}

function assertCrlfOnly(mime: Buffer): void {
  for (let i = mime.indexOf(0x0a); i !== -1; i = mime.indexOf(0x0a, i + 1)) assert.equal(mime[i - 1], 0x0d, `bare LF at ${i}`);
  for (let i = mime.indexOf(0x0d); i !== -1; i = mime.indexOf(0x0d, i + 1)) assert.equal(mime[i + 1], 0x0a, `bare CR at ${i}`);
}

function longestLine(mime: Buffer, start = 0, end = mime.length): number {
  return Math.max(...mime.toString('latin1', start, end).split(/\r?\n/).map((l) => l.length));
}

const HTML = '<html><body><p>Grüße, your order is ready. ' + 'Some words to make this a line longer than seventy-six characters. '.repeat(3) + '</p><a href="https://shop.example/orders/7?x=1&amp;y=2">see it</a></body></html>';
const TEXT = 'Grüße, your order is ready: https://shop.example/orders/7';

describe('rewriteHtmlParts', () => {
  it('quoted-printable HTML in multipart/alternative as Nodemailer writes it: only the HTML body changes, re-encoded as quoted-printable', async () => {
    const mime = await compose({ text: TEXT, html: HTML, textEncoding: 'quoted-printable' });
    assert.match(mime.toString(), /Content-Transfer-Encoding: quoted-printable/);
    const out = rewriteHtmlParts(mime, mark);
    assertOnlyHtmlBodyChanged(mime, out);
    assertCrlfOnly(out);
    const range = htmlBodyRange(out);
    assert.ok(longestLine(out, range.start, range.end) <= 76, 'quoted-printable lines of at most 76 characters');
    const [was, is] = [await parse(mime), await parse(out)];
    assert.equal(is.html, mark(was.html as string));
    assert.notEqual(is.html, was.html);
    assert.equal(is.text, was.text);
    assert.equal(is.text?.trim(), TEXT);
  });

  it('base64 HTML stays base64, in lines of 76', async () => {
    const mime = await compose({ text: TEXT, html: HTML, textEncoding: 'base64' });
    assert.match(mime.toString(), /Content-Transfer-Encoding: base64/);
    const out = rewriteHtmlParts(mime, mark);
    assertOnlyHtmlBodyChanged(mime, out);
    assertCrlfOnly(out);
    const range = htmlBodyRange(out);
    const body = out.toString('latin1', range.start, range.end);
    assert.match(body, /^[A-Za-z0-9+/=\r\n]+$/);
    assert.ok(!body.endsWith('\n'), 'no line break added before the boundary line');
    assert.ok(longestLine(out, range.start, range.end) <= 76);
    const [was, is] = [await parse(mime), await parse(out)];
    assert.equal(is.html, mark(was.html as string));
    assert.equal(is.text, was.text);
    // A body that ends with a line break before the boundary line keeps it.
    const html = Buffer.from(mark('<html><body><a href="https://shop.example/b">b</a></body></html>')).toString('base64');
    const spaced = Buffer.from(
      crlf('Content-Type: multipart/alternative; boundary=b64', '', '--b64', 'Content-Type: text/html; charset=utf-8', 'Content-Transfer-Encoding: base64', '', Buffer.from('<html><body><a href="https://shop.example/b">b</a></body></html>').toString('base64'), '', '--b64--', ''),
    );
    const kept = rewriteHtmlParts(spaced, mark).toString('latin1');
    assert.equal(kept, crlf('Content-Type: multipart/alternative; boundary=b64', '', '--b64', 'Content-Type: text/html; charset=utf-8', 'Content-Transfer-Encoding: base64', '', html.slice(0, 76), html.slice(76), '', '--b64--', ''));
  });

  it('an 8bit UTF-8 part with short lines stays 8bit: its body is the rewritten HTML, and a part that does not end in a newline does not get one', () => {
    const html = '<html><body>\r\n<p>Grüße</p>\r\n<a href="https://shop.example/a">a</a>\r\n</body></html>';
    const head = crlf('From: a@example.test', 'To: b@example.test', 'Subject: 8bit', 'MIME-Version: 1.0', 'Content-Type: text/html; charset=utf-8', 'Content-Transfer-Encoding: 8bit', '', '');
    const mime = Buffer.from(head + html, 'utf8');
    const out = rewriteHtmlParts(mime, mark);
    assert.equal(out.toString('utf8'), head + mark(html));
    assert.ok(!out.toString('utf8').endsWith('\r\n'));
    // And with a final line break, that one stays.
    const withBreak = Buffer.from(head + html + '\r\n', 'utf8');
    assert.equal(rewriteHtmlParts(withBreak, mark).toString('utf8'), head + mark(html) + '\r\n');
  });

  it('an 8bit part whose rewritten line would pass 998 octets becomes quoted-printable, and its header says so', async () => {
    const html = `<html><body><p>${'é'.repeat(440)}</p><a href="https://shop.example/long">x</a></body></html>`; // one line of 950 octets
    const long = (h: string) => h.replace('</body>', `<img src="https://t.example/${'p'.repeat(100)}.gif"></body>`);
    const mime = Buffer.from(
      crlf('From: a@example.test', 'Subject: long', 'MIME-Version: 1.0', 'Content-Type: text/html; charset=utf-8', 'Content-Transfer-Encoding: 8bit', 'X-After: kept', '', html, ''),
      'utf8',
    );
    assert.ok(Buffer.byteLength(html) < 998 && Buffer.byteLength(long(html)) > 998);
    const out = rewriteHtmlParts(mime, long);
    const text = out.toString('latin1');
    assert.ok(text.startsWith(crlf('From: a@example.test', 'Subject: long', 'MIME-Version: 1.0', 'Content-Type: text/html; charset=utf-8', 'Content-Transfer-Encoding: quoted-printable', 'X-After: kept', '', '')));
    assert.ok(longestLine(out) <= 76);
    assertCrlfOnly(out);
    assert.equal((await parse(out)).html, lf(long(html) + '\r\n'));
    // 7bit without a Content-Transfer-Encoding field: the field is added at the end of the header.
    const ascii = `<html><body><p>${'a'.repeat(950)}</p></body></html>`;
    const bare = Buffer.from(crlf('From: a@example.test', 'Content-Type: text/html', '', ascii), 'utf8');
    const added = rewriteHtmlParts(bare, long);
    assert.ok(added.toString('latin1').startsWith(crlf('From: a@example.test', 'Content-Type: text/html', 'Content-Transfer-Encoding: quoted-printable', '', '')));
    assert.equal((await parse(added)).html, long(ascii));
  });

  it('honours an ISO-8859-1 charset: decoded and encoded again in ISO-8859-1, quoted-printable and 8bit alike', async () => {
    const html = '<html><body><p>Grüße aus Köln</p><a href="https://shop.example/k">k</a></body></html>';
    const latin1 = Buffer.from(html, 'latin1');
    const qp = Buffer.from(
      crlf('From: a@example.test', 'MIME-Version: 1.0', 'Content-Type: text/html; charset="ISO-8859-1"', 'Content-Transfer-Encoding: quoted-printable', '', '<html><body><p>Gr=FC=DFe aus K=F6ln</p><a href=3D"https://shop.example/k">k</a></body></html>', ''),
      'latin1',
    );
    const out = rewriteHtmlParts(qp, mark);
    const body = out.toString('latin1').split('\r\n\r\n')[1];
    assert.match(body, /Gr=FC=DFe aus K=F6ln/, 'the same charset, not UTF-8');
    assert.doesNotMatch(body, /=C3/);
    assert.equal((await parse(out)).html, lf(mark(html) + '\r\n'));

    const eight = Buffer.concat([Buffer.from(crlf('From: a@example.test', 'MIME-Version: 1.0', 'Content-Type: text/html; charset=iso-8859-1', 'Content-Transfer-Encoding: 8bit', '', ''), 'latin1'), latin1]);
    const out8 = rewriteHtmlParts(eight, mark);
    assert.ok(out8.subarray(out8.length - Buffer.byteLength(mark(html), 'latin1')).equals(Buffer.from(mark(html), 'latin1')));
    assert.equal((await parse(out8)).html, mark(html));
  });

  it('finds the HTML of mixed > alternative > related, and leaves the text, the image, the HTML attachment, the preamble and the epilogue as they are', async () => {
    const nested = Buffer.from(
      crlf(
        'From: a@example.test',
        'To: b@example.test',
        'Subject: nested',
        'MIME-Version: 1.0',
        'Content-Type: multipart/mixed; boundary="mixed-b"',
        '',
        'This is a multi-part message in MIME format.',
        '--mixed-b',
        'Content-Type: multipart/alternative;',
        ' boundary=alt-b',
        '',
        '--alt-b',
        'Content-Type: text/plain; charset=utf-8',
        'Content-Transfer-Encoding: 7bit',
        '',
        'See https://shop.example/orders/7',
        '--alt-b',
        'Content-Type: multipart/related; boundary="rel-b"; type="text/html"',
        '',
        '--rel-b',
        'Content-Type: text/html; charset=utf-8',
        'Content-Transfer-Encoding: quoted-printable',
        '',
        '<html><body><a href=3D"https://shop.example/orders/7">order</a><img src=3D"cid:=',
        'logo@x"></body></html>',
        '--rel-b',
        'Content-Type: image/png',
        'Content-Transfer-Encoding: base64',
        'Content-ID: <logo@x>',
        '',
        'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==',
        '--rel-b--',
        '',
        '--alt-b--',
        '--mixed-b',
        'Content-Type: text/html; charset=utf-8; name=invoice.html',
        'Content-Disposition: attachment; filename=invoice.html',
        'Content-Transfer-Encoding: 7bit',
        '',
        '<html><body><a href="https://shop.example/invoice">invoice</a></body></html>',
        '--mixed-b--',
        'epilogue',
        '',
      ),
      'utf8',
    );
    const key = 'unit-test-key';
    const out = rewriteHtmlParts(nested, (html) => applyTracking(html, { transmissionId: 77, publicUrl: 'https://track.example' }, key));
    assertOnlyHtmlBodyChanged(nested, out);
    assertCrlfOnly(out);
    const parsed = await parse(out);
    const link = /href="https:\/\/track\.example\/t\/c\/([\w-]+\.[\w-]+)"/.exec(parsed.html as string);
    assert.ok(link, parsed.html as string);
    assert.deepEqual(readTrackingToken('click', link[1], key), { kind: 'click', transmissionId: 77, url: 'https://shop.example/orders/7' });
    assert.match(parsed.html as string, /<img src="cid:logo@x">/);
    assert.match(parsed.html as string, /https:\/\/track\.example\/t\/o\/[\w-]+\.[\w-]+\.gif/);
    assert.equal(parsed.text?.trim(), 'See https://shop.example/orders/7');
    const invoice = parsed.attachments.find((a) => a.filename === 'invoice.html');
    assert.equal(invoice?.content.toString(), '<html><body><a href="https://shop.example/invoice">invoice</a></body></html>');
    assert.ok(out.toString().endsWith('--mixed-b--\r\nepilogue\r\n'));
  });

  it('returns the very same Buffer when there is nothing to rewrite', async () => {
    const plain = await compose({ text: TEXT });
    assert.equal(rewriteHtmlParts(plain, mark), plain, 'text/plain only');
    const noType = Buffer.from(crlf('From: a@example.test', 'Subject: no MIME', '', '<a href="https://shop.example/x">x</a>', ''));
    assert.equal(rewriteHtmlParts(noType, mark), noType, 'no Content-Type: text/plain');
    const attachmentOnly = await compose({ text: TEXT, attachments: [{ filename: 'page.html', contentType: 'text/html', content: HTML }] });
    assert.match(attachmentOnly.toString(), /Content-Disposition: attachment; filename=page\.html/);
    assert.equal(rewriteHtmlParts(attachmentOnly, mark), attachmentOnly, 'an HTML attachment is content');
    const forwarded = await compose({ text: 'forwarded', attachments: [{ contentType: 'message/rfc822', content: await compose({ html: HTML }), contentDisposition: 'inline' }] });
    assert.equal(rewriteHtmlParts(forwarded, mark), forwarded, 'an attached message is content');
    const headersOnly = Buffer.from(crlf('From: a@example.test', 'Content-Type: text/html', ''));
    assert.equal(rewriteHtmlParts(headersOnly, mark), headersOnly, 'no body');
  });

  it('leaves an HTML part alone when rewriting it could change more than its HTML', () => {
    const single = (contentType: string, encoding: string, body: Buffer) =>
      Buffer.concat([Buffer.from(crlf('From: a@example.test', `Content-Type: ${contentType}`, `Content-Transfer-Encoding: ${encoding}`, '', ''), 'latin1'), body]);
    const cases = {
      'an unknown charset': single('text/html; charset=x-unknown', '8bit', Buffer.from('<a href="https://shop.example/">x</a>')),
      'invalid UTF-8': single('text/html; charset=utf-8', '8bit', Buffer.from([0x3c, 0x70, 0x3e, 0xff, 0xfe, 0x3c, 0x2f, 0x70, 0x3e])),
      '8-bit bytes in a us-ascii part': single('text/html; charset=us-ascii', '8bit', Buffer.from('<p>Gr\u00fc\u00dfe</p></body>', 'latin1')),
      'a transfer encoding it does not know': single('text/html', 'x-uuencode', Buffer.from('begin 644 x\r\n`\r\nend\r\n')),
    };
    for (const [name, mime] of Object.entries(cases)) assert.equal(rewriteHtmlParts(mime, mark), mime, name);
    // A rewrite that would put a boundary line of the enclosing multipart into the part.
    const multipart = Buffer.from(
      crlf('Content-Type: multipart/alternative; boundary=b1', '', '--b1', 'Content-Type: text/html', 'Content-Transfer-Encoding: 8bit', '', '<p>x</p>', '--b1--', ''),
    );
    assert.equal(
      rewriteHtmlParts(multipart, (html) => html.replace('<p>', '<p>\r\n--b1\r\n')),
      multipart,
    );
    assert.notEqual(rewriteHtmlParts(multipart, (html) => html + '<i></i>'), multipart, 'the same part is rewritten otherwise');
  });

  it('reads the preamble and epilogue as text, encodes a lone CR or LF of the HTML, and adds no line break after base64 lines of exactly 76', async () => {
    const mime = Buffer.from(
      crlf(
        'Content-Type: multipart/alternative; boundary=e',
        '',
        'Content-Type: text/html',
        '',
        '<p>a preamble shaped like a part</p>',
        '--e',
        'Content-Type: text/html; charset=utf-8',
        'Content-Transfer-Encoding: quoted-printable',
        '',
        '<p>a=0Ab=0Dc</p></body>',
        '--e--',
        'Content-Type: text/html',
        '',
        '<p>an epilogue shaped like a part</p></body>',
        '',
      ),
    );
    const out = rewriteHtmlParts(mime, mark);
    assertCrlfOnly(out);
    const text = out.toString('latin1');
    assert.ok(text.startsWith(crlf('Content-Type: multipart/alternative; boundary=e', '', 'Content-Type: text/html', '', '<p>a preamble shaped like a part</p>', '--e', '')));
    assert.ok(text.endsWith(crlf('--e--', 'Content-Type: text/html', '', '<p>an epilogue shaped like a part</p></body>', '')));
    assert.match(text, /<p>a=0Ab=0Dc<\/p><img src=3D"https:\/\/t\.example\/o\.gif"><\/body>\r\n--e--/);

    const fixed = 'x'.repeat(114); // 152 characters of base64: two full lines
    const b64 = Buffer.from(crlf('Content-Type: text/html', 'Content-Transfer-Encoding: base64', '', Buffer.from('<p>x</p>').toString('base64')));
    const encoded = Buffer.from(fixed).toString('base64');
    assert.equal(rewriteHtmlParts(b64, () => fixed).toString('latin1'), crlf('Content-Type: text/html', 'Content-Transfer-Encoding: base64', '', encoded.slice(0, 76), encoded.slice(76)));
  });

  it('keeps LF line breaks in a message written with LF', async () => {
    const mime = Buffer.from(
      ['Content-Type: multipart/alternative; boundary=lf', '', '--lf', 'Content-Type: text/html; charset=utf-8', 'Content-Transfer-Encoding: quoted-printable', '', `<p>${'word '.repeat(40)}</p><a href=3D"https://shop.example/lf">lf</a></body>`, '--lf--', ''].join('\n'),
    );
    const out = rewriteHtmlParts(mime, mark);
    assert.ok(!out.includes(0x0d), 'no CR added');
    assert.notEqual(out.toString(), mime.toString());
    assert.ok(longestLine(out) <= 76);
    assert.match((await parse(out)).html as string, /href="https:\/\/t\.example\/c\/lf"/);
  });

  it('for any HTML, charset and transfer encoding, the HTML read back is the rewritten HTML and the rest is unchanged', async () => {
    const pieces = ['a', 'Z', ' ', '\t', '<', '>', '=', '.', '-', '"', '\r\n', 'é', 'ü', '€', '日本', '𝄞', '<a href="https://shop.example/p?q=1">p</a>', '</body>', 'x'.repeat(120)];
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.constantFrom(...pieces), { minLength: 1, maxLength: 60 }).map((a) => a.join('')),
        fc.constantFrom('quoted-printable' as const, 'base64' as const),
        async (html, textEncoding) => {
          const mime = await compose({ text: 'text part', html, textEncoding, attachments: [{ filename: 'a.bin', content: Buffer.from([0, 1, 2, 255]) }] });
          const out = rewriteHtmlParts(mime, mark);
          assertOnlyHtmlBodyChanged(mime, out);
          assertCrlfOnly(out);
          const expected = await compose({ text: 'text part', html: mark(html), textEncoding, attachments: [{ filename: 'a.bin', content: Buffer.from([0, 1, 2, 255]) }] });
          const [is, should] = [await parse(out), await parse(expected)];
          assert.equal(is.html, should.html);
          assert.equal(is.text, should.text);
          assert.deepEqual(is.attachments.map((a) => a.content), should.attachments.map((a) => a.content));
        },
      ),
      { numRuns: 60 },
    );
  });
});

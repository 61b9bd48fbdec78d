// The content of a message submitted over SMTP, as the message views show it (docs/dashboard.md,
// "One message"; docs/smtp-submission.md, "Like an API message"): Nodemailer submits to the
// listener, delivery sends into an smtp-server sink on loopback, and get_message_content (the real
// HTTP API) and the dashboard's message page (over HTTP, signed in) show the text, the HTML as the
// sender wrote it (inert, in the sandboxed frame), the attachments, the header fields and the
// Message-ID that was delivered.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import nodemailer from 'nodemailer';
import { headerOf } from '../helpers/smtp-peers.ts';
import { SessionClient, signedInClient } from '../dashboard/session-client.ts';
import { mimeMessage, startSubmissionHarness, type SubmissionHarness } from './harness.ts';

const SCRIPT = '<script>alert(1)</script>';
const TEXT = 'Your order has shipped.\nThank you, <b>reader</b>.';
const HTML = `<p>Track it <a href="https://shop.example/track/77">here</a>.</p>${SCRIPT}`;
const INVOICE = randomBytes(1234);

describe('the content of a message submitted over SMTP', () => {
  let h: SubmissionHarness;
  let client: SessionClient;

  before(async () => {
    h = await startSubmissionHarness();
    ({ client } = await signedInClient(h.t, h.seed.accountUid));
  });
  after(async () => {
    await h?.close();
  });

  async function submit(mail: nodemailer.SendMailOptions): Promise<number> {
    const t = h.client();
    try {
      const info = await t.sendMail(mail);
      return Number(/queued as (\d+)/.exec(info.response)![1]);
    } finally {
      t.close();
    }
  }

  /** The one copy the sink received for `recipient`, waited for (bounded). */
  async function delivered(before: number, recipient: string): Promise<Buffer> {
    await h.sink.waitForReceived(before + 1, 20_000);
    const mail = h.sink.received.slice(before).find((m) => m.to.includes(recipient));
    assert.ok(mail, `a copy for ${recipient}`);
    return mail.raw;
  }

  async function content(uid: string) {
    const r = await h.t.call('get_message_content', { api_key: h.seed.projectKey, uid });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    return r.body.data.message;
  }

  let shopId: number;

  it('get_message_content answers the text, the HTML as submitted (not the tracked copy), the attachment, the header fields and the sender\'s Message-ID', async () => {
    const before = h.sink.received.length;
    shopId = await submit({
      from: 'Shöp Team <shop@example.test>',
      to: 'reader@example.test',
      subject: 'Order ☃ 77 shipped',
      text: TEXT,
      html: HTML,
      messageId: '<order-77@shop.example>',
      attachments: [{ filename: 'invoice.pdf', contentType: 'application/pdf', content: INVOICE }],
      headers: { 'X-Posthorn-Uid': 'content-shop-77', 'X-Posthorn-Tracking': 'on', 'X-Order': '77' },
    });
    const copy = await delivered(before, 'reader@example.test');
    assert.equal(headerOf(copy, 'message-id'), '<order-77@shop.example>');
    assert.match(copy.toString('utf8'), /\/t\/c\//, 'the delivered copy has its links tracked');

    const m = await content('content-shop-77');
    assert.equal(m.uid, 'content-shop-77');
    assert.equal(m.recipient, 'reader@example.test');
    assert.equal(m.subject, 'Order ☃ 77 shipped');
    assert.match(m.from, /Shöp Team/);
    assert.match(m.from, /<shop@example\.test>/);
    assert.equal(m.text, TEXT);
    assert.equal(m.html, HTML, 'the HTML the sender wrote, without the tracking of the delivered copy');
    assert.deepEqual(m.attachments, [{ filename: 'invoice.pdf', content_type: 'application/pdf', size: INVOICE.length }]);
    assert.equal(m.headers['Message-ID'], '<order-77@shop.example>');
    assert.equal(m.headers['X-Order'], '77');
    assert.equal(m.headers.To, 'reader@example.test');
    assert.equal(m.headers.From, undefined, 'From and Subject have fields of their own');
    assert.equal(m.headers['X-Posthorn-Uid'], undefined, 'the uid header was removed at acceptance');
  });

  it('the dashboard\'s message page shows the same, the HTML only in the sandboxed frame, its script inert', async () => {
    const page = await client.get(`/messages/${shopId}`);
    assert.equal(page.status, 200);
    assert.match(page.text, /<dt>Message-ID<\/dt><dd><code><bdi>&lt;order-77@shop\.example&gt;<\/bdi><\/code><\/dd>/);
    assert.ok(page.text.includes('Order ☃ 77 shipped'));
    assert.ok(page.text.includes('Shöp Team'));
    assert.ok(page.text.includes('Your order has shipped.\nThank you, &lt;b&gt;reader&lt;/b&gt;.'), 'the text part, escaped');
    assert.match(page.text, /<span class="filename"><bdi>invoice\.pdf<\/bdi><\/span> <small><bdi>application\/pdf<\/bdi>, 1234 bytes<\/small>/);
    assert.match(page.text, /<dt><bdi>X-Order<\/bdi><\/dt><dd><bdi>77<\/bdi><\/dd>/);
    assert.ok(!page.text.includes(SCRIPT), 'the markup never reaches the page itself');
    assert.match(page.text, new RegExp(`<iframe[^>]* sandbox src="/messages/${shopId}/html"`));

    const frame = await client.get(`/messages/${shopId}/html`);
    assert.equal(frame.status, 200);
    assert.equal(frame.text, HTML);
    const csp = frame.headers.get('content-security-policy') ?? '';
    assert.match(csp, /^sandbox;/);
    assert.match(csp, /default-src 'none'/);
    assert.doesNotMatch(csp, /script-src/, 'nothing may run in the frame');
  });

  it('without a Message-ID of its own, shows the one added at acceptance, exactly as delivered', async () => {
    const uid = 'content no id 1';
    const before = h.sink.received.length;
    const id = await submit({
      envelope: { from: 'shop@example.test', to: ['plain@example.test'] },
      raw: mimeMessage({ From: 'shop@example.test', To: 'plain@example.test', Subject: 'No id', 'X-Posthorn-Uid': uid, 'Content-Type': 'text/plain; charset=utf-8' }, 'just text\r\n'),
    });
    const written = headerOf(await delivered(before, 'plain@example.test'), 'message-id');
    assert.ok(written);
    assert.notEqual(written, `<${uid}@posthorn.test>`, 'the uid is escaped in the Message-ID (domain/message-uid.ts)');
    const m = await content(uid);
    assert.equal(m.headers['Message-ID'], written);
    assert.equal(m.text, 'just text\n');
    assert.equal(m.html, null);
    assert.deepEqual(m.attachments, []);
    const page = await client.get(`/messages/${id}`);
    assert.equal(page.status, 200);
    assert.ok(page.text.includes(`<dt>Message-ID</dt><dd><code><bdi>${written.replace('<', '&lt;').replace('>', '&gt;')}</bdi></code></dd>`), 'the delivered Message-ID');
  });

  it('an attached message (message/rfc822) is listed as an attachment, named by its part or its Subject, and not merged into the text and HTML', async () => {
    const inner = 'From: Ann <ann@example.test>\r\nTo: bob@example.test\r\nSubject: =?UTF-8?Q?Quarterly_r=C3=A9sum=C3=A9?=\r\nContent-Type: text/html; charset=utf-8\r\n\r\n<p>inner html</p>\r\n';
    const second = 'From: carl@example.test\r\nSubject: Second\r\n\r\ninner text\r\n';
    const before = h.sink.received.length;
    const id = await submit({
      from: 'fwd@example.test',
      to: 'forwarded@example.test',
      subject: 'Fwd: two messages',
      text: 'see the attached messages',
      html: '<p>see the attached messages</p>',
      headers: { 'X-Posthorn-Uid': 'content-attached-1' },
      // As Nodemailer writes them: inline, 8bit; one named, one not.
      attachments: [
        { contentType: 'message/rfc822', content: inner },
        { contentType: 'message/rfc822', content: second, filename: 'second.eml' },
      ],
    });
    const copy = await delivered(before, 'forwarded@example.test');
    assert.ok(copy.toString('utf8').includes(inner), 'delivered as sent');

    const m = await content('content-attached-1');
    assert.equal(m.text, 'see the attached messages');
    assert.equal(m.html, '<p>see the attached messages</p>');
    assert.deepEqual(m.attachments, [
      { filename: 'Quarterly résumé.eml', content_type: 'message/rfc822', size: Buffer.byteLength(inner) },
      { filename: 'second.eml', content_type: 'message/rfc822', size: Buffer.byteLength(second) },
    ]);
    const page = await client.get(`/messages/${id}`);
    assert.equal(page.status, 200);
    assert.match(page.text, /<span class="filename"><bdi>Quarterly résumé\.eml<\/bdi><\/span> <small><bdi>message\/rfc822<\/bdi>/);
    assert.ok(!page.text.includes('inner text') && !page.text.includes('mp_head'), 'the attached messages are not shown as this one\'s text');
    const frame = await client.get(`/messages/${id}/html`);
    assert.equal(frame.text, '<p>see the attached messages</p>');
  });

  it('broken MIME shows its header fields and no parts, never an error', async () => {
    const uid = 'content-broken-1';
    const raw = mimeMessage(
      { From: 'shop@example.test', To: 'broken@example.test', Subject: 'Broken', 'Message-ID': '<broken-1@shop.example>', 'X-Posthorn-Uid': uid, 'Content-Type': 'multipart/mixed' },
      'no boundary was declared\r\n--x\r\nContent-Type: text/html\r\nContent-Transfer-Encoding: base64\r\n\r\n!!!not base64!!!\r\n',
    );
    const id = await submit({ envelope: { from: 'shop@example.test', to: ['broken@example.test'] }, raw });
    const m = await content(uid);
    assert.equal(m.subject, 'Broken');
    assert.equal(m.headers['Content-Type'], 'multipart/mixed');
    assert.equal(m.headers['Message-ID'], '<broken-1@shop.example>');
    assert.equal(m.html, null);
    assert.deepEqual(m.attachments, []);
    const page = await client.get(`/messages/${id}`);
    assert.equal(page.status, 200);
    assert.ok(page.text.includes('<code><bdi>&lt;broken-1@shop.example&gt;</bdi></code>'));
    const frame = await client.get(`/messages/${id}/html`);
    assert.equal(frame.status, 200);
    assert.equal(frame.text, '');
  });
});

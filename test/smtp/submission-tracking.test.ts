// Open and click tracking of mail submitted over SMTP (docs/smtp-submission.md, "Open and click
// tracking"): Nodemailer's SMTP transport submits to the listener, delivery sends into an
// smtp-server sink on loopback. With the project's tracking off the delivered MIME is the
// submitted one; with it on each copy's HTML part carries its own transmission's links and pixel,
// everything else as sent, DKIM-signed after the rewrite; the links redirect and record `clicked`,
// the pixel `opened`. X-Posthorn-Tracking: on | off is the message's own choice.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { dkimVerify } from 'mailauth/lib/dkim/verify.js';
import { simpleParser } from 'mailparser';
import nodemailer from 'nodemailer';
import { readTrackingToken, trackingSigningKey } from '../../src/domain/tracking-token.ts';
import { headerOf } from '../helpers/smtp-peers.ts';
import { mimeMessage, startSubmissionHarness, type SubmissionHarness } from './harness.ts';

const LINK = 'https://shop.example/orders/7?x=1&y=2';
const HTML = `<html><body><p>Grüße, your order is ready.</p><a href="${LINK.replace('&', '&amp;')}">see it</a> <a href="mailto:help@example.test">help</a></body></html>`;
const TEXT = `Grüße, your order is ready: ${LINK}`;

/** A multipart/alternative message as a client would write it, with a quoted-printable HTML part. */
function alternative(uid: string, extraHeaders: Record<string, string> = {}): string {
  return mimeMessage(
    { From: 'shop@example.test', To: 'reader@example.test', Subject: 'Your order', 'X-Posthorn-Uid': uid, ...extraHeaders, 'MIME-Version': '1.0', 'Content-Type': 'multipart/alternative; boundary="b-1"' },
    [
      '--b-1',
      'Content-Type: text/plain; charset=utf-8',
      'Content-Transfer-Encoding: 8bit',
      '',
      TEXT,
      '--b-1',
      'Content-Type: text/html; charset=utf-8',
      'Content-Transfer-Encoding: quoted-printable',
      '',
      `<html><body><p>Gr=C3=BC=C3=9Fe, your order is ready.</p><a href=3D"${LINK.replace('&', '&amp;')}">see it</a>=`,
      ' <a href=3D"mailto:help@example.test">help</a></body></html>',
      '--b-1--',
      '',
    ].join('\r\n'),
  );
}

describe('tracking of mail submitted over SMTP', () => {
  let h: SubmissionHarness;
  let dkimRecord: { name: string; value: string };

  before(async () => {
    h = await startSubmissionHarness();
    const domain = await h.t.call('create_domain', { api_key: h.seed.accountKey, arguments: { name: 'example.test' } });
    assert.equal(domain.status, 200, JSON.stringify(domain.body));
    dkimRecord = domain.body.data.domain.dns_records.dkim;
  });
  after(async () => {
    await h?.close();
  });

  const transport = () => h.client();

  async function submit(mail: nodemailer.SendMailOptions): Promise<string> {
    const t = transport();
    try {
      return (await t.sendMail(mail)).response;
    } finally {
      t.close();
    }
  }

  async function setProjectTracking(on: boolean): Promise<void> {
    const r = await h.t.call('update_project', { api_key: h.seed.accountKey, arguments: { uid: h.seed.projectUid, settings: { tracking: on } } });
    assert.equal(r.status, 200, JSON.stringify(r.body));
  }

  async function transmissionId(recipient: string, uid: string): Promise<number> {
    const row = await h.t.app.services.store.db
      .selectFrom('transmissions')
      .innerJoin('messages', 'messages.id', 'transmissions.message_id')
      .select('transmissions.id as id')
      .where('messages.uid', '=', uid)
      .where('transmissions.recipient', '=', recipient)
      .executeTakeFirstOrThrow();
    return Number(row.id);
  }

  async function events(type: string, uid: string) {
    const rows = await h.t.app.services.store.db.selectFrom('events').select(['type', 'payload']).where('project_id', '=', h.seed.projectId).where('type', '=', type).execute();
    return rows.map((r) => JSON.parse(r.payload)).filter((p) => p.message_uid === uid);
  }

  async function verifiesDkim(raw: Buffer): Promise<string> {
    const resolver = async (name: string, type: string) => {
      if (type === 'TXT' && name === dkimRecord.name) return [[dkimRecord.value.slice(0, 255), dkimRecord.value.slice(255)]];
      throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' });
    };
    return (await dkimVerify(raw, { resolver })).results[0].status.result;
  }

  /** What a delivered copy holds after the header fields delivery adds (DKIM-Signature) and Posthorn's own. */
  function assertDeliveredAsSubmitted(delivered: Buffer, submitted: string, removedHeaderLines: string[]): void {
    let expected = submitted;
    for (const line of removedHeaderLines) expected = expected.replace(`${line}\r\n`, '');
    const tail = Buffer.from(expected, 'utf8');
    assert.ok(delivered.subarray(delivered.length - tail.length).equals(tail), 'delivered byte for byte as submitted');
  }

  it('with the project tracking off, the delivered MIME is the submitted one', async () => {
    const raw = alternative('untracked-1');
    const before = h.sink.received.length;
    assert.match(await submit({ envelope: { from: 'shop@example.test', to: ['plain@example.test'] }, raw }), /^250 /);
    await h.sink.waitForReceived(before + 1, 20_000);
    const delivered = h.sink.received[before].raw;
    assertDeliveredAsSubmitted(delivered, raw, ['X-Posthorn-Uid: untracked-1']);
    assert.ok(!delivered.toString('latin1').includes('/t/c/'));
    assert.equal(await verifiesDkim(delivered), 'pass');
  });

  it('with the project tracking on, each copy gets its own tracked links and pixel, the rest as sent and DKIM-signed after the rewrite; the click redirects and records clicked, the pixel opened', async () => {
    await setProjectTracking(true);
    const uid = 'tracked-smtp-1';
    const before = h.sink.received.length;
    const response = await submit({
      from: 'Shop <shop@example.test>',
      to: ['ann@example.test', 'bob@example.test'],
      subject: 'Your order',
      text: TEXT,
      html: HTML,
      attachments: [{ filename: 'receipt.html', contentType: 'text/html', content: `<a href="${LINK}">receipt</a>` }],
      headers: { 'X-Posthorn-Uid': uid },
    });
    assert.match(response, /^250 /);
    await h.sink.waitForReceived(before + 2, 20_000);
    const stored = Buffer.from(JSON.parse((await h.messages()).find((m) => m.uid === uid)!.payload).raw, 'base64');
    const key = trackingSigningKey(h.t.app.services);
    const copies = new Map<string, { click: string; open: string }>();
    for (const mail of h.sink.received.slice(before)) {
      const recipient = mail.to[0];
      const id = await transmissionId(recipient, uid);
      const parsed = await simpleParser(mail.raw, { skipHtmlToText: true, skipTextToHtml: true, skipTextLinks: true });
      const html = parsed.html as string;
      const click = /href="(http:\/\/127\.0\.0\.1:0(\/t\/c\/([\w-]+\.[\w-]+)))"/.exec(html);
      assert.ok(click, html);
      assert.deepEqual(readTrackingToken('click', click[3], key), { kind: 'click', transmissionId: id, url: LINK });
      const open = /<img src="http:\/\/127\.0\.0\.1:0(\/t\/o\/([\w-]+\.[\w-]+)\.gif)"/.exec(html);
      assert.ok(open, html);
      assert.deepEqual(readTrackingToken('open', open[2], key), { kind: 'open', transmissionId: id });
      assert.ok(html.includes('href="mailto:help@example.test"'), 'a mailto: link stays');
      assert.ok(html.includes('<p>Grüße, your order is ready.</p>'));
      assert.ok(!html.includes('shop.example'), 'the target is only inside the signed token');
      // The text part and the HTML attachment are as sent.
      assert.equal(parsed.text?.trim(), TEXT);
      assert.equal(parsed.attachments[0].content.toString(), `<a href="${LINK}">receipt</a>`);
      // The header section is the stored one, with the DKIM signature delivery put on top, and
      // the signature verifies over the rewritten copy.
      const storedHeader = stored.subarray(0, stored.indexOf('\r\n\r\n') + 4);
      const deliveredHeaderEnd = mail.raw.indexOf('\r\n\r\n') + 4;
      assert.ok(mail.raw.subarray(deliveredHeaderEnd - storedHeader.length, deliveredHeaderEnd).equals(storedHeader), 'headers as stored');
      assert.match(mail.raw.toString('latin1', 0, deliveredHeaderEnd - storedHeader.length), /^DKIM-Signature: /);
      assert.equal(await verifiesDkim(mail.raw), 'pass');
      assert.equal(headerOf(mail.raw, 'content-type')?.startsWith('multipart/mixed'), true);
      copies.set(recipient, { click: click[2], open: open[1] });
    }
    assert.deepEqual([...copies.keys()].sort(), ['ann@example.test', 'bob@example.test']);
    assert.notEqual(copies.get('ann@example.test')!.click, copies.get('bob@example.test')!.click, 'one token per transmission');

    // Ann loads the pixel, then clicks: opened, then clicked, each recorded for her transmission.
    const ann = copies.get('ann@example.test')!;
    const annId = await transmissionId('ann@example.test', uid);
    const pixel = await fetch(h.t.url + ann.open);
    assert.equal(pixel.status, 200);
    assert.equal(pixel.headers.get('content-type'), 'image/gif');
    await pixel.arrayBuffer();
    const opened = await events('opened', uid);
    assert.equal(opened.length, 1, JSON.stringify(opened));
    assert.equal(opened[0].transmission_id, annId);
    assert.equal(opened[0].recipient, 'ann@example.test');
    const redirect = await fetch(h.t.url + ann.click, { redirect: 'manual' });
    assert.equal(redirect.status, 302);
    assert.equal(redirect.headers.get('location'), LINK);
    const clicked = await events('clicked', uid);
    assert.equal(clicked.length, 1, JSON.stringify(clicked));
    assert.equal(clicked[0].transmission_id, annId);
    assert.equal(clicked[0].url, LINK);
    assert.equal((await events('opened', uid)).length, 1, 'opened once');
  });

  it('X-Posthorn-Tracking: off keeps a message as submitted in a tracking project (the header itself is not delivered)', async () => {
    const raw = alternative('opted-out-1', { 'X-Posthorn-Tracking': 'off' });
    const before = h.sink.received.length;
    assert.match(await submit({ envelope: { from: 'shop@example.test', to: ['device@example.test'] }, raw }), /^250 /);
    await h.sink.waitForReceived(before + 1, 20_000);
    const delivered = h.sink.received[before].raw;
    assertDeliveredAsSubmitted(delivered, raw, ['X-Posthorn-Uid: opted-out-1', 'X-Posthorn-Tracking: off']);
    assert.equal(headerOf(delivered, 'x-posthorn-tracking'), null);
    assert.ok(!delivered.toString('latin1').includes('/t/c/'));
  });

  it('X-Posthorn-Tracking: on tracks a message of a project with tracking off; another value is refused', async () => {
    await setProjectTracking(false);
    const raw = alternative('opted-in-1', { 'X-Posthorn-Tracking': 'On' });
    const before = h.sink.received.length;
    assert.match(await submit({ envelope: { from: 'shop@example.test', to: ['optin@example.test'] }, raw }), /^250 /);
    await h.sink.waitForReceived(before + 1, 20_000);
    const delivered = h.sink.received[before].raw;
    assert.equal(headerOf(delivered, 'x-posthorn-tracking'), null);
    const html = (await simpleParser(delivered)).html as string;
    assert.match(html, /href="http:\/\/127\.0\.0\.1:0\/t\/c\/[\w-]+\.[\w-]+"/);
    // The text part is as submitted, byte for byte.
    const text = `Content-Transfer-Encoding: 8bit\r\n\r\n${TEXT}\r\n--b-1\r\n`;
    assert.ok(delivered.includes(Buffer.from(text, 'utf8')));

    const t = transport();
    try {
      await assert.rejects(
        t.sendMail({ envelope: { from: 'shop@example.test', to: ['x@example.test'] }, raw: alternative('bad-tracking', { 'X-Posthorn-Tracking': 'maybe' }) }),
        (error: any) => error.responseCode === 550 && /X-Posthorn-Tracking must be on or off/.test(error.response),
      );
    } finally {
      t.close();
    }
  });
});

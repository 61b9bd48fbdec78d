// SMTP submission with Nodemailer's SMTP transport as the client (docs/smtp-submission.md): STARTTLS
// and implicit TLS, AUTH success and every kind of failure, Bcc, UTF-8 addresses and 8-bit bodies,
// a 10 MB attachment, the answer to a repeated uid, and delivery end to end into a real smtp-server
// sink, compared byte for byte with what was submitted.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { dkimVerify } from 'mailauth/lib/dkim/verify.js';
import { simpleParser } from 'mailparser';
import nodemailer from 'nodemailer';
import { setProjectStatus } from '../../src/operations/projects.ts';
import { headerOf } from '../helpers/smtp-peers.ts';
import { mimeMessage, startSubmissionHarness, type SubmissionHarness } from './harness.ts';

describe('SMTP submission with Nodemailer', () => {
  let h: SubmissionHarness;

  before(async () => {
    h = await startSubmissionHarness({ config: { submissionMaxBytes: 20 * 1024 * 1024 } });
  });
  after(async () => {
    await h?.close();
  });

  const transport = (opts: { secure?: boolean; user?: string; pass?: string; ignoreTLS?: boolean } = {}) => h.client(opts);

  async function sendExpectingError(t: ReturnType<typeof transport>, mail: nodemailer.SendMailOptions): Promise<any> {
    try {
      await t.sendMail(mail);
    } catch (error) {
      return error;
    } finally {
      t.close();
    }
    assert.fail('the submission was accepted');
  }

  it('STARTTLS: accepts, stores one message with one transmission per RCPT TO, and delivers the MIME as sent without its Bcc', async () => {
    const before = h.sink.received.length;
    const t = transport();
    const info = await t.sendMail({
      from: 'Sender Name <sender@example.test>',
      to: 'to@example.test',
      cc: 'cc@example.test',
      bcc: 'hidden@example.test',
      subject: 'Hello over SMTP',
      text: 'plain body',
      html: '<p>html body</p>',
    });
    t.close();
    assert.match(info.response, /^250 2\.0\.0 Ok: queued as \d+/);
    const id = Number(/queued as (\d+)/.exec(info.response)![1]);
    const rows = await h.messages();
    const row = rows.find((r) => r.id === id)!;
    assert.equal(row.subject, 'Hello over SMTP');
    assert.equal(row.from_address, 'Sender Name <sender@example.test>');
    assert.equal(row.recipient_count, 3);
    const transmissions = await h.transmissions(id);
    assert.deepEqual(transmissions.map((x) => x.recipient).sort(), ['cc@example.test', 'hidden@example.test', 'to@example.test']);

    await h.sink.waitForReceived(before + 3, 20_000);
    const delivered = h.sink.received.slice(before);
    assert.deepEqual(delivered.map((m) => m.to[0]).sort(), ['cc@example.test', 'hidden@example.test', 'to@example.test']);
    const stored = Buffer.from(JSON.parse(row.payload).raw, 'base64');
    for (const mail of delivered) {
      assert.equal(headerOf(mail.raw, 'bcc'), null, 'the Bcc header never leaves');
      assert.ok(!mail.raw.toString('latin1').includes('hidden@example.test'));
      assert.ok(mail.raw.equals(stored), 'delivered byte for byte as stored');
      assert.equal(mail.messageId, info.messageId);
    }
    // The stored message is the submitted one minus its Bcc line: same body, same Message-ID.
    assert.equal(headerOf(stored, 'to'), 'to@example.test');
    assert.equal(headerOf(stored, 'cc'), 'cc@example.test');
  });

  it('implicit TLS: accepts and delivers', async () => {
    const before = h.sink.received.length;
    const t = transport({ secure: true });
    const info = await t.sendMail({ from: 'sender@example.test', to: 'tls@example.test', subject: 'implicit', text: 'over TLS' });
    t.close();
    assert.match(info.response, /^250 /);
    await h.sink.waitForReceived(before + 1, 20_000);
    assert.equal(h.sink.received[before].to[0], 'tls@example.test');
  });

  it('delivers a raw message byte for byte, adds Message-ID and Date only when missing, and signs it with the domain key (verified)', async () => {
    const domain = await h.t.call('create_domain', { api_key: h.seed.accountKey, arguments: { name: 'example.test' } });
    assert.equal(domain.status, 200, JSON.stringify(domain.body));
    const dkimRecord = domain.body.data.domain.dns_records.dkim;
    const raw = mimeMessage(
      { From: 'signed@example.test', To: 'raw@example.test', Subject: 'raw bytes', 'X-Posthorn-Uid': 'raw-uid-1', 'Content-Type': 'text/plain; charset=utf-8', 'Content-Transfer-Encoding': '8bit' },
      'Grüße, \u00e9t\u00e9\r\n..a line that starts with a dot\r\n.\r\nnot the end\r\n',
    );
    const before = h.sink.received.length;
    const t = transport();
    const info = await t.sendMail({ envelope: { from: 'signed@example.test', to: ['raw@example.test'] }, raw });
    t.close();
    assert.match(info.response, /^250 /);
    const row = (await h.messages()).find((r) => r.uid === 'raw-uid-1')!;
    assert.ok(row, 'the uid comes from X-Posthorn-Uid');
    await h.sink.waitForReceived(before + 1, 20_000);
    const delivered = h.sink.received[before].raw;
    const text = delivered.toString('utf8');
    assert.match(text, /^DKIM-Signature: [^]*?d=example\.test/);
    assert.equal(headerOf(delivered, 'x-posthorn-uid'), null, 'the uid header is an instruction, not delivered');
    assert.equal(headerOf(delivered, 'message-id'), '<raw-uid-1@posthorn.test>');
    assert.ok(headerOf(delivered, 'date'));
    // What follows the added headers is exactly what was submitted (minus the uid line).
    const submittedRest = Buffer.from(raw.replace('X-Posthorn-Uid: raw-uid-1\r\n', ''), 'utf8');
    assert.ok(delivered.subarray(delivered.length - submittedRest.length).equals(submittedRest));
    assert.ok(text.includes('\r\n.\r\nnot the end\r\n'), 'a dot line inside the body is content');
    // The signature verifies over the raw MIME as delivered (8-bit body included).
    const resolver = async (name: string, type: string) => {
      if (type === 'TXT' && name === dkimRecord.name) return [[dkimRecord.value.slice(0, 255), dkimRecord.value.slice(255)]];
      throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' });
    };
    const verified = await dkimVerify(delivered, { resolver });
    assert.equal(verified.results[0].status.result, 'pass', JSON.stringify(verified.results[0].status));
  });

  it('is read by the reports like an API message, and a suppressed recipient is not sent to', async () => {
    const call = (method: string, args: Record<string, unknown> = {}, uid?: string) =>
      h.t.call(method, { api_key: h.seed.projectKey, ...(uid ? { uid } : {}), arguments: args });
    const added = await call('add_to_suppression_list', { addresses: ['suppressed@example.test'] });
    assert.equal(added.status, 200, JSON.stringify(added.body));
    const raw = mimeMessage({ From: 'Reports <reports@example.test>', To: 'seen@example.test', Subject: 'for the reports', 'X-Posthorn-Uid': 'report-uid' }, 'report body\r\n');
    const before = h.sink.received.length;
    const t = transport();
    await t.sendMail({ envelope: { from: 'reports@example.test', to: ['seen@example.test', 'suppressed@example.test'] }, raw });
    t.close();
    await h.sink.waitForReceived(before + 1, 20_000);
    const receipt = await call('get_message_receipt', {}, 'report-uid');
    assert.equal(receipt.status, 200, JSON.stringify(receipt.body));
    assert.ok(receipt.body.data.message.id);
    // Both copies end: one delivered, one not sent because suppressed (bounded wait on the report).
    let transmissions: any = null;
    for (let i = 0; i < 100; i++) {
      const r = await call('get_message_transmissions', {}, 'report-uid');
      assert.equal(r.status, 200, JSON.stringify(r.body));
      transmissions = r.body.data.transmissions;
      if (Object.values(transmissions).every((x: any) => x.status !== 'queued' && x.status !== 'retry')) break;
      await h.sink.waitForReceived(h.sink.received.length + 1, 100).catch(() => undefined);
    }
    assert.deepEqual(Object.keys(transmissions).sort(), ['seen@example.test', 'suppressed@example.test']);
    assert.equal(transmissions['seen@example.test'].status, 'completed');
    assert.notEqual(transmissions['suppressed@example.test'].status, 'completed', JSON.stringify(transmissions));
    assert.ok(!h.sink.received.slice(before).some((m) => m.to.includes('suppressed@example.test')));
    // The delivery event webhooks are made from, as for an API message.
    const events = await h.t.app.services.store.db.selectFrom('events').select(['type', 'payload']).where('project_id', '=', h.seed.projectId).execute();
    assert.ok(
      events.some((e) => e.type === 'delivered' && e.payload.includes('report-uid') && e.payload.includes('seen@example.test')),
      JSON.stringify(events.map((e) => e.type)),
    );
    const messages = await call('get_messages');
    assert.equal(messages.status, 200);
    assert.equal(messages.body.data['report-uid'].transmissions_total, 2);
    const history = await call('messages_history');
    assert.equal(history.status, 200, JSON.stringify(history.body));
    assert.ok(JSON.stringify(history.body.data).includes('report-uid'));
  });

  it('completes a copy to null.postageapp.com at once, with the delivered event an API send writes', async () => {
    const raw = mimeMessage({ From: 'a@example.test', To: 'sink@null.postageapp.com', Subject: 'null sink', 'X-Posthorn-Uid': 'null-sink-uid' }, 'x\r\n');
    const t = transport();
    await t.sendMail({ envelope: { from: 'a@example.test', to: ['sink@null.postageapp.com'] }, raw });
    t.close();
    // The 250 came after the commit, which held the transmission and its event together.
    const r = await h.t.call('get_message_transmissions', { api_key: h.seed.projectKey, uid: 'null-sink-uid' });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.data.transmissions['sink@null.postageapp.com'].status, 'completed');
    const events = await h.t.app.services.store.db.selectFrom('events').select(['type', 'payload']).where('project_id', '=', h.seed.projectId).execute();
    const event = events.find((e) => e.type === 'delivered' && e.payload.includes('null-sink-uid'));
    assert.ok(event, JSON.stringify(events.map((e) => e.type)));
    assert.match(event.payload, /sink@null\.postageapp\.com/);
  });

  it('answers a repeated uid 250 with the first message\'s id and uid, and stores nothing new (a retransmission)', async () => {
    const raw = mimeMessage({ From: 'a@example.test', To: 'dup@example.test', Subject: 'dup', 'X-PostageApp-Uid': 'dup-uid' }, 'x\r\n');
    const t = transport();
    try {
      const first = await t.sendMail({ envelope: { from: 'a@example.test', to: ['dup@example.test'] }, raw });
      const id = Number(/queued as (\d+)/.exec(first.response)![1]);
      // Sent again, even with other content: the uid names the message.
      const again = await t.sendMail({ envelope: { from: 'a@example.test', to: ['dup@example.test'] }, raw: raw.replace('x\r\n', 'y\r\n') });
      assert.equal(again.response, `250 2.0.0 Ok: queued as ${id} (already accepted, uid dup-uid; nothing new stored)`);
    } finally {
      t.close();
    }
    assert.equal((await h.messages()).filter((r) => r.uid === 'dup-uid').length, 1);
    const rows = await h.t.app.services.store.db.selectFrom('transmissions').select('id').where('recipient', '=', 'dup@example.test').execute();
    assert.equal(rows.length, 1);
  });

  it('takes UTF-8 addresses (SMTPUTF8) and 8-bit bodies', async () => {
    const before = h.sink.received.length;
    const t = transport();
    const info = await t.sendMail({
      from: 'Jörg <jörg@exämple.test>',
      to: 'empfänger@exämple.test',
      subject: 'Überraschung ☃',
      text: 'Schöne Grüße ☃',
      textEncoding: 'quoted-printable',
    });
    t.close();
    assert.match(info.response, /^250 /);
    const id = Number(/queued as (\d+)/.exec(info.response)![1]);
    const row = (await h.messages()).find((r) => r.id === id)!;
    assert.equal(row.subject, 'Überraschung ☃');
    assert.deepEqual((await h.transmissions(id)).map((x) => x.recipient), ['empfänger@exämple.test']);
    await h.sink.waitForReceived(before + 1, 20_000);
    // The local part as given (SMTPUTF8); the domain as given or in its A-label form.
    assert.ok(['empfänger@xn--exmple-cua.test', 'empfänger@exämple.test'].includes(h.sink.received[before].to[0]), h.sink.received[before].to[0]);
    const parsed = await simpleParser(h.sink.received[before].raw);
    assert.equal(parsed.text?.trim(), 'Schöne Grüße ☃');
  });

  it('carries a 10 MB attachment intact', async () => {
    const attachment = randomBytes(10 * 1024 * 1024);
    const before = h.sink.received.length;
    const t = transport();
    const info = await t.sendMail({
      from: 'big@example.test',
      to: 'big@example.test',
      subject: 'ten megabytes',
      text: 'see attached',
      attachments: [{ filename: 'blob.bin', content: attachment }],
    });
    t.close();
    assert.match(info.response, /^250 /);
    await h.sink.waitForReceived(before + 1, 60_000);
    const parsed = await simpleParser(h.sink.received[before].raw);
    assert.equal(parsed.attachments.length, 1);
    assert.equal(createHash('sha256').update(parsed.attachments[0].content).digest('hex'), createHash('sha256').update(attachment).digest('hex'));
  });

  it('answers 552 to a message over the SIZE limit', async () => {
    const t = transport();
    const error = await sendExpectingError(t, { from: 'a@example.test', to: 'b@example.test', text: 'x'.repeat(21 * 1024 * 1024) });
    assert.equal(error.responseCode, 552);
  });

  it('stops an open session sending once its project is disabled (the key checked again for each message)', async () => {
    const other = await h.t.seed('Open session');
    // One pooled connection: both messages go over the same authenticated session.
    const pooled = h.client({ user: other.projectUid, pass: other.projectKey, pool: true });
    try {
      const first = await pooled.sendMail({ from: 'a@example.test', to: 'b@example.test', text: 'first' });
      assert.match(first.response, /^250 /);
      const account = await h.t.app.services.store.db.selectFrom('accounts').selectAll().where('id', '=', other.accountId).executeTakeFirstOrThrow();
      await setProjectStatus(h.t.app.services, account, other.projectUid, 'disabled');
      const refused = await pooled.sendMail({ from: 'a@example.test', to: 'b@example.test', text: 'second' }).then(
        () => assert.fail('the second message was accepted on the open session'),
        (error: any) => error,
      );
      assert.equal(refused.responseCode, 535, String(refused));
      assert.match(String(refused.response), /no longer valid/);
    } finally {
      pooled.close();
    }
    const stored = await h.t.app.services.store.db.selectFrom('messages').select('id').where('project_id', '=', other.projectId).execute();
    assert.equal(stored.length, 1);
  });

  it('refuses AUTH with a wrong key, an account key, another project uid or a disabled project (535), and AUTH before TLS', async () => {
    const mail = { from: 'a@example.test', to: 'b@example.test', text: 'x' };
    const wrong = await sendExpectingError(transport({ pass: 'not-a-key' }), mail);
    assert.equal(wrong.responseCode, 535);
    const accountKey = await sendExpectingError(transport({ pass: h.seed.accountKey }), mail);
    assert.equal(accountKey.responseCode, 535);
    const other = await h.t.seed('Other');
    const mismatch = await sendExpectingError(transport({ pass: other.projectKey }), mail);
    assert.equal(mismatch.responseCode, 535);
    const accountAsUser = await sendExpectingError(transport({ user: h.seed.accountUid }), mail);
    assert.equal(accountAsUser.responseCode, 535);
    const account = await h.t.app.services.store.db.selectFrom('accounts').selectAll().where('id', '=', other.accountId).executeTakeFirstOrThrow();
    await setProjectStatus(h.t.app.services, account, other.projectUid, 'disabled');
    const disabled = await sendExpectingError(transport({ user: other.projectUid, pass: other.projectKey }), mail);
    assert.equal(disabled.responseCode, 535);
    // In the clear on the STARTTLS port: AUTH is not offered, so nothing can be sent.
    const clear = await sendExpectingError(transport({ ignoreTLS: true }), mail);
    assert.ok(clear.responseCode === 530 || clear.responseCode === 538 || clear.code === 'EAUTH', String(clear));
  });
});

// What a submitted message is made into and how the conversation goes where RFC 5321, 5322 and 6409
// have a say (docs/smtp-submission.md, "What happens to a message", "The conversation"): a cron
// alert of header fields alone (no empty line, no body) sent by Python's smtplib over implicit TLS
// from a project whose account has a DKIM domain is delivered signed (and one stored that way before
// is delivered too); the Received field; raw UTF-8 header values shown as UTF-8; a new AUTH after
// the key was rotated mid-connection; the greeting; bare CR and LF in a body; "Bcc :" (obsolete
// syntax); lines over 998 octets.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { dkimVerify } from 'mailauth/lib/dkim/verify.js';
import type { MessagePayload } from '../../src/domain/message-payload.ts';
import { storeAcceptedMessage } from '../../src/storage/messages.ts';
import { openDialog, type Dialog } from './dialog.ts';
import { run, startSubmissionHarness, type SubmissionHarness } from './harness.ts';

// One implicit-TLS session (certificate verified): EHLO cron.client.test, AUTH, one sendmail.
const PYTHON_SMTPS = String.raw`
import json, smtplib, ssl, sys
req = json.load(sys.stdin)
ctx = ssl.create_default_context(cafile=req['cafile'])
s = smtplib.SMTP_SSL('127.0.0.1', req['port'], local_hostname='cron.client.test', context=ctx, timeout=30)
s.login(req['user'], req['password'])
refused = s.sendmail(req['from'], req['to'], req['data'])
s.quit()
print(json.dumps(refused))
`;

describe('SMTP submission: message form and conversation as the RFCs ask', () => {
  let h: SubmissionHarness;
  let dkimRecord: { name: string; value: string };

  before(async () => {
    // AUTH in the clear allowed on the STARTTLS port: the hand-driven dialogs below speak plain TCP.
    h = await startSubmissionHarness({ config: { submissionAllowPlaintext: true } });
    const domain = await h.t.call('create_domain', { api_key: h.seed.accountKey, arguments: { name: 'sender.example' } });
    assert.equal(domain.status, 200, JSON.stringify(domain.body));
    dkimRecord = domain.body.data.domain.dns_records.dkim;
  });
  after(async () => {
    await h?.close();
  });

  async function dkimResult(raw: Buffer): Promise<string> {
    const resolver = async (name: string, type: string) => {
      if (type === 'TXT' && name === dkimRecord.name) return [[dkimRecord.value.slice(0, 255), dkimRecord.value.slice(255)]];
      throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' });
    };
    return (await dkimVerify(raw, { resolver })).results[0].status.result;
  }

  /** The copy delivered to `address` (bounded wait). */
  async function deliveredTo(address: string): Promise<Buffer> {
    const started = Date.now();
    for (;;) {
      const mail = h.sink.received.find((m) => m.to.includes(address));
      if (mail) return mail.raw;
      if (Date.now() - started > 20_000) throw new Error(`nothing delivered to ${address}`);
      await h.sink.waitForReceived(h.sink.received.length + 1, 20_000).catch(() => undefined);
    }
  }

  async function loggedIn(pass = h.seed.projectKey): Promise<Dialog> {
    const d = await openDialog(h.port);
    await d.login(h.seed.projectUid, pass);
    return d;
  }

  /** One transaction on a logged-in dialog (`data` ends with CRLF): the reply to the end of DATA. */
  async function transaction(d: Dialog, to: string, data: string, mailArgs = ''): Promise<{ code: number; text: string }> {
    d.send(`MAIL FROM:<app@example.test>${mailArgs}\r\n`);
    assert.equal((await d.reply()).code, 250);
    d.send(`RCPT TO:<${to}>\r\n`);
    assert.equal((await d.reply()).code, 250);
    d.send('DATA\r\n');
    assert.equal((await d.reply()).code, 354);
    d.send(`${data}.\r\n`);
    return d.reply(20_000);
  }

  it('delivers, DKIM-signed, a cron alert of header fields alone sent by smtplib over implicit TLS, with an empty line added after its header', async () => {
    const input = JSON.stringify({
      port: h.tlsPort,
      user: h.seed.projectUid,
      password: h.seed.projectKey,
      cafile: h.cert.certFile,
      from: 'alerts@sender.example',
      to: ['ops-cron@example.test'],
      data: 'From: alerts@sender.example\nSubject: disk full on db1',
    });
    const r = await run('python3', ['-c', PYTHON_SMTPS], input);
    assert.equal(r.code, 0, r.stderr + r.stdout);
    const raw = await deliveredTo('ops-cron@example.test');
    const text = raw.toString('utf8');
    assert.equal(await dkimResult(raw), 'pass');
    assert.match(text, /\r\nSubject: disk full on db1\r\n\r\n/);
    const [message] = (await h.messages()).filter((m) => m.subject === 'disk full on db1');
    assert.match(Buffer.from(JSON.parse(message.payload).raw, 'base64').toString('utf8'), /\r\nSubject: disk full on db1\r\n\r\n$/, 'stored with the empty line');
  });

  it('delivers, DKIM-signed, a message stored without the empty line after its header (accepted before it was added)', async () => {
    const services = h.t.app.services;
    const now = services.clock.now();
    const raw = Buffer.from(`Received: from old (unknown [127.0.0.1])\r\n\tby posthorn.test (Posthorn) with ESMTPSA; ${new Date(now).toUTCString()}\r\nFrom: alerts@sender.example\r\nSubject: stored bare\r\nMessage-ID: <stored-bare@sender.example>\r\nDate: ${new Date(now).toUTCString()}\r\n`);
    const payload: MessagePayload = { v: 2, messageId: '<stored-bare@sender.example>', from: 'alerts@sender.example', subject: 'stored bare', text: null, html: null, headers: {}, variables: {}, attachments: [], recipientOverride: null, tracking: null, raw: raw.toString('base64') };
    await storeAcceptedMessage(services.store, {
      message: { project_id: h.seed.projectId, uid: 'stored-bare', unique_id: 'stored-bare@posthorn.test', template: null, subject: 'stored bare', from_address: 'alerts@sender.example', deliver: 1, created_at: now, send_at: null, sandbox: 0, payload: JSON.stringify(payload) },
      copies: [{ recipient: 'ops-old@example.test', recipientName: null, variables: null, subject: null, completed: null }],
      dueAt: now,
    });
    services.store.wake('transmissions');
    const delivered = await deliveredTo('ops-old@example.test');
    assert.equal(await dkimResult(delivered), 'pass');
    assert.ok(delivered.toString('utf8').includes(`${raw.toString('utf8')}\r\n`), 'the stored fields, then the empty line');
  });

  it('adds a Received field at the top: the EHLO name and address, TLS, this host, ESMTPSA, the uid and the date; nothing of the key', async () => {
    const input = JSON.stringify({ port: h.tlsPort, user: h.seed.projectUid, password: h.seed.projectKey, cafile: h.cert.certFile, from: 'app@example.test', to: ['traced@example.test'], data: 'From: app@example.test\r\nSubject: traced\r\n\r\nHello\r\n' });
    const r = await run('python3', ['-c', PYTHON_SMTPS], input);
    assert.equal(r.code, 0, r.stderr + r.stdout);
    const text = (await deliveredTo('traced@example.test')).toString('utf8');
    const [message] = (await h.messages()).filter((m) => m.subject === 'traced');
    const received = /^Received: [^\r\n]*(\r\n\t[^\r\n]*)*\r\n/m.exec(text)?.[0] ?? '';
    assert.ok(text.indexOf(received) < text.indexOf('\r\nFrom: '), 'before the fields of the message');
    assert.match(
      received,
      new RegExp(
        `^Received: from cron\\.client\\.test \\(unknown \\[127\\.0\\.0\\.1\\]\\)\\r\\n\\t\\(using TLSv1\\.[23] with cipher [A-Z0-9_-]+\\)\\r\\n\\tby posthorn\\.test \\(Posthorn\\) with ESMTPSA id ${message.uid};\\r\\n\\t\\w{3}, \\d{1,2} \\w{3} \\d{4} \\d\\d:\\d\\d:\\d\\d \\+0000 \\(UTC\\)\\r\\n$`,
      ),
    );
    assert.ok(!received.includes(h.seed.projectKey) && !received.includes(h.seed.projectUid));
  });

  it('shows raw UTF-8 header values (SMTPUTF8) as UTF-8 in get_message_content', async () => {
    const d = await loggedIn();
    const reply = await transaction(d, 'utf8-view@example.test', 'From: app@example.test\r\nTo: ñ@example.test\r\nX-Note: Grüße\r\nSubject: utf8 headers\r\n\r\nHi\r\n', ' SMTPUTF8');
    d.close();
    assert.equal(reply.code, 250, reply.text);
    const [message] = (await h.messages()).filter((m) => m.subject === 'utf8 headers');
    const r = await h.t.call('get_message_content', { api_key: h.seed.projectKey, uid: message.uid });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.data.message.headers.To, 'ñ@example.test');
    assert.equal(r.body.data.message.headers['X-Note'], 'Grüße');
  });

  it('takes a new AUTH on the same connection after the key was rotated, and sends with the new key', async () => {
    const other = await h.t.seed('Rotated mid-connection');
    const d = await openDialog(h.port);
    await d.login(other.projectUid, other.projectKey);
    const rotated = await h.t.call('rotate_project_key', { api_key: other.accountKey, arguments: { uid: other.projectUid } });
    assert.equal(rotated.status, 200, JSON.stringify(rotated.body));
    const newKey: string = rotated.body.data.project.api_key;
    d.send('MAIL FROM:<app@example.test>\r\nRCPT TO:<rotated@example.test>\r\nDATA\r\n');
    assert.equal((await d.reply()).code, 250);
    assert.equal((await d.reply()).code, 250);
    assert.equal((await d.reply()).code, 354);
    d.send('From: app@example.test\r\nSubject: before\r\n\r\nx\r\n.\r\n');
    const refused = await d.reply();
    assert.equal(refused.code, 535, refused.text);
    d.send('MAIL FROM:<app@example.test>\r\n');
    assert.equal((await d.reply()).code, 530, 'no MAIL FROM until AUTH again');
    d.send(`AUTH PLAIN ${Buffer.from(`\0${other.projectUid}\0${newKey}`).toString('base64')}\r\n`);
    const auth = await d.reply();
    assert.equal(auth.code, 235, auth.text);
    const sent = await transaction(d, 'rotated@example.test', 'From: app@example.test\r\nSubject: after\r\n\r\nx\r\n');
    d.close();
    assert.equal(sent.code, 250, sent.text);
  });

  it('greets with "ESMTP" once', async () => {
    const d = await openDialog(h.port);
    const greeting = await d.reply();
    d.close();
    assert.equal(greeting.text, '220 posthorn.test ESMTP Posthorn submission\r\n');
  });

  it('writes a bare CR and a bare LF in the body as CRLF, stored and delivered', async () => {
    const d = await loggedIn();
    const reply = await transaction(d, 'bare@example.test', 'From: app@example.test\r\nSubject: bare breaks\r\n\r\none\rtwo\nthree\r\n');
    d.close();
    assert.equal(reply.code, 250, reply.text);
    const delivered = (await deliveredTo('bare@example.test')).toString('latin1');
    assert.ok(delivered.endsWith('\r\n\r\none\r\ntwo\r\nthree\r\n'), JSON.stringify(delivered.slice(-40)));
    const [message] = (await h.messages()).filter((m) => m.subject === 'bare breaks');
    assert.ok(Buffer.from(JSON.parse(message.payload).raw, 'base64').toString('latin1').endsWith('\r\n\r\none\r\ntwo\r\nthree\r\n'));
  });

  it('takes "Bcc : x" (white space before the colon, obsolete syntax) and removes it from the copies', async () => {
    const d = await loggedIn();
    d.send('MAIL FROM:<app@example.test>\r\nRCPT TO:<shown@example.test>\r\nRCPT TO:<hidden@example.test>\r\nDATA\r\n');
    for (const code of [250, 250, 250, 354]) assert.equal((await d.reply()).code, code);
    d.send('From: app@example.test\r\nTo: shown@example.test\r\nBcc : hidden@example.test\r\nSubject  : obsolete syntax\r\n\r\nx\r\n.\r\n');
    const reply = await d.reply(20_000);
    d.close();
    assert.equal(reply.code, 250, reply.text);
    for (const address of ['shown@example.test', 'hidden@example.test']) {
      const copy = (await deliveredTo(address)).toString('utf8');
      assert.ok(!/hidden@example\.test/.test(copy), `no Bcc in the copy for ${address}`);
      assert.match(copy, /\r\nSubject {2}: obsolete syntax\r\n/);
    }
  });

  it('refuses a message with a line over 998 octets (550 5.6.0), and takes one of 998', async () => {
    const d = await loggedIn();
    const long = await transaction(d, 'long@example.test', `From: app@example.test\r\nSubject: long line\r\n\r\n${'x'.repeat(999)}\r\n`);
    assert.equal(long.code, 550, long.text);
    assert.match(long.text, /5\.6\.0 .*longer than 998 octets/);
    const longHeader = await transaction(d, 'long@example.test', `From: app@example.test\r\nSubject: ${'y'.repeat(990)}\r\n\r\nx\r\n`);
    assert.equal(longHeader.code, 550, longHeader.text);
    const fits = await transaction(d, 'long@example.test', `From: app@example.test\r\nSubject: fits\r\n\r\n${'x'.repeat(998)}\r\n`);
    d.close();
    assert.equal(fits.code, 250, fits.text);
  });
});

// Which message a submission is, and what of it reaches the recipients (docs/smtp-submission.md,
// "The uid: which message a submission is", "What happens to a message", "The conversation"), with
// the clients that send such mail: Python's smtplib (cron scripts, Django) and swaks. A message
// without a Message-ID is a new message every time; one sent again with its Message-ID to the same
// envelope is a retransmission, answered 250 and delivered once; Bcc and Resent-Bcc never reach a
// copy; a Message-ID field without a msg-id is replaced; RCPT TO an address the API refuses is
// answered 553 at once.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { checkAddrSpec } from '../../src/domain/recipients.ts';
import { headerOf } from '../helpers/smtp-peers.ts';
import { run, startSubmissionHarness, type SubmissionHarness } from './harness.ts';

// One STARTTLS session (certificate verified) and its transactions, read as JSON on stdin:
// {port, user, password, cafile, transactions: [{from, to: [...], data, sendmail?}]}. Prints JSON:
// per transaction either {"sendmail": {refused recipients}} (smtplib.sendmail, as a cron script
// calls it) or {"mail": [code, text], "rcpt": [[code, text]...], "data": [code, text] | null}.
const PYTHON_SESSION = String.raw`
import json, smtplib, ssl, sys
req = json.load(sys.stdin)
ctx = ssl.create_default_context(cafile=req['cafile'])
s = smtplib.SMTP('127.0.0.1', req['port'], timeout=30)
s.starttls(context=ctx)
s.login(req['user'], req['password'])
out = []
def text(r):
    return [r[0], r[1].decode('utf-8', 'replace')]
for t in req['transactions']:
    if t.get('sendmail'):
        try:
            out.append({'sendmail': s.sendmail(t['from'], t['to'], t['data'])})
        except smtplib.SMTPResponseException as e:
            out.append({'error': [e.smtp_code, e.smtp_error.decode('utf-8', 'replace')]})
        continue
    mail = text(s.mail(t['from']))
    rcpt = [text(s.rcpt(a)) for a in t['to']]
    data = None
    if any(r[0] == 250 for r in rcpt):
        data = text(s.data(t['data']))
    else:
        s.rset()
    out.append({'mail': mail, 'rcpt': rcpt, 'data': data})
s.quit()
print(json.dumps(out))
`;

interface Transaction {
  from: string;
  to: string[];
  data: string;
  sendmail?: boolean;
}

describe('SMTP submission: which message a submission is, and what reaches the recipients', () => {
  let h: SubmissionHarness;

  before(async () => {
    h = await startSubmissionHarness();
  });
  after(async () => {
    await h?.close();
  });

  /** The transactions in one smtplib session; each one's replies. */
  async function smtplib(transactions: Transaction[]): Promise<any[]> {
    const input = JSON.stringify({ port: h.port, user: h.seed.projectUid, password: h.seed.projectKey, cafile: h.cert.certFile, transactions });
    const r = await run('python3', ['-c', PYTHON_SESSION], input);
    assert.equal(r.code, 0, r.stderr + r.stdout);
    return JSON.parse(r.stdout);
  }

  /** The copies delivered to `address`, once there are `count` of them (bounded wait). */
  async function deliveredTo(address: string, count: number) {
    const started = Date.now();
    for (;;) {
      const mails = h.sink.received.filter((m) => m.to.includes(address));
      if (mails.length >= count) return mails;
      if (Date.now() - started > 20_000) throw new Error(`${mails.length} of ${count} copies delivered to ${address}`);
      await h.sink.waitForReceived(h.sink.received.length + 1, 20_000).catch(() => undefined);
    }
  }

  async function transmissionsTo(address: string): Promise<number[]> {
    const rows = await h.t.app.services.store.db.selectFrom('transmissions').select('message_id').where('recipient', '=', address).execute();
    return rows.map((r) => Number(r.message_id));
  }

  const queuedId = (reply: [number, string]) => Number(/queued as (\d+)/.exec(reply[1])![1]);
  const messageIdFields = (raw: Buffer) => {
    const head = raw.toString('utf8').split('\r\n\r\n')[0];
    return head.split('\r\n').filter((line) => /^message-id:/i.test(line));
  };

  it('smtplib.sendmail of the same cron alert twice (no Message-ID, no Date): two messages, both delivered', async () => {
    const data = 'From: cron@example.test\r\nTo: ops-cron@example.test\r\nSubject: Backup OK\r\n\r\nnightly backup finished\r\n';
    const alert = { from: 'cron@example.test', to: ['ops-cron@example.test'], data, sendmail: true };
    const replies = await smtplib([alert, alert]);
    assert.deepEqual(replies, [{ sendmail: {} }, { sendmail: {} }], 'both accepted');
    const ids = await transmissionsTo('ops-cron@example.test');
    assert.equal(ids.length, 2);
    assert.notEqual(ids[0], ids[1], 'two messages');
    const copies = await deliveredTo('ops-cron@example.test', 2);
    assert.equal(copies.length, 2);
    assert.notEqual(copies[0].messageId, copies[1].messageId, 'each with a Message-ID of its own');
    for (const copy of copies) assert.ok(copy.raw.toString('utf8').endsWith('\r\n\r\nnightly backup finished\r\n'));
  });

  it('a message sent again with its Message-ID to the same envelope is answered 250 with the first id, and stored and delivered once', async () => {
    const data = 'From: app@example.test\r\nTo: once@example.test\r\nSubject: Invoice 12\r\nMessage-ID: <invoice-12@app.example>\r\n\r\nyour invoice\r\n';
    const send = { from: 'app@example.test', to: ['once@example.test'], data };
    // Twice in one session, and again in another one (a client that reconnects after losing the 250).
    const [first, second] = await smtplib([send, send]);
    const [third] = await smtplib([send]);
    assert.equal(first.data[0], 250);
    assert.match(first.data[1], /^2\.0\.0 Ok: queued as \d+$/);
    const id = queuedId(first.data);
    for (const repeat of [second, third]) {
      assert.equal(repeat.data[0], 250, JSON.stringify(repeat));
      assert.match(repeat.data[1], new RegExp(`^2\\.0\\.0 Ok: queued as ${id} \\(already accepted, uid [0-9a-f]{64}; nothing new stored\\)$`));
    }
    // One message, one transmission: nothing else exists that delivery could send.
    assert.deepEqual(await transmissionsTo('once@example.test'), [id]);
    const [copy] = await deliveredTo('once@example.test', 1);
    assert.equal(copy.messageId, '<invoice-12@app.example>');

    // The same Message-ID from another sender is another message.
    const [other] = await smtplib([{ ...send, from: 'other@example.test' }]);
    assert.equal(other.data[0], 250);
    assert.doesNotMatch(other.data[1], /already accepted/);
    assert.notEqual(queuedId(other.data), id);
    assert.equal((await transmissionsTo('once@example.test')).length, 2);
  });

  it('swaks: neither Bcc nor Resent-Bcc reaches any copy; their recipients get theirs', async () => {
    const r = await run('swaks', [
      '--server', `127.0.0.1:${h.port}`, '--tls', '--tls-verify', '--tls-ca-path', h.cert.certFile,
      '--auth', 'PLAIN', '--auth-user', h.seed.projectUid, '--auth-password', h.seed.projectKey,
      '--from', 'resender@example.test', '--to', 'resent-to@example.test,resent-hidden@example.test,plain-hidden@example.test',
      '--header', 'Subject: resent', '--header', 'To: original@example.test', '--add-header', 'Resent-From: resender@example.test', '--add-header', 'Resent-To: resent-to@example.test',
      '--add-header', 'Resent-Bcc: resent-hidden@example.test', '--add-header', 'Bcc: plain-hidden@example.test',
      '--body', 'forwarded again', '--timeout', '30',
    ]);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    for (const address of ['resent-to@example.test', 'resent-hidden@example.test', 'plain-hidden@example.test']) {
      const [copy] = await deliveredTo(address, 1);
      assert.equal(headerOf(copy.raw, 'resent-bcc'), null);
      assert.equal(headerOf(copy.raw, 'bcc'), null);
      assert.equal(headerOf(copy.raw, 'resent-to'), 'resent-to@example.test');
      const text = copy.raw.toString('utf8');
      assert.ok(!text.includes('resent-hidden@') && !text.includes('plain-hidden@'), 'no copy names a blind recipient');
    }
  });

  it('a Message-ID field without a msg-id is replaced, never kept beside the one added; a msg-id with a comment is kept', async () => {
    const message = (to: string, messageId: string) => ({
      from: 'ids@example.test',
      to: [to],
      data: `From: ids@example.test\r\nTo: ${to}\r\nSubject: ids\r\nMessage-ID:${messageId}\r\n\r\nbody\r\n`,
    });
    const replies = await smtplib([message('empty-id@example.test', ''), message('word-id@example.test', ' not-an-id'), message('commented-id@example.test', ' <kept-1@app.example> (the app)')]);
    for (const reply of replies) assert.equal(reply.data[0], 250, JSON.stringify(reply));
    for (const address of ['empty-id@example.test', 'word-id@example.test']) {
      const [copy] = await deliveredTo(address, 1);
      const fields = messageIdFields(copy.raw);
      assert.equal(fields.length, 1, fields.join(' | '));
      assert.match(fields[0], /^Message-ID: <[^<>\s]+@posthorn\.test>$/);
    }
    const [kept] = await deliveredTo('commented-id@example.test', 1);
    assert.deepEqual(messageIdFields(kept.raw), ['Message-ID: <kept-1@app.example> (the app)']);
  });

  it('RCPT TO an address the API refuses is answered 553 5.1.3 at once; the others of the transaction are delivered', async () => {
    const literal = await run('swaks', [
      '--server', `127.0.0.1:${h.port}`, '--tls', '--tls-verify', '--tls-ca-path', h.cert.certFile,
      '--auth', 'PLAIN', '--auth-user', h.seed.projectUid, '--auth-password', h.seed.projectKey,
      '--from', 'app@example.test', '--to', 'x@[127.0.0.1]', '--timeout', '30',
    ]);
    assert.notEqual(literal.code, 0);
    assert.match(literal.stdout, /<~\* 553 5\.1\.3 The recipient address is not accepted: /);

    const longLocal = `${'l'.repeat(65)}@example.test`;
    const [mixed] = await smtplib([
      { from: 'app@example.test', to: ['root@localhost', longLocal, 'kept-rcpt@example.test'], data: 'From: app@example.test\r\nSubject: rcpt\r\n\r\nx\r\n' },
    ]);
    assert.deepEqual(
      mixed.rcpt.map((r: [number, string]) => r[0]),
      [553, 553, 250],
    );
    assert.match(mixed.rcpt[0][1], /^5\.1\.3 .*fully qualified/);
    assert.match(mixed.rcpt[1][1], /^5\.1\.3 .*64 bytes/);
    assert.equal(mixed.data[0], 250);
    const id = queuedId(mixed.data);
    const rows = await h.transmissions(id);
    assert.deepEqual(rows.map((r) => r.recipient), ['kept-rcpt@example.test']);
    await deliveredTo('kept-rcpt@example.test', 1);
  });

  it('MAIL FROM an address the API refuses is answered 553 5.1.7 at once; the null sender is taken', async () => {
    const replies = await smtplib([
      { from: 'root@localhost', to: ['sender-check@example.test'], data: 'Subject: no from\r\n\r\nx\r\n' },
      { from: 'app@example.test', to: ['sender-check@example.test'], data: 'Subject: no from\r\n\r\nx\r\n' },
      { from: '', to: ['sender-check@example.test'], data: 'From: app@example.test\r\nSubject: null sender\r\n\r\nx\r\n' },
    ]);
    assert.equal(replies[0].mail[0], 553);
    assert.match(replies[0].mail[1], /^5\.1\.7 The sender address is not accepted: .*fully qualified/);
    assert.equal(replies[1].mail[0], 250);
    assert.equal(replies[1].data[0], 250);
    assert.equal(replies[2].mail[0], 250);
    assert.equal(replies[2].data[0], 250);
    assert.equal(replies[0].data, null, 'no recipient was taken after the refused MAIL FROM');
    await deliveredTo('sender-check@example.test', 2);
  });

  it('a quoted local part is taken where smtp-server reads it; with a space, smtp-server answers 501 (docs/smtp-submission.md)', async () => {
    const quoted = ['"quoted"@example.test', '"quoted local"@example.test', '"at@sign"@example.test', '"two..dots"@example.test'];
    for (const address of quoted) assert.ok(checkAddrSpec(address).ok, `the API takes ${address}`);
    const [reply] = await smtplib([{ from: 'app@example.test', to: quoted.map((a) => `<${a}>`), data: 'From: app@example.test\r\nSubject: quoted\r\n\r\nx\r\n' }]);
    // smtp-server splits the command at white space and the address at "@", and refuses "..": if
    // it takes any of these now, update docs/smtp-submission.md, "The conversation".
    assert.deepEqual(
      reply.rcpt.map((r: [number, string]) => r[0]),
      [250, 501, 501, 501],
    );
    assert.equal(reply.data[0], 250);
    await deliveredTo('"quoted"@example.test', 1);
  });
});

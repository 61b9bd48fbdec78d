// SMTP submission from the clients applications use besides Nodemailer: Python's smtplib (Debian
// python3, as Django uses it) and swaks (Debian package), each over STARTTLS and implicit TLS with
// the certificate verified, AUTH success and failure, Bcc, UTF-8 addresses and an 8-bit body, a
// 10 MB attachment; delivered end to end into the sink.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { simpleParser } from 'mailparser';
import { headerOf } from '../helpers/smtp-peers.ts';
import { run, startSubmissionHarness, type SubmissionHarness } from './harness.ts';

// Reads its parameters from argv; prints "OK <reply>" or "ERR <code> <text>".
const PYTHON_CLIENT = String.raw`
import smtplib, ssl, sys
from email.message import EmailMessage
from email import policy
mode, port, user, password, cafile, sender, to, bcc, subject = sys.argv[1:10]
attachment = sys.argv[10] if len(sys.argv) > 10 else None
ctx = ssl.create_default_context(cafile=cafile)
msg = EmailMessage()
msg['From'] = sender
msg['To'] = to
msg['Bcc'] = bcc
msg['Subject'] = subject
msg.set_content('Grüße aus Python ☃', cte='8bit')
if attachment:
    with open(attachment, 'rb') as f:
        msg.add_attachment(f.read(), maintype='application', subtype='octet-stream', filename='blob.bin')
try:
    if mode == 'starttls':
        s = smtplib.SMTP('127.0.0.1', int(port), timeout=30)
        s.starttls(context=ctx)
    else:
        s = smtplib.SMTP_SSL('127.0.0.1', int(port), context=ctx, timeout=30)
    s.login(user, password)
    options = ['BODY=8BITMIME'] + (['SMTPUTF8'] if any(ord(c) > 127 for c in sender + to + bcc) else [])
    # sendmail with the Bcc header still in the bytes: the server must remove it.
    s.sendmail(sender, [to, bcc], msg.as_bytes(policy=policy.SMTPUTF8 if 'SMTPUTF8' in options else policy.SMTP), mail_options=options)
    s.quit()
    print('OK')
except smtplib.SMTPResponseException as e:
    print('ERR', e.smtp_code, e.smtp_error.decode('utf-8', 'replace'))
`;

describe('SMTP submission with smtplib and swaks', () => {
  let h: SubmissionHarness;
  let blobDir: string;
  let blobFile: string;
  let blobSha: string;

  before(async () => {
    h = await startSubmissionHarness();
    blobDir = fs.mkdtempSync(path.join(os.tmpdir(), 'posthorn-smtp-blob-'));
    blobFile = path.join(blobDir, 'blob.bin');
    const blob = randomBytes(10 * 1024 * 1024);
    fs.writeFileSync(blobFile, blob);
    blobSha = createHash('sha256').update(blob).digest('hex');
  });
  after(async () => {
    await h?.close();
    if (blobDir) fs.rmSync(blobDir, { recursive: true, force: true });
  });

  async function assertCarriesBlob(address: string): Promise<void> {
    const parsed = await simpleParser((await deliveredTo(address, 60_000)).raw);
    assert.equal(parsed.attachments.length, 1);
    assert.equal(createHash('sha256').update(parsed.attachments[0].content).digest('hex'), blobSha);
  }

  async function deliveredTo(address: string, timeoutMs = 20_000) {
    const started = Date.now();
    for (;;) {
      const mail = h.sink.received.find((m) => m.to.includes(address));
      if (mail) return mail;
      if (Date.now() - started > timeoutMs) throw new Error(`nothing delivered to ${address}`);
      await h.sink.waitForReceived(h.sink.received.length + 1, timeoutMs).catch(() => undefined);
    }
  }

  for (const mode of ['starttls', 'tls'] as const) {
    it(`smtplib over ${mode}: AUTH, Bcc removed and delivered, UTF-8 addresses, an 8-bit body, a 10 MB attachment`, async () => {
      const port = String(mode === 'starttls' ? h.port : h.tlsPort);
      const to = `py-${mode}-to@example.test`;
      const bcc = `py-${mode}-bcc@example.test`;
      const r = await run('python3', ['-c', PYTHON_CLIENT, mode, port, h.seed.projectUid, h.seed.projectKey, h.cert.certFile, 'py@example.test', to, bcc, `python ${mode}`]);
      assert.equal(r.stdout.trim(), 'OK', r.stderr + r.stdout);
      for (const address of [to, bcc]) {
        const mail = await deliveredTo(address);
        assert.equal(headerOf(mail.raw, 'bcc'), null);
        assert.ok(!mail.raw.toString('utf8').includes(bcc));
        assert.equal((await simpleParser(mail.raw)).text?.trim(), 'Grüße aus Python ☃');
      }

      const utf8To = `empfänger-${mode}@exämple.test`;
      const u = await run('python3', ['-c', PYTHON_CLIENT, mode, port, h.seed.projectUid, h.seed.projectKey, h.cert.certFile, 'jörg@exämple.test', utf8To, `blind-${mode}@exämple.test`, 'UTF-8 ☃']);
      assert.equal(u.stdout.trim(), 'OK', u.stderr + u.stdout);
      const rows = await h.messages();
      assert.equal(rows[rows.length - 1].subject, 'UTF-8 ☃');

      const big = `py-${mode}-big@example.test`;
      const b = await run('python3', ['-c', PYTHON_CLIENT, mode, port, h.seed.projectUid, h.seed.projectKey, h.cert.certFile, 'py@example.test', big, `py-${mode}-big-bcc@example.test`, '10 MB', blobFile]);
      assert.equal(b.stdout.trim(), 'OK', b.stderr + b.stdout);
      await assertCarriesBlob(big);

      const bad = await run('python3', ['-c', PYTHON_CLIENT, mode, port, h.seed.projectUid, 'wrong-key', h.cert.certFile, 'py@example.test', to, bcc, 'x']);
      assert.match(bad.stdout.trim(), /^ERR 535 /, bad.stderr + bad.stdout);
    });
  }

  for (const mode of ['starttls', 'tls'] as const) {
    it(`swaks over ${mode}: AUTH PLAIN and LOGIN, Bcc removed and delivered, a 10 MB attachment; a wrong key fails`, async () => {
      const tlsArgs = mode === 'starttls' ? ['--server', `127.0.0.1:${h.port}`, '--tls'] : ['--server', `127.0.0.1:${h.tlsPort}`, '--tls-on-connect'];
      for (const auth of ['PLAIN', 'LOGIN']) {
        const to = `swaks-${mode}-${auth.toLowerCase()}@example.test`;
        const bcc = `swaks-${mode}-${auth.toLowerCase()}-bcc@example.test`;
        const r = await run('swaks', [
          ...tlsArgs,
          '--tls-verify', '--tls-ca-path', h.cert.certFile,
          '--auth', auth, '--auth-user', h.seed.projectUid, '--auth-password', h.seed.projectKey,
          '--from', 'swaks@example.test', '--to', `${to},${bcc}`,
          '--header', `Subject: swaks ${mode} ${auth}`, '--add-header', `Bcc: ${bcc}`,
          '--body', 'sent by swaks', '--timeout', '30',
        ]);
        assert.equal(r.code, 0, r.stdout + r.stderr);
        assert.match(r.stdout, /<~  250 2\.0\.0 Ok: queued as \d+/);
        for (const address of [to, bcc]) {
          const mail = await deliveredTo(address);
          assert.equal(headerOf(mail.raw, 'bcc'), null);
          assert.equal(headerOf(mail.raw, 'subject'), `swaks ${mode} ${auth}`);
        }
      }
      const big = `swaks-${mode}-big@example.test`;
      const b = await run('swaks', [
        ...tlsArgs, '--tls-verify', '--tls-ca-path', h.cert.certFile,
        '--auth', 'PLAIN', '--auth-user', h.seed.projectUid, '--auth-password', h.seed.projectKey,
        '--from', 'swaks@example.test', '--to', big, '--attach', `@${blobFile}`, '--timeout', '60', '--suppress-data',
      ]);
      assert.equal(b.code, 0, b.stdout.slice(-2000) + b.stderr);
      await assertCarriesBlob(big);

      const bad = await run('swaks', [
        ...tlsArgs, '--tls-verify', '--tls-ca-path', h.cert.certFile,
        '--auth', 'PLAIN', '--auth-user', h.seed.projectUid, '--auth-password', 'wrong-key',
        '--from', 'swaks@example.test', '--to', 'never@example.test', '--timeout', '30',
      ]);
      assert.notEqual(bad.code, 0);
      assert.match(bad.stdout, /<~\*? 535 /);
    });
  }
});

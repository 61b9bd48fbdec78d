// SMTP submission's protocol edges, driven by hand on a plaintext loopback listener (no certificate,
// 127.0.0.1: AUTH in the clear is allowed there, docs/smtp-submission.md): the extensions
// advertised, the published SMTP smuggling sequences, and every limit (SIZE, recipients, messages
// per connection, connections per address, idle and total timeouts, failed AUTH attempts).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { Writable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import { MAX_AUTH_FAILURES } from '../../src/smtp/submission.ts';
import { openDialog, type Dialog, type SmtpReplyText } from './dialog.ts';
import { startSubmissionHarness, type SubmissionHarness } from './harness.ts';

/** The published end-of-data smuggling sequences: a "." line reached through a bare CR or LF. */
const SMUGGLING_SEQUENCES: Record<string, string> = {
  '<LF>.<LF>': '\n.\n',
  '<LF>.<CR><LF>': '\n.\r\n',
  '<CR><LF>.<LF>': '\r\n.\n',
  '<CR>.<CR>': '\r.\r',
  '<CR>.<CR><LF>': '\r.\r\n',
  '<CR><LF>.<CR>': '\r\n.\r',
  '<CR>.<LF>': '\r.\n',
  '<LF>.<CR>': '\n.\r',
};

describe('SMTP submission: smuggling and limits', () => {
  let h: SubmissionHarness;
  const open: Dialog[] = [];

  /** the service's log lines, info and up */
  const logged: Array<{ level: number; msg: string }> = [];

  before(async () => {
    h = await startSubmissionHarness({
      log: pino({ level: 'info' }, new Writable({ write: (chunk, _e, cb) => (logged.push(JSON.parse(String(chunk))), cb()) })),
      tls: false,
      delivery: false,
      config: {
        submissionMaxBytes: 64 * 1024,
        maxRecipients: 3,
        submissionMaxMessagesPerConnection: 2,
        submissionMaxConnectionsPerIp: 4,
        submissionIdleTimeoutMs: 1000,
        submissionTotalTimeoutMs: 3000,
      },
    });
  });
  after(async () => {
    for (const d of open) d.close();
    await h?.close();
  });

  async function dialog(): Promise<Dialog> {
    const d = await openDialog(h.port);
    open.push(d);
    return d;
  }

  /** Closes every dialog of earlier tests and waits (bounded) until the listener has let them go. */
  async function closeAll(): Promise<void> {
    for (const d of open.splice(0)) d.close();
    for (let i = 0; i < 100 && h.listener.openSessions() > 0; i++) await new Promise((r) => setTimeout(r, 50));
    assert.equal(h.listener.openSessions(), 0);
  }

  async function loggedIn(): Promise<Dialog> {
    const d = await dialog();
    await d.login(h.seed.projectUid, h.seed.projectKey);
    return d;
  }

  /** MAIL, RCPT, DATA pipelined in one write; resolves after the 354. */
  async function startData(d: Dialog, to: string): Promise<void> {
    d.send(`MAIL FROM:<sender@example.test>\r\nRCPT TO:<${to}>\r\nDATA\r\n`);
    assert.equal((await d.reply()).code, 250);
    assert.equal((await d.reply()).code, 250);
    assert.equal((await d.reply()).code, 354);
  }

  async function recipientsStored(address: string): Promise<number> {
    const rows = await h.t.app.services.store.db.selectFrom('transmissions').select('id').where('recipient', '=', address).execute();
    return rows.length;
  }

  it('advertises SIZE, PIPELINING, 8BITMIME, SMTPUTF8 and AUTH PLAIN LOGIN, and wants AUTH before MAIL', async () => {
    const d = await dialog();
    assert.equal((await d.reply()).code, 220);
    d.send('EHLO client.test\r\n');
    const ehlo = (await d.reply()).text;
    for (const ext of ['SIZE 65536', 'PIPELINING', '8BITMIME', 'SMTPUTF8', 'AUTH PLAIN LOGIN']) assert.ok(ehlo.includes(ext), `${ext} in ${ehlo}`);
    assert.ok(!ehlo.includes('STARTTLS'), 'no certificate: no STARTTLS');
    d.send('MAIL FROM:<a@example.test>\r\n');
    assert.equal((await d.reply()).code, 530);
    // AUTH LOGIN works as well as PLAIN.
    d.send('AUTH LOGIN\r\n');
    assert.equal((await d.reply()).code, 334);
    d.send(`${Buffer.from(h.seed.projectUid).toString('base64')}\r\n`);
    assert.equal((await d.reply()).code, 334);
    d.send(`${Buffer.from(h.seed.projectKey).toString('base64')}\r\n`);
    assert.equal((await d.reply()).code, 235);
    d.send('QUIT\r\n');
  });

  it('answers whole transactions pipelined in one write, each message and the QUIT after them', async () => {
    const d = await loggedIn();
    const message = (n: number) =>
      `MAIL FROM:<sender@example.test>\r\nRCPT TO:<batch-${n}@example.test>\r\nDATA\r\nFrom: sender@example.test\r\nSubject: batch ${n}\r\n\r\nbody ${n}\r\n.\r\n`;
    d.send(`${message(1)}${message(2)}QUIT\r\n`);
    const codes: number[] = [];
    for (let i = 0; i < 9; i++) codes.push((await d.reply(5000)).code);
    assert.deepEqual(codes, [250, 250, 354, 250, 250, 250, 354, 250, 221]);
    await d.closed();
    assert.equal(await recipientsStored('batch-1@example.test'), 1);
    assert.equal(await recipientsStored('batch-2@example.test'), 1);
  });

  it('answers a pipelined MAIL, RCPT, RCPT and DATA in one write', async () => {
    await repliesInOneWrite(loggedIn);
  });

  it('accepts a dot line that arrives dot-stuffed between CRLFs (control case)', async () => {
    const d = await loggedIn();
    await startData(d, 'control@example.test');
    d.send('From: sender@example.test\r\nSubject: control\r\n\r\nbefore\r\n..\r\nafter\r\n.\r\n');
    assert.equal((await d.reply()).code, 250);
    assert.equal(await recipientsStored('control@example.test'), 1);
    d.send('QUIT\r\n');
  });

  for (const [name, sequence] of Object.entries(SMUGGLING_SEQUENCES)) {
    it(`refuses a message smuggling a second one behind ${name}, as ONE message, and runs none of the smuggled commands`, async () => {
      const d = await loggedIn();
      const victim = `victim-${encodeURIComponent(name).replace(/%/g, '')}@example.test`;
      const smuggled = `smuggled-${encodeURIComponent(name).replace(/%/g, '')}@example.test`;
      await startData(d, victim);
      d.send(
        `From: sender@example.test\r\nSubject: outer\r\n\r\nouter body${sequence}` +
          `MAIL FROM:<admin@example.test>\r\nRCPT TO:<${smuggled}>\r\nDATA\r\nFrom: admin@example.test\r\nSubject: smuggled\r\n\r\nsmuggled\r\n.\r\n`,
      );
      const answer = await d.reply();
      assert.equal(answer.code, 550, answer.text);
      assert.match(answer.text, /smuggling/);
      // The next reply is the NOOP's: the smuggled MAIL/RCPT/DATA were never commands.
      d.send('NOOP\r\n');
      const noop = await d.reply();
      assert.equal(noop.code, 250);
      assert.match(noop.text, /OK/i);
      assert.equal(await recipientsStored(victim), 0);
      assert.equal(await recipientsStored(smuggled), 0);
      d.send('QUIT\r\n');
    });
  }

  it('refuses an empty message with an answer that says so', async () => {
    const d = await loggedIn();
    await startData(d, 'empty@example.test');
    d.send('.\r\n');
    const answer = await d.reply();
    assert.equal(answer.code, 550);
    assert.match(answer.text, /5\.6\.0 The message is empty/);
    assert.equal(await recipientsStored('empty@example.test'), 0);
    d.send('QUIT\r\n');
  });

  it('stores nothing of a message whose client goes away before the end of DATA, and logs it as no error', async () => {
    const d = await loggedIn();
    await startData(d, 'gone@example.test');
    d.send('From: sender@example.test\r\nSubject: cut off\r\n\r\nhalf a bod');
    const note = 'the client closed the connection before the end of a message';
    const seen = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('no log line about the closed connection within 5 s')), 5000);
      const check = () => (logged.some((l) => l.msg.includes(note)) ? (clearTimeout(timer), resolve()) : setTimeout(check, 20));
      check();
    });
    d.close();
    await seen;
    const line = logged.find((l) => l.msg.includes(note));
    assert.equal(line?.level, 30, 'logged at info');
    assert.deepEqual(
      logged.filter((l) => l.level >= 50).map((l) => l.msg),
      [],
    );
    assert.equal(await recipientsStored('gone@example.test'), 0);
  });

  it('refuses a NUL or a bare LF inside a header line', async () => {
    const d = await loggedIn();
    await startData(d, 'nul@example.test');
    d.send('From: sender@example.test\r\nSubject: a\0b\r\n\r\nbody\r\n.\r\n');
    const nul = await d.reply();
    assert.equal(nul.code, 550);
    assert.match(nul.text, /NUL/);
    await startData(d, 'lf@example.test');
    d.send('From: sender@example.test\r\nSubject: a\nBcc: x@example.test\r\n\r\nbody\r\n.\r\n');
    const lf = await d.reply();
    assert.equal(lf.code, 550);
    assert.match(lf.text, /bare LF/);
    assert.equal(await recipientsStored('nul@example.test'), 0);
    assert.equal(await recipientsStored('lf@example.test'), 0);
  });

  it('answers 552 over SIZE: declared in MAIL FROM, or found in DATA', async () => {
    const d = await loggedIn();
    d.send('MAIL FROM:<sender@example.test> SIZE=100000\r\n');
    assert.equal((await d.reply()).code, 552);
    await startData(d, 'big@example.test');
    d.send(`From: sender@example.test\r\n\r\n${'x'.repeat(998)}\r\n`.repeat(70) + '.\r\n');
    assert.equal((await d.reply()).code, 552);
    assert.equal(await recipientsStored('big@example.test'), 0);
  });

  it('answers 452 past the recipients limit', async () => {
    const d = await loggedIn();
    d.send('MAIL FROM:<sender@example.test>\r\nRCPT TO:<r1@example.test>\r\nRCPT TO:<r2@example.test>\r\nRCPT TO:<r3@example.test>\r\nRCPT TO:<r4@example.test>\r\n');
    const codes = [];
    for (let i = 0; i < 5; i++) codes.push((await d.reply()).code);
    assert.deepEqual(codes, [250, 250, 250, 250, 452]);
  });

  it('closes with 421 past the messages per connection', async () => {
    const d = await loggedIn();
    for (let i = 0; i < 2; i++) {
      await startData(d, `per-connection-${i}@example.test`);
      d.send(`From: sender@example.test\r\nSubject: ${i}\r\n\r\nbody\r\n.\r\n`);
      assert.equal((await d.reply()).code, 250);
    }
    d.send('MAIL FROM:<sender@example.test>\r\n');
    assert.equal((await d.reply()).code, 421);
    await d.closed();
  });

  it('turns away connections past the per-address limit with 421', async () => {
    await closeAll();
    const held: Dialog[] = [];
    for (let i = 0; i < 4; i++) {
      const d = await dialog();
      assert.equal((await d.reply()).code, 220);
      held.push(d);
    }
    const extra = await dialog();
    assert.equal((await extra.reply()).code, 421);
    for (const d of held) d.close();
  });

  it('closes an idle connection, and a busy one at the total time limit', async () => {
    await closeAll();
    const idle = await dialog();
    assert.equal((await idle.reply()).code, 220);
    const timeout = await idle.reply(5000);
    assert.equal(timeout.code, 421);
    await idle.closed(5000);

    const started = Date.now();
    const busy = await loggedIn();
    let closed = false;
    busy.closed(10_000).then(() => (closed = true), () => undefined);
    // A NOOP every 300 ms keeps it from being idle; at most 30 of them (9 s) before the test fails.
    for (let i = 0; i < 30 && !closed; i++) {
      busy.send('NOOP\r\n');
      await busy.reply(2000).catch(() => undefined);
      await new Promise((r) => setTimeout(r, 300));
    }
    assert.ok(closed, 'the total time limit closed the connection');
    // The last reply before the close says why (replies still unread are kept past the close).
    let last: SmtpReplyText | null = null;
    for (let answer = await busy.reply(500).catch(() => null); answer; answer = await busy.reply(500).catch(() => null)) last = answer;
    assert.equal(last?.code, 421, `the last reply is the time limit's 421 (got ${last?.text})`);
    assert.match(last?.text ?? '', /4\.4\.2 Connection time limit/);
    assert.ok(Date.now() - started >= 2500);
  });

  // Last: it leaves 127.0.0.1 locked out of AUTH for the rest of the window.
  it(`answers 535 to a wrong key, then 421 after ${MAX_AUTH_FAILURES} failures from one address`, async () => {
    const d = await dialog();
    assert.equal((await d.reply()).code, 220);
    d.send('EHLO client.test\r\n');
    await d.reply();
    const codes: number[] = [];
    for (let i = 0; i < MAX_AUTH_FAILURES; i++) {
      d.send(`AUTH PLAIN ${Buffer.from(`\0${h.seed.projectUid}\0wrong-${i}`).toString('base64')}\r\n`);
      codes.push((await d.reply()).code);
    }
    assert.deepEqual(codes, new Array(MAX_AUTH_FAILURES).fill(535));
    await closeAll();
    const fresh = await dialog();
    assert.equal((await fresh.reply()).code, 220);
    fresh.send('EHLO client.test\r\n');
    await fresh.reply();
    // Even the right key is turned away now.
    fresh.send(`AUTH PLAIN ${Buffer.from(`\0${h.seed.projectUid}\0${h.seed.projectKey}`).toString('base64')}\r\n`);
    assert.equal((await fresh.reply()).code, 421);
  });
});

describe('SMTP submission: the per-key rate limit', () => {
  let h: SubmissionHarness;
  before(async () => {
    h = await startSubmissionHarness({ tls: false, delivery: false, config: { rateLimitPerKey: '2/1h' } });
  });
  after(async () => {
    await h?.close();
  });

  it('answers 451 once the key has used its budget, API and SMTP alike', async () => {
    const d = await openDialog(h.port);
    try {
      await d.login(h.seed.projectUid, h.seed.projectKey);
      // One token goes to the API...
      const api = await h.t.call('send_message', { api_key: h.seed.projectKey, arguments: { recipients: ['api@example.test'], headers: { from: 'a@example.test' }, content: { 'text/plain': 'x' } } });
      assert.equal(api.status, 200, JSON.stringify(api.body));
      // ...one to this message...
      d.send('MAIL FROM:<sender@example.test>\r\nRCPT TO:<first@example.test>\r\nDATA\r\n');
      assert.deepEqual([(await d.reply()).code, (await d.reply()).code, (await d.reply()).code], [250, 250, 354]);
      d.send('From: sender@example.test\r\nSubject: first\r\n\r\nbody\r\n.\r\n');
      assert.equal((await d.reply()).code, 250);
      // ...and the next is deferred.
      d.send('MAIL FROM:<sender@example.test>\r\n');
      const deferred = await d.reply();
      assert.equal(deferred.code, 451);
      assert.match(deferred.text, /Rate limit of this API key exceeded .* retry in \d+ s/);
    } finally {
      d.close();
    }
  });
});

describe('SMTP submission: the replies to a pipelined group on TLS', () => {
  let h: SubmissionHarness;
  before(async () => {
    h = await startSubmissionHarness({ delivery: false });
  });
  after(async () => {
    await h?.close();
  });

  it('answers a pipelined MAIL, RCPT, RCPT and DATA in one TLS record', async () => {
    await repliesInOneWrite(async () => {
      const d = await openDialog(h.tlsPort!, { secure: true });
      await d.login(h.seed.projectUid, h.seed.projectKey);
      return d;
    });
  });
});

/**
 * On a session of its own (`loggedIn`), sends MAIL, two RCPT and DATA in one write and counts this
 * process's write system calls until the 354 (Linux's /proc; the client and the listener are both
 * here): one for the client's group, one for the four replies. Other writes of the process (the
 * test runner's output) may fall into a group's count: the fewest of up to three sessions counts.
 */
async function repliesInOneWrite(loggedIn: () => Promise<Dialog>): Promise<void> {
  const writes = () => Number(/^syscw: (\d+)$/m.exec(fs.readFileSync('/proc/self/io', 'utf8'))![1]);
  const counts: number[] = [];
  while (counts.length < 3 && !counts.some((n) => n <= 2)) {
    const d = await loggedIn();
    try {
      const before = writes();
      d.send('MAIL FROM:<sender@example.test>\r\nRCPT TO:<one@example.test>\r\nRCPT TO:<two@example.test>\r\nDATA\r\n');
      const codes: number[] = [];
      for (let i = 0; i < 4; i++) codes.push((await d.reply()).code);
      counts.push(writes() - before);
      assert.deepEqual(codes, [250, 250, 250, 354]);
      d.send('From: sender@example.test\r\nSubject: grouped\r\n\r\nbody\r\n.\r\nQUIT\r\n');
      assert.equal((await d.reply()).code, 250);
      assert.equal((await d.reply()).code, 221);
      await d.closed();
    } finally {
      d.close();
    }
  }
  assert.ok(Math.min(...counts) <= 2, `writes for the client's group and its four replies: ${counts.join(', ')}`);
}

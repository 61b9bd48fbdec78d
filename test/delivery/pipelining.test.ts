// PIPELINING (RFC 2920): against a hand-written SMTP server that records when each command arrives
// relative to its own replies, MAIL FROM, RCPT TO and DATA arrive before the server answers the
// first of them; failures in the middle of the group are reported as the right command's reply;
// a server without PIPELINING gets one command at a time.
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, describe, it } from 'node:test';
import pino from 'pino';
import { classifySmtpReply } from '../../src/domain/classify-smtp-reply.ts';
import { SmtpClient } from '../../src/delivery/smtp-client.ts';
import type { Destination } from '../../src/delivery/routes.ts';

interface Script {
  pipelining: boolean;
  /** offer STARTTLS, then answer the handshake with garbage */
  brokenTls?: boolean;
  mail?: string;
  rcpt?: string;
  data?: string;
  /** answer this command `421 4.3.2 Service shutting down` and close the connection */
  shutdownAt?: 'MAIL' | 'RCPT' | 'DATA';
}

/** A minimal SMTP server: it logs every command line and how many replies it had sent before the line arrived. */
async function startRawServer(script: Script) {
  const log: Array<{ line: string; repliesBefore: number }> = [];
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    let replies = 0;
    let inData = false;
    let buffer = '';
    // A client that gives up (a failed STARTTLS) may have sent more lines in the same chunk: once
    // this side has ended the connection they get no answer (a write after end would throw).
    socket.on('error', () => {});
    const send = (text: string) => {
      if (socket.writableEnded || socket.destroyed) return;
      replies++;
      socket.write(text + '\r\n');
    };
    send('220 raw.test ESMTP');
    socket.on('data', (chunk) => {
      // Lines of one chunk arrived together: they count the replies sent before the chunk came.
      const repliesAtArrival = replies;
      buffer += chunk.toString('latin1');
      let nl: number;
      while ((nl = buffer.indexOf('\r\n')) !== -1) {
        const line = buffer.slice(0, nl);
        buffer = buffer.slice(nl + 2);
        if (inData) {
          if (line === '.') {
            inData = false;
            send('250 2.0.0 queued');
          }
          continue;
        }
        log.push({ line, repliesBefore: repliesAtArrival });
        const verb = line.slice(0, 4).toUpperCase();
        if (script.shutdownAt === verb) {
          send('421 4.3.2 Service shutting down');
          socket.end();
          return;
        }
        if (verb === 'EHLO') send(`250-raw.test\r\n250-8BITMIME\r\n${script.pipelining ? '250-PIPELINING\r\n' : ''}${script.brokenTls ? '250-STARTTLS\r\n' : ''}250 SIZE 10000000`);
        else if (verb === 'STAR') {
          send('220 2.0.0 Ready to start TLS');
          socket.end('this is not a TLS server hello\r\n');
        }
        else if (verb === 'MAIL') send(script.mail ?? '250 2.1.0 ok');
        else if (verb === 'RCPT') send(script.mail && !script.mail.startsWith('2') ? '503 5.5.1 need MAIL' : (script.rcpt ?? '250 2.1.5 ok'));
        else if (verb === 'DATA') {
          const failed = (script.mail && !script.mail.startsWith('2')) || (script.rcpt && !script.rcpt.startsWith('2'));
          if (failed) send('554 5.5.1 no valid recipients');
          else if (script.data) send(script.data);
          else {
            inData = true;
            send('354 go ahead');
          }
        } else if (verb === 'QUIT') {
          send('221 bye');
          socket.end();
        } else send('250 ok');
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    log,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise((r) => server.close(r));
    },
  };
}

function client(): SmtpClient {
  return new SmtpClient({
    ehloName: 'posthorn.test',
    requireTls: false,
    maxConnectionsPerDestination: 1,
    maxConnections: 10,
    connectTimeoutMs: 2000,
    greetingTimeoutMs: 2000,
    socketTimeoutMs: 2000,
    dataDoneTimeoutMs: 2000,
    log: pino({ level: 'silent' }),
  });
}

const raw = Buffer.from('Subject: x\r\nMessage-ID: <p@posthorn.test>\r\n\r\nhello\r\n');
const destination = (port: number): Destination => ({ address: '127.0.0.1', port, name: 'raw.test', secure: false, auth: null, via: 'transport' });

describe('the SMTP client against a hand-written server: pipelining, TLS fallback', () => {
  const cleanup: Array<() => Promise<void> | void> = [];
  after(async () => {
    for (const f of cleanup.reverse()) await f();
  });

  async function run(script: Script, messages = 2) {
    const server = await startRawServer(script);
    const smtp = client();
    cleanup.push(() => server.close(), () => smtp.close());
    const results = [];
    for (let i = 0; i < messages; i++) results.push(await smtp.send(destination(server.port), { from: 'bounce@posthorn.test', to: `r${i}@raw.test` }, raw, null));
    return { server, results };
  }

  it('sends MAIL, RCPT and DATA together when the server offers PIPELINING, on a reused connection', async () => {
    const { server, results } = await run({ pipelining: true }, 3);
    assert.deepEqual(results.map((r) => classifySmtpReply(r).resultCode), ['SMTP_250', 'SMTP_250', 'SMTP_250']);
    const mails = server.log.filter((l) => l.line.startsWith('MAIL'));
    assert.equal(mails.length, 3);
    assert.equal(server.log.filter((l) => l.line.startsWith('EHLO')).length, 1, 'one connection for all three');
    for (const mail of mails) {
      const i = server.log.indexOf(mail);
      const [rcpt, data] = [server.log[i + 1], server.log[i + 2]];
      assert.match(rcpt.line, /^RCPT TO:/);
      assert.equal(data.line, 'DATA');
      assert.equal(rcpt.repliesBefore, mail.repliesBefore, 'RCPT was sent before the MAIL reply');
      assert.equal(data.repliesBefore, mail.repliesBefore, 'DATA was sent before the MAIL and RCPT replies');
    }
  });

  it('waits for each reply when the server does not offer PIPELINING', async () => {
    const { server } = await run({ pipelining: false }, 1);
    const i = server.log.findIndex((l) => l.line.startsWith('MAIL'));
    assert.equal(server.log[i + 1].repliesBefore, server.log[i].repliesBefore + 1);
    assert.equal(server.log[i + 2].repliesBefore, server.log[i].repliesBefore + 2);
  });

  it('reports a pipelined RCPT rejection as the RCPT reply', async () => {
    const { results } = await run({ pipelining: true, rcpt: '550 5.1.1 no such user' }, 1);
    assert.equal(results[0].stage, 'rcpt');
    assert.equal(results[0].code, 550);
    assert.deepEqual(classifySmtpReply(results[0]), { kind: 'failed', resultCode: 'SMTP_550', resultMessage: '5.1.1 no such user', bounce: 'hard' });
  });

  it('reports a pipelined MAIL rejection as the MAIL reply, not the 503s that follow it', async () => {
    const { results } = await run({ pipelining: true, mail: '451 4.3.0 try later' }, 1);
    assert.equal(results[0].stage, 'mail');
    assert.equal(results[0].code, 451);
    assert.equal(classifySmtpReply(results[0]).kind, 'deferred');
  });

  it('falls back to plain text when STARTTLS fails, and keeps doing so for that destination', async () => {
    const { server, results } = await run({ pipelining: true, brokenTls: true }, 2);
    assert.deepEqual(results.map((r) => r.code), [250, 250]);
    const starttls = server.log.filter((l) => l.line === 'STARTTLS').length;
    assert.equal(starttls, 1, 'the second message did not try TLS again');
  });

  for (const [pipelining, at, stage] of [
    [true, 'MAIL', 'mail'],
    [true, 'RCPT', 'rcpt'],
    [true, 'DATA', 'data'],
    [false, 'RCPT', 'rcpt'],
  ] as const) {
    it(`reports a 421 to ${at} from a server that then closes as its reply (${pipelining ? 'pipelined' : 'one command at a time'})`, async () => {
      const { results } = await run({ pipelining, shutdownAt: at }, 1);
      assert.equal(results[0].code, 421, results[0].text);
      assert.equal(results[0].stage, stage);
      assert.deepEqual(classifySmtpReply(results[0]), { kind: 'deferred', resultCode: 'SMTP_421', resultMessage: '4.3.2 Service shutting down', bounce: 'soft' });
    });
  }

  it('reports a refused DATA as the DATA reply', async () => {
    const { results } = await run({ pipelining: true, data: '452 4.3.1 out of storage' }, 1);
    assert.equal(results[0].stage, 'data');
    assert.equal(results[0].code, 452);
  });
});

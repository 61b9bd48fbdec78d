// A guard on the Nodemailer internals that src/delivery/smtp-pipelining.ts patches: private
// methods and fields of SMTPConnection that no release promises to keep. If an upgrade moves one,
// the patch would either break delivery or (its designed fallback) silently stop pipelining, which
// halves a pooled connection's rate. Each check fails naming the internal that changed and the
// installed version; the last one proves, against a real SMTP peer on 127.0.0.1, that a message
// really goes out pipelined (RCPT and DATA written before MAIL is answered).
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import SMTPConnection from 'nodemailer/lib/smtp-connection/index.js';
import { installSmtpPipelining } from '../../src/delivery/smtp-pipelining.ts';

const NODEMAILER_VERSION = (createRequire(import.meta.url)('nodemailer/package.json') as { version: string }).version;
const PATCHED_BY = 'src/delivery/smtp-pipelining.ts';

function changed(what: string): string {
  return `nodemailer ${NODEMAILER_VERSION}: ${what}. ${PATCHED_BY} relies on it: adapt the patch (or drop it) before upgrading.`;
}

type Conn = Record<string, any>;

/**
 * A scripted SMTP server over a raw socket, so the test sees exactly what arrives when: it
 * announces PIPELINING and answers MAIL FROM only once the RCPT TO and DATA lines have arrived too
 * (or after `mailReplyWaitMs`, when the client waits for the reply as an unpipelined client does).
 */
interface ScriptedServer {
  port: number;
  /** for each MAIL FROM: the commands that had arrived by the time it was answered */
  linesAtMailReply: string[][];
  received: string[];
  close(): Promise<void>;
}

async function startScriptedServer(mailReplyWaitMs: number): Promise<ScriptedServer> {
  const linesAtMailReply: string[][] = [];
  const received: string[] = [];
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.setEncoding('utf8');
    let buffer = '';
    let inData = false;
    let pending: string[] = [];
    let mailTimer: NodeJS.Timeout | null = null;
    const answerMail = () => {
      if (mailTimer) clearTimeout(mailTimer);
      mailTimer = null;
      linesAtMailReply.push([...pending]);
      socket.write('250 2.1.0 Ok\r\n');
      for (const line of pending.slice(1)) answer(line);
      pending = [];
    };
    const answer = (line: string) => {
      const verb = line.slice(0, 4).toUpperCase();
      if (verb === 'EHLO') socket.write('250-scripted.test\r\n250-PIPELINING\r\n250-8BITMIME\r\n250 SMTPUTF8\r\n');
      else if (verb === 'RCPT') socket.write('250 2.1.5 Ok\r\n');
      else if (verb === 'DATA') {
        inData = true;
        socket.write('354 End data with <CR><LF>.<CR><LF>\r\n');
      } else if (verb === 'QUIT') socket.end('221 Bye\r\n');
      else if (verb === 'RSET' || verb === 'NOOP') socket.write('250 Ok\r\n');
      else socket.write('502 5.5.2 Not implemented\r\n');
    };
    socket.on('data', (chunk: string) => {
      buffer += chunk;
      let eol: number;
      while ((eol = buffer.indexOf('\r\n')) >= 0) {
        const line = buffer.slice(0, eol);
        buffer = buffer.slice(eol + 2);
        if (inData) {
          if (line === '.') {
            inData = false;
            socket.write('250 2.0.0 Ok: queued\r\n');
          }
          continue;
        }
        received.push(line);
        if (pending.length > 0) {
          pending.push(line);
          if (/^DATA$/i.test(line)) answerMail();
          continue;
        }
        if (/^MAIL FROM:/i.test(line)) {
          pending = [line];
          // An unpipelined client sends nothing more until MAIL is answered: answer after a bounded wait.
          mailTimer = setTimeout(answerMail, mailReplyWaitMs);
          continue;
        }
        answer(line);
      }
    });
    socket.write('220 scripted.test ESMTP\r\n');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    linesAtMailReply,
    received,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

function connect(port: number, options: Record<string, unknown> = {}): Promise<Conn> {
  const conn = new SMTPConnection({ host: '127.0.0.1', port, ignoreTLS: true, name: 'client.test', ...options } as never) as unknown as Conn;
  return new Promise((resolve, reject) => {
    conn.once('error', reject);
    conn.connect(() => resolve(conn));
  });
}

function send(conn: Conn, to: string): Promise<{ accepted: string[] }> {
  return new Promise((resolve, reject) => conn.send({ from: 'sender@posthorn.test', to: [to] }, 'Subject: hi\r\n\r\nhello\r\n', (err: Error | null, info: { accepted: string[] }) => (err ? reject(err) : resolve(info))));
}

describe(`Nodemailer internals patched by ${PATCHED_BY}`, () => {
  let server: ScriptedServer;
  before(async () => {
    server = await startScriptedServer(2000);
  });
  after(async () => server?.close());

  it('SMTPConnection still has the private methods the patch wraps or calls', () => {
    const proto = (SMTPConnection as unknown as { prototype: Record<string, unknown> }).prototype;
    for (const method of ['send', '_setEnvelope', '_createSendStream', '_actionSMTPStream', '_sendCommand', '_formatError', '_getDsnRcptToArgs']) {
      assert.equal(typeof proto[method], 'function', changed(`SMTPConnection.prototype.${method} is no longer a function`));
    }
    assert.equal((proto._setEnvelope as (...a: unknown[]) => unknown).length, 2, changed('_setEnvelope no longer takes (envelope, callback)'));
    assert.equal((proto.send as (...a: unknown[]) => unknown).length, 3, changed('send no longer takes (envelope, message, callback)'));
  });

  it('a connected SMTPConnection still keeps the fields the patch reads', async () => {
    const conn = await connect(server.port);
    try {
      assert.ok(Array.isArray(conn._supportedExtensions), changed('_supportedExtensions is no longer an array'));
      assert.ok(conn._supportedExtensions.includes('PIPELINING'), changed('_supportedExtensions no longer lists PIPELINING when the server announces it'));
      assert.ok(Array.isArray(conn._responseActions), changed('_responseActions (the queue of reply handlers) is no longer an array'));
      assert.ok(Array.isArray(conn._ehloLines), changed('_ehloLines is no longer an array'));
      assert.equal(typeof conn.options, 'object', changed('the connection no longer keeps its options as .options'));
      // The attempt's TLS state is the connection's `secure` (false here: no STARTTLS on this server).
      assert.equal((conn as unknown as { secure?: unknown }).secure, false, changed('the connection no longer keeps whether it is encrypted as .secure'));
      for (const member of ['cork', 'uncork', 'write']) assert.equal(typeof conn._socket?.[member], 'function', changed(`_socket.${member} is missing`));
      for (const member of ['writableLength', 'writableHighWaterMark']) assert.equal(typeof conn._socket?.[member], 'number', changed(`_socket.${member} is missing`));
      assert.equal(typeof conn._getDsnRcptToArgs(), 'string', changed('_getDsnRcptToArgs() no longer returns a string'));
      const error = conn._formatError('Recipient command failed', 'EENVELOPE', '550 no', 'RCPT TO');
      assert.ok(error instanceof Error && (error as Error & { code?: string }).code === 'EENVELOPE', changed('_formatError(message, code, response, command) no longer makes an Error with that code'));
    } finally {
      conn.quit();
    }
  });

  it('the original _setEnvelope still writes MAIL FROM (with BODY=8BITMIME for use8BitMime) through _sendCommand, queues exactly one reply handler and fills _envelope', async () => {
    const conn = await connect(server.port);
    try {
      const before = conn._responseActions.length;
      let calledBack = false;
      // The patch adds SMTPUTF8 by shadowing _sendCommand while _setEnvelope runs (withSmtpUtf8).
      const written: string[] = [];
      const sendCommand = conn._sendCommand;
      conn._sendCommand = (line: string) => {
        written.push(line);
        sendCommand.call(conn, line);
      };
      conn._setEnvelope({ from: 'sender@posthorn.test', to: ['ann@example.test'], use8BitMime: true }, () => {
        calledBack = true;
      });
      delete conn._sendCommand;
      assert.equal(calledBack, false, changed('_setEnvelope calls back synchronously for a valid envelope'));
      assert.deepEqual(written, ['MAIL FROM:<sender@posthorn.test> BODY=8BITMIME'], changed('_setEnvelope no longer writes MAIL FROM, with BODY=8BITMIME for envelope.use8BitMime, through this._sendCommand before returning'));
      assert.equal(conn._responseActions.length, before + 1, changed('_setEnvelope no longer queues exactly one reply handler (its MAIL FROM handler) before returning'));
      const envelope = conn._envelope;
      assert.ok(envelope && typeof envelope === 'object', changed('_setEnvelope no longer stores the envelope as _envelope'));
      assert.deepEqual(envelope.rcptQueue, ['ann@example.test'], changed('_envelope.rcptQueue no longer holds the recipients waiting for RCPT TO'));
      for (const list of ['accepted', 'rejected', 'rejectedErrors']) assert.ok(Array.isArray(envelope[list]), changed(`_envelope.${list} is no longer an array`));
    } finally {
      conn.close();
    }
  });

  it('with the patch installed, a message to a PIPELINING server goes out pipelined: RCPT and DATA before MAIL is answered', async () => {
    installSmtpPipelining();
    const pipelined = await connect(server.port, { posthornPipelining: true });
    try {
      const info = await send(pipelined, 'ann@example.test');
      assert.deepEqual(info.accepted, ['ann@example.test']);
    } finally {
      pipelined.quit();
    }
    const atReply = server.linesAtMailReply.at(-1) ?? [];
    assert.deepEqual(
      atReply.map((l) => l.split(':')[0].toUpperCase()),
      ['MAIL FROM', 'RCPT TO', 'DATA'],
      changed('the pipelined envelope no longer engages (the patch fell back to the original): MAIL FROM was answered before RCPT TO and DATA arrived'),
    );
    // Without the option the original runs: MAIL is answered alone (after the server's bounded wait).
    const plain = await connect(server.port);
    try {
      await send(plain, 'bob@example.test');
    } finally {
      plain.quit();
    }
    assert.deepEqual((server.linesAtMailReply.at(-1) ?? []).map((l) => l.split(':')[0].toUpperCase()), ['MAIL FROM']);
  });
});

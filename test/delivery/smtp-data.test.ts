// A message given as bytes is written by src/delivery/smtp-pipelining.ts straight to the socket
// (smtpDataPieces): the bytes must be exactly those of Nodemailer's DataStream, which it replaces,
// and a real SMTP server (smtp-server, which undoes the dot-stuffing) must receive the message as
// sent, over plain text and after STARTTLS, on a reused connection.
import assert from 'node:assert/strict';
import { randomInt } from 'node:crypto';
import { after, describe, it } from 'node:test';
import pino from 'pino';
import DataStream from 'nodemailer/lib/smtp-connection/data-stream.js';
import { smtpDataPieces } from '../../src/delivery/smtp-pipelining.ts';
import { SmtpClient } from '../../src/delivery/smtp-client.ts';
import type { Destination } from '../../src/delivery/routes.ts';
import { startSmtpPeer } from '../helpers/smtp-peers.ts';

/** What Nodemailer's DataStream writes for `message` given in one chunk. */
function viaDataStream(message: Buffer): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const stream = new (DataStream as unknown as new () => NodeJS.ReadWriteStream)();
    const out: Buffer[] = [];
    stream.on('data', (chunk: Buffer) => out.push(chunk));
    stream.on('end', () => resolve(Buffer.concat(out)));
    stream.on('error', reject);
    stream.end(message);
  });
}

const EDGES = [
  '',
  '.',
  '.\r\n',
  '..',
  'a',
  'a\r\n',
  'a\r',
  'a\n',
  '\n',
  '\r\n',
  '\n.',
  '\r\n.',
  '\n\n..\n',
  'Subject: x\r\n\r\n.leading dot\r\n..two\r\n.\r\nlast',
  'bare\nline\nfeeds\n.and a dot',
  'mixed\r\n.a\n.b\r.c\r\n\r\n.',
  'no dot\r\nat all\r\n',
];

describe('the DATA of a message written as bytes', () => {
  it('is the bytes of Nodemailer’s DataStream, for edge cases and random text of dots and line ends', async () => {
    const alphabet = ['.', '\r', '\n', 'a', ' '];
    const random = Array.from({ length: 2000 }, () => Array.from({ length: randomInt(0, 24) }, () => alphabet[randomInt(0, alphabet.length)]).join(''));
    for (const text of [...EDGES, ...random]) {
      const message = Buffer.from(text, 'latin1');
      const ours = Buffer.concat(smtpDataPieces(message));
      assert.equal(ours.toString('latin1'), (await viaDataStream(message)).toString('latin1'), JSON.stringify(text));
    }
  });

  it('does not copy a message that needs no change', () => {
    const message = Buffer.from('Subject: x\r\n\r\nhello\r\n');
    const pieces = smtpDataPieces(message);
    assert.equal(pieces.length, 2);
    assert.equal(pieces[0], message);
    assert.equal(pieces[1].toString(), '.\r\n');
  });
});

describe('a message written as bytes, against a real SMTP server', () => {
  const cleanup: Array<() => Promise<void> | void> = [];
  after(async () => {
    for (const f of cleanup.reverse()) await f();
  });

  for (const starttls of [false, true]) {
    it(`arrives as sent, dot lines and all (${starttls ? 'after STARTTLS' : 'plain text'}), several on one connection`, async () => {
      const peer = await startSmtpPeer({ starttls });
      const smtp = new SmtpClient({
        ehloName: 'posthorn.test',
        requireTls: false,
        maxConnectionsPerDestination: 1,
        maxConnections: 4,
        connectTimeoutMs: 5000,
        greetingTimeoutMs: 5000,
        socketTimeoutMs: 5000,
        dataDoneTimeoutMs: 5000,
        log: pino({ level: 'silent' }),
      });
      cleanup.push(() => smtp.close(), () => peer.close());
      const destination: Destination = { address: '127.0.0.1', port: peer.port, name: 'peer.test', secure: false, auth: null, via: 'transport' };
      const bodies = [
        'Subject: one\r\n\r\n.leading dot\r\n..two dots\r\n.\r\nlast line without an end',
        'Subject: two\r\n\r\nplain\r\n',
        'Subject: three\r\n\r\n.\r\n.\r\n',
      ];
      for (const [i, body] of bodies.entries()) {
        const result = await smtp.send(destination, { from: 'bounce@posthorn.test', to: `r${i}@peer.test` }, Buffer.from(body), null);
        assert.equal(result.code, 250, result.text);
        assert.equal(result.tls, starttls);
      }
      await peer.waitForReceived(bodies.length);
      assert.equal(peer.connectionCount, 1, 'one connection for all');
      // smtp-server gives the message as the client meant it: dots undone, the terminator's CRLF kept.
      assert.deepEqual(
        peer.received.map((m) => m.raw.toString()),
        bodies.map((b) => (b.endsWith('\r\n') ? b : `${b}\r\n`)),
      );
    });
  }
});

// The pure parts of delivery: reply classification, relay and transport-map parsing, header
// formatting, text encoding choice, DNS server addresses, MX ordering, what a message needs of the
// server's SMTP extensions.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { classifySmtpReply, splitReply } from '../../src/domain/classify-smtp-reply.ts';
import { envelopeAddress, formatAddressHeader, preferredTextEncoding } from '../../src/domain/compose-mime.ts';
import { prng } from '../helpers/prng.ts';
import { orderMxHosts, parseDnsServer } from '../../src/delivery/dns-resolver.ts';
import { lookupTransport, parseRelayUrl, parseTransportMap, redactUrl } from '../../src/delivery/routes.ts';
import { exchangeFromError, isConnectionFailure } from '../../src/delivery/smtp-client.ts';
import { messageExtensionNeeds, transmissionExtensionNeeds } from '../../src/domain/smtp-extensions.ts';

describe('classifySmtpReply', () => {
  const c = (code: number | null, stage: any, text = 'x', failure?: any) => classifySmtpReply({ code, stage, text, failure });
  it('maps replies to outcomes, codes and bounces', () => {
    assert.deepEqual(c(250, 'message', '2.0.0 Ok'), { kind: 'sent', resultCode: 'SMTP_250', resultMessage: '2.0.0 Ok', bounce: null });
    assert.deepEqual(c(451, 'rcpt'), { kind: 'deferred', resultCode: 'SMTP_451', resultMessage: 'x', bounce: 'soft' });
    assert.deepEqual(c(421, 'greeting'), { kind: 'deferred', resultCode: 'SMTP_421', resultMessage: 'x', bounce: null });
    assert.deepEqual(c(550, 'rcpt'), { kind: 'failed', resultCode: 'SMTP_550', resultMessage: 'x', bounce: 'hard' });
    assert.equal(c(550, 'message', '5.1.1 user unknown').bounce, 'hard');
    // A policy refusal at RCPT (5.7.x) fails the copy but says nothing against the address; unless its text says the mailbox is unknown.
    assert.deepEqual(c(554, 'rcpt', '5.7.1 Message rejected due to policy'), { kind: 'failed', resultCode: 'SMTP_554', resultMessage: '5.7.1 Message rejected due to policy', bounce: null });
    assert.equal(c(550, 'rcpt', '5.7.1 Client host blocked using zen.spamhaus.org').bounce, null);
    assert.equal(c(550, 'rcpt', '5.7.1 <x@y>: Recipient address rejected: User unknown').bounce, 'hard');
    assert.equal(c(550, 'rcpt', '5.1.1 <x@y>: Recipient address rejected').bounce, 'hard');
    assert.equal(c(554, 'message', '5.7.1 spam').bounce, null);
    assert.equal(c(554, 'message', '5.7.1 spam').kind, 'failed');
    assert.equal(c(535, 'auth').kind, 'deferred');
    assert.deepEqual(c(null, 'connect', 'connect ECONNREFUSED', 'refused'), { kind: 'deferred', resultCode: 'CONNECTION_REFUSED', resultMessage: 'connect ECONNREFUSED', bounce: null });
    assert.equal(c(null, 'message', 't', 'timeout').resultCode, 'TIMEOUT');
    // A server without an extension the message needs: permanent, and not the address's fault.
    assert.deepEqual(c(null, 'mail', '5.6.7 no SMTPUTF8', 'no_smtputf8'), { kind: 'failed', resultCode: 'SMTPUTF8_UNSUPPORTED', resultMessage: '5.6.7 no SMTPUTF8', bounce: null });
    assert.deepEqual(c(null, 'mail', '5.6.3 no 8BITMIME', 'no_8bitmime'), { kind: 'failed', resultCode: '8BITMIME_UNSUPPORTED', resultMessage: '5.6.3 no 8BITMIME', bounce: null });
  });
  it('flattens multi-line replies and bounds their length', () => {
    assert.equal(c(550, 'rcpt', 'first\r\nsecond').resultMessage, 'first second');
    assert.equal(c(550, 'rcpt', 'y'.repeat(2000)).resultMessage.length, 500);
    assert.deepEqual(splitReply('250-first\r\n250 2.0.0 second'), { code: 250, text: 'first\r\n2.0.0 second' });
    assert.deepEqual(splitReply('no code'), { code: null, text: 'no code' });
    // Read one byte per character by Nodemailer: UTF-8 text is decoded, other 8-bit text kept as read.
    assert.deepEqual(splitReply(Buffer.from('550 5.1.1 Empfänger unbekannt ✉', 'utf8').toString('latin1')), { code: 550, text: '5.1.1 Empfänger unbekannt ✉' });
    assert.deepEqual(splitReply('550 caf\xe9 ferm\xe9'), { code: 550, text: 'caf\xe9 ferm\xe9' });
    assert.deepEqual(splitReply('550 déjà ✉'), { code: 550, text: 'déjà ✉' });
  });
});

describe('Nodemailer errors as exchanges', () => {
  it('reads stages and failures', () => {
    assert.deepEqual(exchangeFromError({ code: 'EENVELOPE', command: 'RCPT TO', responseCode: 550, response: '550 5.1.1 nope' }), { code: 550, text: '5.1.1 nope', stage: 'rcpt' });
    assert.equal(exchangeFromError({ code: 'EMESSAGE', command: 'DATA', responseCode: 554, response: '554 no' }).stage, 'message');
    assert.equal(exchangeFromError({ code: 'EENVELOPE', command: 'DATA', responseCode: 452, response: '452 full' }).stage, 'data');
    assert.equal(exchangeFromError({ code: 'ECONNECTION', command: 'CONN', responseCode: 421, response: '421 busy' }).stage, 'greeting');
    assert.equal(exchangeFromError({ code: 'ESOCKET', command: 'CONN', message: 'connect ECONNREFUSED 127.0.0.1:1' }).failure, 'refused');
    assert.equal(exchangeFromError({ code: 'ETIMEDOUT', command: 'CONN', message: 'Greeting never received' }).failure, 'timeout');
    assert.equal(exchangeFromError({ code: 'ETLS', command: 'STARTTLS', responseCode: 500, response: '500 no', message: 'Error upgrading connection with STARTTLS: 500 no' }).failure, 'tls_required');
    assert.equal(exchangeFromError({ code: 'ESOCKET', command: 'CONN', message: 'self-signed certificate' }).failure, 'tls');
    assert.equal(exchangeFromError(new Error('Reached maximum number of retries after connection was closed')).failure, 'dropped');
  });
  it('tries the next host only when the server was never talked to', () => {
    assert.equal(isConnectionFailure({ code: null, stage: 'connect', text: '', failure: 'refused' }), true);
    assert.equal(isConnectionFailure({ code: 421, stage: 'greeting', text: '' }), true);
    assert.equal(isConnectionFailure({ code: 451, stage: 'rcpt', text: '' }), false);
    assert.equal(isConnectionFailure({ code: null, stage: 'message', text: '', failure: 'dropped' }), false);
  });
});

describe('routing configuration', () => {
  it('parses relay URLs with their defaults and escaped credentials', () => {
    assert.deepEqual(parseRelayUrl('smtp://u%40x:p%3Aw@relay.example'), { host: 'relay.example', port: 25, secure: false, auth: { user: 'u@x', pass: 'p:w' } });
    assert.deepEqual(parseRelayUrl('smtps://relay.example:2465'), { host: 'relay.example', port: 2465, secure: true, auth: null });
    assert.equal(parseRelayUrl('smtp://[::1]:2525').host, '::1');
    assert.throws(() => parseRelayUrl('http://x'), /smtp:\/\/ or smtps:\/\//);
    assert.throws(() => parseRelayUrl('smtp://u:secret@'), (e: Error) => !e.message.includes('secret'));
    assert.equal(redactUrl('smtp://u:secret@h:25'), 'smtp://u:[redacted]@h:25');
    // A Unicode host name is routed in its ASCII (IDNA) form (an smtp:// URL would percent-encode it).
    assert.equal(parseRelayUrl('smtp://u:p@relais.bücher.example:587').host, 'relais.xn--bcher-kva.example');
  });
  it('reads transport-map domains and hosts written in Unicode in their ASCII (IDNA) form', () => {
    const map = parseTransportMap(['bücher.example=mx.bücher.example:2525', '.bücher.test=10.0.0.3']);
    assert.deepEqual(lookupTransport(map, 'xn--bcher-kva.example'), { host: 'mx.xn--bcher-kva.example', port: 2525 });
    assert.deepEqual(lookupTransport(map, 'a.xn--bcher-kva.test'), { host: '10.0.0.3', port: 25 });
  });
  it('matches transport-map entries exactly, by parent domain, then "*"', () => {
    const map = parseTransportMap(['example.com=10.0.0.1:2525', '.example.com=10.0.0.2', '*=[::1]:26']);
    assert.deepEqual(lookupTransport(map, 'EXAMPLE.com'), { host: '10.0.0.1', port: 2525 });
    assert.deepEqual(lookupTransport(map, 'a.b.example.com'), { host: '10.0.0.2', port: 25 });
    assert.deepEqual(lookupTransport(map, 'other.org'), { host: '::1', port: 26 });
    assert.equal(lookupTransport(parseTransportMap([]), 'x.org'), undefined);
    assert.throws(() => parseTransportMap(['nodomain']), /example\.com=/);
    assert.throws(() => parseTransportMap(['a.com=h:99999']), /port/);
  });
  it('parses DNS server addresses', () => {
    assert.deepEqual(parseDnsServer('127.0.0.1:5353'), { host: '127.0.0.1', port: 5353 });
    assert.deepEqual(parseDnsServer('[::1]:53'), { host: '::1', port: 53 });
    assert.deepEqual(parseDnsServer('::1'), { host: '::1', port: 53 });
    assert.throws(() => parseDnsServer('dns.example'), /IP address/);
  });
  it('orders MX hosts by preference, shuffling only equal ones', () => {
    const hosts = [{ name: 'c', priority: 20 }, { name: 'a', priority: 10 }, { name: 'b', priority: 10 }];
    assert.deepEqual(orderMxHosts(hosts, () => 0.5).map((h) => h.priority), [10, 10, 20]);
    let i = 0;
    const flip = () => [0.5, 0.9, 0.1][i++ % 3];
    assert.deepEqual(orderMxHosts(hosts, flip).map((h) => h.name), ['b', 'a', 'c']);
  });
});

describe('composition helpers', () => {
  it('formats To headers safely', () => {
    assert.equal(formatAddressHeader('a@b.test', null), '<a@b.test>');
    assert.equal(formatAddressHeader('a@b.test', 'Ann Example'), 'Ann Example <a@b.test>');
    assert.equal(formatAddressHeader('a@b.test', 'Doe, John'), '"Doe, John" <a@b.test>');
    assert.match(formatAddressHeader('a@b.test', 'Zoë'), /^=\?UTF-8\?Q\?Zo=C3=AB\?= <a@b\.test>$/);
    assert.equal(formatAddressHeader('a@b.test', 'evil\r\nBcc: x@y'), '"evil Bcc: x@y" <a@b.test>');
  });
  it('chooses quoted-printable for Latin text and base64 otherwise', () => {
    assert.equal(preferredTextEncoding('Hello there', '<p>Hi</p>'), 'quoted-printable');
    assert.equal(preferredTextEncoding('Привет, как дела?'), 'base64');
    assert.equal(preferredTextEncoding(undefined), 'base64');
    assert.equal(preferredTextEncoding('12345 !?', '\r\n'), 'base64', 'no letter at all');
    // The quick recognition of plain text answers as the count does, over texts of every kind.
    const count = (...texts: string[]) => {
      let latin = 0;
      let other = 0;
      for (const unit of texts.join('').split('')) {
        if (/[A-Za-z]/.test(unit)) latin++;
        else if (/[^\x20-\x7f\t\r\n]/.test(unit)) other++;
      }
      return other < latin ? 'quoted-printable' : 'base64';
    };
    const random = prng(20261130);
    const pieces = ['a', 'Z', ' ', '1', '.', '\r\n', '\n', '\t', '\x7f', '\x00', '\x1b', '\x0c', '\u00e9', '\u0436', '\u{1f600}', 'word', ''];
    for (let n = 0; n < 2000; n++) {
      const text = () => Array.from({ length: Math.floor(random() * 10) }, () => pieces[Math.floor(random() * pieces.length)]).join('');
      const texts = [text(), text()];
      assert.equal(preferredTextEncoding(...texts), count(...texts), JSON.stringify(texts));
    }
  });
  it('puts domains of envelope addresses in their ASCII form', () => {
    assert.deepEqual(envelopeAddress('José@Bücher.example'), { address: 'José@xn--bcher-kva.example', domain: 'xn--bcher-kva.example' });
    assert.equal(envelopeAddress('nodomain'), null);
    assert.equal(envelopeAddress('x@'), null);
  });
});

describe('statement shapes', () => {
  it('splits rows into power-of-two chunks', async () => {
    const { powerOfTwoChunks } = await import('../../src/storage/compiled-insert.ts');
    assert.deepEqual(powerOfTwoChunks([...Array(37).keys()], 128).map((c) => c.length), [32, 4, 1]);
    assert.deepEqual(powerOfTwoChunks([...Array(300).keys()], 128).map((c) => c.length), [128, 128, 32, 8, 4]);
    assert.deepEqual(powerOfTwoChunks([], 128), []);
    assert.deepEqual(powerOfTwoChunks([...Array(37).keys()], 128).flat(), [...Array(37).keys()]);
  });
});

describe('what a message needs of the server (SMTPUTF8, 8BITMIME)', () => {
  const needs = (text: string) => messageExtensionNeeds(Buffer.from(text, 'utf8'));
  it('finds 8-bit octets in the header section and in the body apart', () => {
    assert.deepEqual(needs('Subject: hi\r\n\r\nhello\r\n'), { smtpUtf8: false, eightBitMime: false });
    assert.deepEqual(needs('Subject: Grüße\r\n\r\nhello\r\n'), { smtpUtf8: true, eightBitMime: false });
    assert.deepEqual(needs('Subject: hi\r\n\r\nGrüße\r\n'), { smtpUtf8: false, eightBitMime: true });
    assert.deepEqual(needs('Subject: hi\r\nX: é\r\n'), { smtpUtf8: true, eightBitMime: false }, 'no blank line: all header');
    assert.deepEqual(needs('\r\nGrüße'), { smtpUtf8: false, eightBitMime: true }, 'no header at all');
  });
  it('adds SMTPUTF8 for a UTF-8 envelope address or To line, and keeps the message\'s needs otherwise', () => {
    const none = { smtpUtf8: false, eightBitMime: false };
    assert.equal(transmissionExtensionNeeds(none, 'bounce-1@posthorn.test', 'ann@xn--bcher-kva.example', 'ann@xn--bcher-kva.example'), none);
    assert.deepEqual(transmissionExtensionNeeds(none, 'bounce-1@posthorn.test', 'josé@example.test', null), { smtpUtf8: true, eightBitMime: false });
    assert.deepEqual(transmissionExtensionNeeds({ smtpUtf8: false, eightBitMime: true }, 'b@posthorn.test', 'over@example.test', 'josé@example.test'), { smtpUtf8: true, eightBitMime: true });
  });
});

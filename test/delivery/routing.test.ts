// Routing: MX lookups through a real DNS server on 127.0.0.1 (queried by the service's resolver),
// a relay with credentials (STARTTLS and implicit TLS), the transport map, and required TLS.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ManualClock } from '../../src/domain/clock.ts';
import { startDnsServer, type TestDnsServer } from '../helpers/dns-server.ts';
import { reply, startSmtpPeer, type SmtpPeer } from '../helpers/smtp-peers.ts';
import { simpleMessage, startDeliveryHarness, type DeliveryHarness } from './harness.ts';

describe('MX routing through a DNS server on 127.0.0.1', () => {
  let dns: TestDnsServer;
  let peer: SmtpPeer;
  let busy: SmtpPeer;
  let h: DeliveryHarness;
  const clock = new ManualClock(Date.UTC(2026, 3, 1));

  before(async () => {
    peer = await startSmtpPeer();
    // Same port on other loopback addresses: 127.0.0.2 has nothing listening (refused),
    // 127.0.0.3 answers 421 at the greeting.
    busy = await startSmtpPeer({ host: '127.0.0.3', port: peer.port, connect: () => reply(421, '4.7.0 Try again later') });
    dns = await startDnsServer({
      'example.test': { mx: [{ exchange: 'mx-b.example.test', priority: 20 }, { exchange: 'mx-a.example.test', priority: 10 }], ttl: 60 },
      'mx-a.example.test': { a: ['127.0.0.1'] },
      'mx-b.example.test': { a: ['127.0.0.2'] },
      'fallback.test': {
        mx: [
          { exchange: 'down.fallback.test', priority: 5 },
          { exchange: 'busy.fallback.test', priority: 10 },
          { exchange: 'up.fallback.test', priority: 20 },
        ],
      },
      'down.fallback.test': { a: ['127.0.0.2'] },
      'busy.fallback.test': { a: ['127.0.0.3'] },
      'up.fallback.test': { a: ['127.0.0.1'] },
      'plain.test': { a: ['127.0.0.1'] },
      'nullmx.test': { mx: [{ exchange: '.', priority: 0 }], a: ['127.0.0.1'] },
      'nomail.test': { txt: ['v=spf1 -all'] },
      'broken.test': { servfail: true },
    });
    h = await startDeliveryHarness({ clock, config: { dnsServers: [dns.address] }, delivery: { mxPort: peer.port } });
  });
  after(async () => {
    await h?.close();
    await peer?.close();
    await busy?.close();
    await dns?.close();
  });

  it('delivers to the most preferred MX host', async () => {
    await h.send(simpleMessage('ann@example.test'));
    assert.equal(await h.drain(), 1);
    const t = await h.transmission('ann@example.test');
    assert.equal(t.status, 'completed');
    assert.equal((await h.attempts(t.id))[0].mx_host, 'mx-a.example.test');
    assert.deepEqual(peer.received.at(-1)!.to, ['ann@example.test']);
  });

  it('caches the MX answer for its TTL, then asks again', async () => {
    const before = dns.countQueries('example.test', 'MX');
    await h.send(simpleMessage('bob@example.test'));
    assert.equal(await h.drain(), 1);
    assert.equal(dns.countQueries('example.test', 'MX'), before, 'answered from the cache');
    clock.advance(61_000);
    await h.send(simpleMessage('cid@example.test'));
    assert.equal(await h.drain(), 1);
    assert.equal(dns.countQueries('example.test', 'MX'), before + 1, 'asked again after the TTL');
    assert.equal((await h.transmission('cid@example.test')).status, 'completed');
  });

  it('tries the next MX host when one refuses the connection or answers 421 at the greeting', async () => {
    const busyBefore = busy.connectionCount;
    await h.send(simpleMessage('dan@fallback.test'));
    assert.equal(await h.drain(), 1);
    const t = await h.transmission('dan@fallback.test');
    assert.equal(t.status, 'completed', t.result_message);
    assert.equal((await h.attempts(t.id))[0].mx_host, 'up.fallback.test');
    assert.ok(busy.connectionCount > busyBefore, 'the 421 host was tried before the last one');
  });

  it('uses the domain itself when it has no MX (A record fallback)', async () => {
    await h.send(simpleMessage('eve@plain.test'));
    assert.equal(await h.drain(), 1);
    const t = await h.transmission('eve@plain.test');
    assert.equal(t.status, 'completed');
    assert.equal((await h.attempts(t.id))[0].mx_host, 'plain.test');
  });

  it('fails at once on a null MX, a missing domain, or a domain without any mail host', async () => {
    const connections = peer.connectionCount;
    await h.send(simpleMessage(['x@nullmx.test', 'x@nxdomain.test', 'x@nomail.test']));
    assert.equal(await h.drain(), 3);
    const expected: Record<string, string> = { 'x@nullmx.test': 'NULL_MX', 'x@nxdomain.test': 'DNS_NXDOMAIN', 'x@nomail.test': 'DNS_NO_MAIL_HOST' };
    for (const [recipient, code] of Object.entries(expected)) {
      const t = await h.transmission(recipient);
      assert.equal(t.status, 'failed', recipient);
      assert.equal(t.result_code, code, recipient);
      assert.equal(t.attempts, 1);
    }
    assert.equal(peer.connectionCount, connections, 'no SMTP connection for any of them');
  });

  it('defers when DNS fails (SERVFAIL)', async () => {
    await h.send(simpleMessage('x@broken.test'));
    assert.equal(await h.drain(), 1);
    const t = await h.transmission('x@broken.test');
    assert.equal(t.status, 'retry');
    assert.equal(t.result_code, 'DNS_ERROR');
  });
});

describe('relay mode', () => {
  const peers: SmtpPeer[] = [];
  const harnesses: DeliveryHarness[] = [];
  after(async () => {
    for (const h of harnesses) await h.close();
    for (const p of peers) await p.close();
  });

  async function relayTo(peer: SmtpPeer, url: string): Promise<DeliveryHarness> {
    const h = await startDeliveryHarness({ config: { relay: url.replace('PORT', String(peer.port)) } });
    harnesses.push(h);
    return h;
  }

  it('sends every message through the smarthost with STARTTLS and AUTH, whatever the domain', async () => {
    const peer = await startSmtpPeer({ auth: { user: 'relayuser', pass: 's3cret:pw' } });
    peers.push(peer);
    const h = await relayTo(peer, 'smtp://relayuser:s3cret%3Apw@127.0.0.1:PORT');
    await h.send(simpleMessage(['a@one.example', 'b@two.example']));
    assert.equal(await h.drain(), 2);
    assert.equal(peer.received.length, 2);
    for (const mail of peer.received) {
      assert.equal(mail.user, 'relayuser');
      assert.equal(mail.secure, true);
    }
    assert.equal((await h.attempts((await h.transmission('a@one.example')).id))[0].mx_host, '127.0.0.1');
  });

  it('never sends the credentials in clear: a relay that does not offer STARTTLS gets no AUTH and the mail defers', async () => {
    const peer = await startSmtpPeer({ starttls: false, auth: { user: 'relayuser', pass: 'pw' } });
    peers.push(peer);
    const h = await relayTo(peer, 'smtp://relayuser:pw@127.0.0.1:PORT');
    await h.send(simpleMessage('e@five.example'));
    assert.equal(await h.drain(), 1);
    const t = await h.transmission('e@five.example');
    assert.equal(t.status, 'retry');
    assert.equal(t.result_code, 'TLS_REQUIRED');
    assert.equal(peer.received.length, 0);
    assert.ok(peer.connectionCount >= 1, 'the relay was reached');
  });

  it('speaks implicit TLS to an smtps:// relay', async () => {
    const peer = await startSmtpPeer({ secure: true, auth: { user: 'u', pass: 'p' } });
    peers.push(peer);
    const h = await relayTo(peer, 'smtps://u:p@127.0.0.1:PORT');
    await h.send(simpleMessage('c@three.example'));
    assert.equal(await h.drain(), 1);
    assert.equal((await h.transmission('c@three.example')).status, 'completed');
    assert.equal(peer.received[0].secure, true);
  });

  it('defers (never fails) when the relay refuses our credentials, and suppresses nobody', async () => {
    const peer = await startSmtpPeer({ auth: { user: 'u', pass: 'right' } });
    peers.push(peer);
    const h = await relayTo(peer, 'smtp://u:wrong@127.0.0.1:PORT');
    await h.send(simpleMessage('d@four.example'));
    assert.equal(await h.drain(), 1);
    const t = await h.transmission('d@four.example');
    assert.equal(t.status, 'retry');
    assert.equal(t.result_code, 'SMTP_535');
    assert.equal(peer.received.length, 0);
    const suppressions = await h.t.app.services.store.db.selectFrom('suppressions').selectAll().execute();
    assert.equal(suppressions.length, 0);
  });
});

describe('transport map and required TLS', () => {
  const peers: SmtpPeer[] = [];
  let h: DeliveryHarness;
  let plain: SmtpPeer;
  let selfSigned: SmtpPeer;
  let wildcard: SmtpPeer;
  before(async () => {
    plain = await startSmtpPeer({ starttls: false });
    selfSigned = await startSmtpPeer();
    wildcard = await startSmtpPeer();
    peers.push(plain, selfSigned, wildcard);
    h = await startDeliveryHarness({
      config: {
        requireTls: true,
        transportMap: [plain.transportFor('plain.example'), selfSigned.transportFor('.signed.example'), wildcard.transportFor('*')],
      },
    });
  });
  after(async () => {
    await h?.close();
    for (const p of peers) await p.close();
  });

  it('with --require-tls, a server without STARTTLS defers with TLS_REQUIRED and gets no message', async () => {
    await h.send(simpleMessage('a@plain.example'));
    assert.equal(await h.drain(), 1);
    const t = await h.transmission('a@plain.example');
    assert.equal(t.status, 'retry');
    assert.equal(t.result_code, 'TLS_REQUIRED');
    assert.equal(plain.received.length, 0);
  });

  it('with --require-tls, an unverifiable certificate defers with TLS_FAILED', async () => {
    // ".signed.example" matches subdomains only.
    await h.send(simpleMessage('b@mx.signed.example'));
    assert.equal(await h.drain(), 1);
    const t = await h.transmission('b@mx.signed.example');
    assert.equal(t.status, 'retry');
    assert.equal(t.result_code, 'TLS_FAILED');
    assert.match(t.result_message, /certificate/i);
    assert.equal(selfSigned.received.length, 0);
  });

  it('"*" catches every other domain', async () => {
    // The wildcard peer also presents a self-signed certificate, so this defers too; what matters is
    // where it went.
    await h.send(simpleMessage('c@signed.example'));
    assert.equal(await h.drain(), 1);
    assert.ok(wildcard.connectionCount > 0);
    assert.equal(selfSigned.connectionCount, 1, 'signed.example itself is not a subdomain of .signed.example');
  });
});

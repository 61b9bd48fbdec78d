// Sending domains over the real HTTP API: records to publish, a DKIM key that really signs (checked
// by mailauth's verifier against the published record), check_domain against a DNS server on
// 127.0.0.1, findDkimKey's matching and cache.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { dkimVerify } from 'mailauth/lib/dkim/verify.js';
import nodemailer from 'nodemailer';
import pino from 'pino';
import { REDACT_PATHS } from '../../src/log.ts';
import { DKIM_CACHE_MS, findDkimKey } from '../../src/delivery/dkim.ts';
import { ManualClock } from '../../src/domain/clock.ts';
import { formatIsoTime } from '../../src/domain/time.ts';
import { startDnsServer, type TestDnsServer } from '../helpers/dns-server.ts';
import { startTestApp, type Seed, type TestApp } from '../helpers/app.ts';

/** A TXT value split into <=255-byte strings, as it is published. */
function chunked(value: string): string[] {
  const out: string[] = [];
  for (let i = 0; i < value.length; i += 255) out.push(value.slice(i, i + 255));
  return out;
}

describe('sending domains', () => {
  let t: TestApp;
  let seed: Seed;
  let dns: TestDnsServer;
  const clock = new ManualClock(Date.UTC(2026, 10, 22, 5, 0, 0));

  before(async () => {
    dns = await startDnsServer();
    t = await startTestApp({ background: false, clock, config: { dnsServers: [dns.address], mailerHost: 'mta.posthorn.test' } });
    seed = await t.seed();
  });
  after(async () => {
    await t.close();
    await dns.close();
  });

  const call = (method: string, args: unknown = {}, key = seed.accountKey) => t.call(method, { api_key: key, arguments: args });

  it('creates a domain and answers the DNS records to publish, never the private key', async () => {
    const r = await call('create_domain', { name: 'Example.ORG.' });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    const d = r.body.data.domain;
    assert.equal(d.name, 'example.org');
    assert.equal(d.dkim_selector, 'posthorn20261122');
    assert.equal(d.created_at, '2026-11-22T05:00:00Z');
    assert.equal(d.last_check, null);
    assert.equal(d.dns_records.dkim.type, 'TXT');
    assert.equal(d.dns_records.dkim.name, 'posthorn20261122._domainkey.example.org');
    assert.match(d.dns_records.dkim.value, /^v=DKIM1; k=rsa; p=[A-Za-z0-9+/=]{380,}$/);
    assert.deepEqual(d.dns_records.spf, { ...d.dns_records.spf, type: 'TXT', name: 'example.org', value: 'v=spf1 a:mta.posthorn.test ~all' });
    assert.deepEqual(d.dns_records.return_path, { ...d.dns_records.return_path, type: 'MX', name: 'bounces.posthorn.test', value: '10 mta.posthorn.test' });
    assert.doesNotMatch(JSON.stringify(r.body), /PRIVATE KEY/);

    const stored = await t.app.services.store.db.selectFrom('domains').selectAll().where('name', '=', 'example.org').executeTakeFirstOrThrow();
    assert.match(stored.dkim_private_key, /^v1:/, 'stored sealed');
    assert.doesNotMatch(stored.dkim_private_key, /PRIVATE KEY/);

    const again = await call('create_domain', { name: 'example.org' });
    assert.equal(again.status, 400);
    assert.match(again.body.response.message, /already exists/);
  });

  it('answers clear errors for bad names, unknown domains and the wrong key kind', async () => {
    for (const name of ['not a domain', 'localhost', '-bad.example', 'a@b.example', '1.2.3.4', 'x'.repeat(64) + '.example']) {
      const r = await call('create_domain', { name });
      assert.equal(r.status, 412, name);
      assert.equal(r.body.response.status, 'precondition_failed');
      assert.match(r.body.response.message, /Invalid domain name/);
    }
    const missing = await call('create_domain', {});
    assert.equal(missing.status, 400);
    assert.match(missing.body.response.message, /"name"/);
    const wrongType = await call('create_domain', { name: ['x'] });
    assert.equal(wrongType.status, 406);
    for (const method of ['get_domain', 'check_domain', 'delete_domain']) {
      const r = await call(method, { name: 'nope.example' });
      assert.equal(r.status, 404, method);
      assert.equal(r.body.response.status, 'not_found');
    }
    const projectKey = await call('list_domains', {}, seed.projectKey);
    assert.equal(projectKey.status, 401);
    assert.match(projectKey.body.response.message, /needs an account API key/);
  });

  it('signs with a key that verifies against the published record (mailauth)', async () => {
    const created = (await call('create_domain', { name: 'signed.example' })).body.data.domain;
    const key = await findDkimKey(t.app.services, seed.accountId, 'Sender <news@Signed.Example>');
    assert.ok(key);
    assert.equal(key.domainName, 'signed.example');
    assert.equal(key.keySelector, created.dkim_selector);
    assert.equal(key.privateKey.asymmetricKeyType, 'rsa');

    const transport = nodemailer.createTransport({ streamTransport: true, buffer: true, newline: '\r\n', dkim: { ...key, privateKey: key.privateKey as unknown as string } });
    const info = await transport.sendMail({ from: 'news@signed.example', to: 'someone@example.net', subject: 'Signed', text: 'Hello, signed world.' });
    const signed = info.message as Buffer;
    assert.match(signed.toString(), /^DKIM-Signature: .*d=signed\.example/m);

    const published = new Map([[created.dns_records.dkim.name, chunked(created.dns_records.dkim.value)]]);
    const resolver = async (name: string, rrtype: string) => {
      const record = published.get(name);
      if (rrtype !== 'TXT' || !record) throw Object.assign(new Error('no such record'), { code: 'ENOTFOUND' });
      return [record];
    };
    const good = await dkimVerify(signed, { resolver });
    assert.equal(good.results[0].status.result, 'pass', JSON.stringify(good.results[0].status));

    // Tampered body: the verifier must fail it (the test can fail).
    const tampered = Buffer.from(signed.toString().replace('Hello, signed world.', 'Hello, forged world.'));
    const bad = (await dkimVerify(tampered, { resolver })).results[0].status;
    assert.notEqual(bad.result, 'pass');
    assert.match(String(bad.comment), /body hash/);
    // Another domain's key published under this name: fails too.
    const other = (await call('create_domain', { name: 'other.example' })).body.data.domain;
    published.set(created.dns_records.dkim.name, chunked(other.dns_records.dkim.value));
    assert.notEqual((await dkimVerify(signed, { resolver })).results[0].status.result, 'pass');
  });

  it('matches the From domain, then its parents, never a TLD; caches briefly; forgets on delete', async () => {
    const services = t.app.services;
    await call('create_domain', { name: 'parent.example' });
    assert.equal((await findDkimKey(services, seed.accountId, 'a@mail.news.parent.example'))?.domainName, 'parent.example');
    assert.equal(await findDkimKey(services, seed.accountId, 'a@unrelated.example'), null);
    assert.equal(await findDkimKey(services, seed.accountId, 'a@example'), null);
    assert.equal(await findDkimKey(services, seed.accountId, null), null);
    assert.equal(await findDkimKey(services, seed.accountId, 'no address'), null);
    const other = await t.seed('other');
    assert.equal(await findDkimKey(services, other.accountId, 'a@parent.example'), null, "another account's domain is not used");

    // A subdomain of its own wins over the parent.
    await call('create_domain', { name: 'news.parent.example' });
    assert.equal((await findDkimKey(services, seed.accountId, 'a@mail.news.parent.example'))?.domainName, 'news.parent.example');

    // Deleted through the API: forgotten at once in this process.
    assert.equal((await call('delete_domain', { name: 'news.parent.example' })).status, 200);
    assert.equal((await findDkimKey(services, seed.accountId, 'a@news.parent.example'))?.domainName, 'parent.example');

    // Deleted behind the cache's back (another process): still served until the cache expires.
    await services.store.write((trx) => trx.deleteFrom('domains').where('name', '=', 'parent.example').execute());
    assert.equal((await findDkimKey(services, seed.accountId, 'a@news.parent.example'))?.domainName, 'parent.example');
    clock.advance(DKIM_CACHE_MS + 1);
    assert.equal(await findDkimKey(services, seed.accountId, 'a@news.parent.example'), null);
  });

  it('lists, gets and deletes domains', async () => {
    const list = await call('list_domains');
    assert.equal(list.status, 200);
    const names = list.body.data.domains.map((d: { name: string }) => d.name);
    assert.deepEqual(names, [...names].sort());
    assert.ok(names.includes('example.org'));
    const got = await call('get_domain', { name: 'EXAMPLE.org' });
    assert.equal(got.body.data.domain.name, 'example.org');
    const del = await call('delete_domain', { name: 'other.example' });
    assert.deepEqual(del.body.data, { domain: { name: 'other.example', deleted: true } });
    assert.equal((await call('get_domain', { name: 'other.example' })).status, 404);
  });

  it('checks the records through DNS: missing, mismatch, ok, error', async () => {
    const d = (await call('create_domain', { name: 'checked.example' })).body.data.domain;
    let r = await call('check_domain', { name: 'checked.example' });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    let check = r.body.data.domain.last_check;
    assert.equal(check.status, 'incomplete');
    assert.deepEqual(
      Object.fromEntries(Object.entries(check.records).map(([k, v]) => [k, (v as { status: string }).status])),
      { dkim: 'missing', spf: 'missing', return_path: 'missing' },
    );
    assert.equal(r.body.data.domain.checked_at, formatIsoTime(clock.now()));

    // Wrong values published.
    const other = (await call('create_domain', { name: 'wrongkey.example' })).body.data.domain;
    dns.set(d.dns_records.dkim.name, { txt: [chunked(other.dns_records.dkim.value)] });
    dns.set('checked.example', { txt: ['v=spf1 ip4:192.0.2.1 -all', 'google-site-verification=abc'] });
    dns.set('bounces.posthorn.test', { mx: [{ exchange: 'mx.elsewhere.test', priority: 10 }] });
    check = (await call('check_domain', { name: 'checked.example' })).body.data.domain.last_check;
    assert.equal(check.records.dkim.status, 'mismatch');
    assert.equal(check.records.spf.status, 'mismatch');
    assert.deepEqual(check.records.spf.found, ['v=spf1 ip4:192.0.2.1 -all']);
    assert.equal(check.records.return_path.status, 'mismatch');
    assert.deepEqual(check.records.return_path.found, ['10 mx.elsewhere.test']);

    // As published by the answer of create_domain.
    dns.set(d.dns_records.dkim.name, { txt: [chunked(d.dns_records.dkim.value)] });
    dns.set('checked.example', { txt: [d.dns_records.spf.value] });
    dns.set('bounces.posthorn.test', { mx: [{ exchange: 'mta.posthorn.test', priority: 10 }] });
    clock.advance(60_000);
    r = await call('check_domain', { name: 'checked.example' });
    check = r.body.data.domain.last_check;
    assert.equal(check.status, 'ok', JSON.stringify(check));
    assert.equal(r.body.data.domain.checked_at, formatIsoTime(clock.now()));
    assert.notEqual(r.body.data.domain.checked_at, formatIsoTime(clock.now() - 60_000));
    // Stored: get_domain shows the last check.
    assert.deepEqual((await call('get_domain', { name: 'checked.example' })).body.data.domain.last_check, check);

    // A failing server is an error, not "missing".
    dns.set('checked.example', { servfail: true });
    check = (await call('check_domain', { name: 'checked.example' })).body.data.domain.last_check;
    assert.equal(check.records.spf.status, 'error');
    assert.equal(check.records.dkim.status, 'ok');
    assert.ok(dns.countQueries('checked.example', 'TXT') >= 3);
  });

  it('never logs the private key, even at trace level', async () => {
    const lines: string[] = [];
    const log = pino({ level: 'trace', redact: { paths: REDACT_PATHS, censor: '[redacted]' } }, { write: (line: string) => void lines.push(line) });
    const app = await startTestApp({ background: false, log, config: { dnsServers: [dns.address] } });
    try {
      const s = await app.seed('logs');
      const created = await app.call('create_domain', { api_key: s.accountKey, arguments: { name: 'logged.example' } });
      assert.equal(created.status, 200);
      await app.call('check_domain', { api_key: s.accountKey, arguments: { name: 'logged.example' } });
      const key = await findDkimKey(app.app.services, s.accountId, 'a@logged.example');
      assert.ok(key);
      const body = String(key.privateKey.export({ type: 'pkcs8', format: 'pem' })).split('\n').slice(1, -2).join('');
      assert.ok(lines.length > 0, 'the logger did receive lines');
      const all = lines.join('\n');
      assert.doesNotMatch(all, /PRIVATE KEY/);
      assert.ok(!all.includes(body.slice(0, 64)));
    } finally {
      await app.close();
    }
  });
});

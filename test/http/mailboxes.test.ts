// Mailbox methods (account key) against the real server: create with the spec's arguments (also
// as the Ruby gem's CLI sends them, every value a string), validation, list with polling state,
// get, update, secret rotation, delete. The IMAP password is stored sealed and never appears in a
// response or in the log.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { Writable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import { ManualClock } from '../../src/domain/clock.ts';
import { createWatcher } from '../../src/ingress/watch-mailboxes.ts';
import { startTestApp, type ApiReply, type Seed, type TestApp } from '../helpers/app.ts';
import { startDnsServer, type TestDnsServer } from '../helpers/dns-server.ts';

const VERSIONS = ['1.0', '1.1'] as const;

describe('mailbox methods', () => {
  let t: TestApp;
  let seed: Seed;
  let dns: TestDnsServer;
  const clock = new ManualClock(Date.UTC(2026, 4, 1, 12, 0, 0));
  const logLines: string[] = [];
  const replies: string[] = [];
  const passwords: string[] = [];
  /** A distinctive password, remembered so the last test can look for it everywhere. */
  const password = () => {
    const p = `pw-${randomBytes(9).toString('hex')}`;
    passwords.push(p);
    return p;
  };

  before(async () => {
    // Everything the service logs, at every level, unredacted: the password must not be handed to
    // the logger at all.
    const sink = new Writable({
      write(chunk, _enc, done) {
        logLines.push(String(chunk));
        done();
      },
    });
    // API only: the IMAP watcher (ingress/) would otherwise try these made-up servers and update the rows.
    // Postback URLs are checked against the address policy when saved: their hosts resolve through
    // this loopback DNS server (public addresses as data; nothing is ever sent to them).
    dns = await startDnsServer({
      'app.example.com': { a: ['93.184.215.14'] },
      'app.example.org': { a: ['93.184.215.15'] },
      'intranet.example.com': { a: ['10.1.2.3'] },
      // IMAP hosts follow the same address policy (operations/mailboxes.ts).
      'imap.example.com': { a: ['93.184.215.20'] },
      'imap.example.org': { a: ['93.184.215.21'] },
      'imap2.example.com': { a: ['93.184.215.22'] },
      'imap.intranet.example.com': { a: ['192.168.1.20'] },
    });
    t = await startTestApp({ clock, background: false, log: pino({ level: 'trace' }, sink), config: { dnsServers: [dns.address] } });
    seed = await t.seed('mail');
  });
  after(async () => {
    await t.close();
    await dns.close();
  });

  async function call(method: string, args: unknown, version: '1.0' | '1.1' = '1.1', key = seed.accountKey): Promise<ApiReply> {
    const r = await t.call(method, { api_key: key, arguments: args }, { version });
    replies.push(JSON.stringify(r.body), JSON.stringify([...r.headers]));
    return r;
  }

  const base = () => ({
    label: 'Support inbox',
    host: 'imap.example.com',
    username: 'support@example.com',
    password: password(),
    postback_url: 'https://app.example.com/inbound',
  });

  const row = (uid: string) =>
    t.app.services.store.db.selectFrom('mailboxes').selectAll().where('account_id', '=', seed.accountId).where('uid', '=', uid).executeTakeFirstOrThrow();

  it('create_mailbox stores the configuration, seals the password, returns the postback secret once', async () => {
    for (const version of VERSIONS) {
      const args = { ...base(), uid: `support-${version}` };
      const r = await call('create_mailbox', args, version);
      assert.equal(r.status, 200, JSON.stringify(r.body));
      const m = r.body.data.mailbox;
      assert.deepEqual(Object.keys(m).sort(), [
        'checked_at', 'created_at', 'failures', 'host', 'label', 'last_error', 'next_check_at', 'port', 'postback_secret',
        'postback_url', 'status', 'tls', 'uid', 'updated_at', 'username',
      ]);
      assert.equal(m.uid, `support-${version}`);
      assert.equal(m.port, 993);
      assert.equal(m.tls, true);
      assert.equal(m.status, 'active');
      assert.equal(m.last_error, null);
      assert.equal(m.checked_at, null);
      assert.equal(m.next_check_at, '2026-05-01T12:00:00Z');
      assert.match(m.postback_secret, /^[0-9A-Za-z]{32}$/);

      const stored = await row(m.uid);
      assert.notEqual(stored.password, args.password);
      assert.ok(!stored.password.includes(args.password));
      assert.match(stored.password, /^v1:/);
      assert.equal(t.app.services.secrets.open(stored.password), args.password);
      assert.match(stored.postback_secret, /^v1:/);
      assert.equal(t.app.services.secrets.open(stored.postback_secret), m.postback_secret);
      assert.equal(stored.next_check_at, clock.now());
      assert.equal(stored.status, 'active');
      assert.equal(stored.tls, 1);
    }
  });

  it('accepts the Ruby CLI form: every argument a string ("993", "true")', async () => {
    const r = await call('create_mailbox', {
      uid: 'ruby', label: 'Ruby', host: 'imap.example.org', port: '143', username: 'u', password: password(), tls: 'false',
      postback_url: 'http://app.example.org:3000/rails/action_mailbox/postageapp/inbound_emails',
    });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.data.mailbox.port, 143);
    assert.equal(r.body.data.mailbox.tls, false);
    const r2 = await call('create_mailbox', { ...base(), uid: 'ruby2', port: '993', tls: 'true' }, '1.0');
    assert.equal(r2.body.data.mailbox.port, 993);
    assert.equal(r2.body.data.mailbox.tls, true);
    assert.equal((await row('ruby')).tls, 0);
  });

  it('generates a uid when none is given; a duplicate uid is 400 bad_request', async () => {
    const r = await call('create_mailbox', base());
    assert.equal(r.status, 200);
    assert.match(r.body.data.mailbox.uid, /^[0-9a-f-]{36}$/);
    const empty = await call('create_mailbox', { ...base(), uid: '' });
    assert.notEqual(empty.body.data.mailbox.uid, '');
    for (const version of VERSIONS) {
      const dup = await call('create_mailbox', { ...base(), uid: 'support-1.1' }, version);
      assert.equal(dup.status, 400);
      assert.equal(dup.body.response.status, 'bad_request');
      assert.match(dup.body.response.message, /support-1\.1 already exists/);
    }
  });

  it('a missing required argument is 400 naming it', async () => {
    for (const field of ['host', 'username', 'password', 'postback_url']) {
      for (const value of [undefined, null, '', '  ']) {
        const args: Record<string, unknown> = { ...base(), uid: 'never' };
        if (value === undefined) delete args[field];
        else args[field] = value;
        const r = await call('create_mailbox', args);
        assert.equal(r.status, 400, `${field}=${value}`);
        assert.equal(r.body.response.status, 'bad_request');
        assert.ok(r.body.response.message.includes(`"${field}"`), r.body.response.message);
      }
    }
    assert.equal((await call('create_mailbox', undefined)).status, 400);
  });

  it('malformed values are 406 call_error naming the field', async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ host: 'bad host' }, 'host'],
      [{ host: '-imap.example.com' }, 'host'],
      [{ host: 'imap..example.com' }, 'host'],
      [{ host: 'imap.example.com/x' }, 'host'],
      [{ host: '999.1.1.1' }, 'host'],
      [{ host: 'a'.repeat(64) + '.com' }, 'host'],
      [{ host: ['imap.example.com'] }, 'host'],
      [{ port: 0 }, 'port'],
      [{ port: 65536 }, 'port'],
      [{ port: '99999' }, 'port'],
      [{ port: 'imap' }, 'port'],
      [{ port: 993.5 }, 'port'],
      [{ port: [993] }, 'port'],
      [{ tls: 'maybe' }, 'tls'],
      [{ tls: 2 }, 'tls'],
      [{ postback_url: 'ftp://app.example.com/in' }, 'postback_url'],
      [{ postback_url: '/inbound' }, 'postback_url'],
      [{ postback_url: 'not a url' }, 'postback_url'],
      [{ postback_url: 'javascript:alert(1)' }, 'postback_url'],
      [{ postback_url: { url: 'https://x' } }, 'postback_url'],
      [{ label: ['x'] }, 'label'],
      [{ label: 'l'.repeat(201) }, 'label'],
      [{ username: { u: 1 } }, 'username'],
      [{ password: ['p'] }, 'password'],
      [{ password: 'p'.repeat(1025) }, 'password'],
      [{ uid: ['u'] }, 'uid'],
    ];
    for (const [bad, field] of cases) {
      const r = await call('create_mailbox', { ...base(), uid: 'never', ...bad });
      assert.equal(r.status, 406, JSON.stringify(bad));
      assert.equal(r.body.response.status, 'call_error');
      assert.ok(r.body.response.message.includes(`"${field}"`), r.body.response.message);
    }
    const none = await t.app.services.store.db.selectFrom('mailboxes').select('id').where('uid', '=', 'never').execute();
    assert.equal(none.length, 0);
  });

  it('reports a missing argument (400) before a malformed one (406)', async () => {
    const r = await call('create_mailbox', { host: 'bad host', port: 'x', username: 'u', postback_url: 'ftp://x' });
    assert.equal(r.status, 400);
    assert.match(r.body.response.message, /"password"/);
  });

  it('refuses a postback URL whose host is private, loopback or unresolvable (400), on create and update', async () => {
    for (const postback_url of ['http://127.0.0.1:3000/inbound', 'http://[::1]/in', 'https://intranet.example.com/in', 'https://nowhere.example.net/in']) {
      const r = await call('create_mailbox', { ...base(), postback_url });
      assert.equal(r.status, 400, `${postback_url}: ${JSON.stringify(r.body)}`);
      assert.equal(r.body.response.status, 'bad_request');
      assert.match(r.body.response.message, /Postback URL refused/);
    }
    const created = await call('create_mailbox', base());
    assert.equal(created.status, 200);
    const moved = await call('update_mailbox', { uid: created.body.data.mailbox.uid, postback_url: 'http://10.0.0.5/in' });
    assert.equal(moved.status, 400);
    assert.match(moved.body.response.message, /non-public address \(10\.0\.0\.5\)/);
  });

  it('refuses loopback, private, link-local and unresolvable IMAP hosts (400 naming the option), without connecting', async () => {
    // The API's own port is open, port 1 is closed: the answers are the same, since nothing connects.
    const openPort = Number(new URL(t.url).port);
    for (const host of ['127.0.0.1', '::1', '[::1]', '10.0.0.5', '169.254.169.254', 'fe80::1', '::ffff:127.0.0.1', 'imap.intranet.example.com', 'localhost']) {
      const texts = new Set<string>();
      for (const port of [openPort, 1]) {
        const r = await call('create_mailbox', { ...base(), uid: `private-${port}`, host, port });
        assert.equal(r.status, 400, `${host}:${port} ${JSON.stringify(r.body)}`);
        assert.equal(r.body.response.status, 'bad_request');
        assert.match(r.body.response.message, /^IMAP host refused: .*--allow-private-addresses/);
        texts.add(r.body.response.message);
      }
      assert.equal(texts.size, 1, `${host}: the same text whether the port is open or closed: ${[...texts].join(' | ')}`);
    }
    const created = await call('create_mailbox', { ...base(), uid: 'moves-private' });
    assert.equal(created.status, 200);
    const moved = await call('update_mailbox', { uid: 'moves-private', host: '10.0.0.5' });
    assert.equal(moved.status, 400);
    assert.match(moved.body.response.message, /non-public address \(10\.0\.0\.5\).*--allow-private-addresses/);
    assert.equal((await row('moves-private')).host, 'imap.example.com', 'a refused update changes nothing');
    await call('delete_mailbox', { uid: 'moves-private' });
  });

  it('the watcher checks the host again at connect time: a name moved to a private address (DNS rebinding) is refused, nothing connects', async () => {
    // Its own app and database: the watcher claims every due mailbox, and the others here have public
    // addresses it must never try.
    const trap = net.createServer((socket) => socket.destroy());
    let connections = 0;
    trap.on('connection', () => connections++);
    await new Promise<void>((resolve) => trap.listen(0, '127.0.0.1', resolve));
    const own = await startTestApp({ background: false, config: { dnsServers: [dns.address] } });
    const ownSeed = await own.seed('rebind');
    try {
      dns.set('rebind.example.com', { a: ['93.184.215.40'] });
      const created = await own.call('create_mailbox', {
        api_key: ownSeed.accountKey,
        arguments: { ...base(), uid: 'rebind', host: 'rebind.example.com', port: (trap.address() as net.AddressInfo).port },
      });
      assert.equal(created.status, 200, JSON.stringify(created.body));
      dns.set('rebind.example.com', { a: ['127.0.0.1'] });
      const watcher = createWatcher(own.app.services);
      try {
        await watcher.syncNow();
      } finally {
        await watcher.stop();
      }
      const stored = await own.app.services.store.db.selectFrom('mailboxes').selectAll().where('uid', '=', 'rebind').executeTakeFirstOrThrow();
      assert.equal(stored.status, 'error');
      assert.match(stored.last_error ?? '', /^IMAP host refused: host rebind\.example\.com resolves to a non-public address \(127\.0\.0\.1\).*--allow-private-addresses/);
      assert.equal(connections, 0, 'nothing connected to the private address');
    } finally {
      dns.remove('rebind.example.com');
      await own.close();
      await new Promise((resolve) => trap.close(resolve));
    }
  });

  it('accepts host names, IPv4 and IPv6 addresses', async () => {
    for (const [host, stored] of [['IMAP.Example.COM.', 'imap.example.com'], ['93.184.215.30', '93.184.215.30'], ['2606:2800:21f:cb07::1', '2606:2800:21f:cb07::1'], ['[2606:2800:21f:cb07::1]', '2606:2800:21f:cb07::1']]) {
      const r = await call('create_mailbox', { ...base(), uid: `host-${host}`, port: 1 });
      assert.equal(r.status, 200);
      const u = await call('update_mailbox', { uid: `host-${host}`, host });
      assert.equal(u.status, 200, host);
      assert.equal(u.body.data.mailbox.host, stored);
      await call('delete_mailbox', { uid: `host-${host}` });
    }
  });

  it('list_mailboxes and get_mailbox show the polling state, never the password or the secret', async () => {
    // What the IMAP watcher records after a failed login.
    await t.app.services.store.db
      .updateTable('mailboxes')
      .set({ status: 'auth_failed', last_error: 'AUTHENTICATIONFAILED Invalid credentials', failures: 3, checked_at: Date.UTC(2026, 4, 1, 12, 5, 0) })
      .where('uid', '=', 'support-1.0')
      .execute();
    for (const version of VERSIONS) {
      const list = await call('list_mailboxes', {}, version);
      assert.equal(list.status, 200);
      const failing = list.body.data.mailboxes.find((m: { uid: string }) => m.uid === 'support-1.0');
      assert.equal(failing.status, 'auth_failed');
      assert.equal(failing.last_error, 'AUTHENTICATIONFAILED Invalid credentials');
      assert.equal(failing.failures, 3);
      assert.equal(failing.checked_at, '2026-05-01T12:05:00Z');
      for (const m of list.body.data.mailboxes) {
        assert.equal(m.password, undefined);
        assert.equal(m.postback_secret, undefined);
      }
      const one = await call('get_mailbox', { uid: 'support-1.0' }, version);
      assert.deepEqual(one.body.data.mailbox, failing);
    }
    // Another account sees none of them.
    const other = await t.seed('other');
    const theirs = await call('list_mailboxes', {}, '1.1', other.accountKey);
    assert.deepEqual(theirs.body.data.mailboxes, []);
    assert.equal((await call('get_mailbox', { uid: 'support-1.0' }, '1.1', other.accountKey)).status, 404);
  });

  it('get_mailbox / update_mailbox / delete_mailbox / rotate_mailbox_secret: 400 without uid, 404 unknown', async () => {
    for (const method of ['get_mailbox', 'update_mailbox', 'delete_mailbox', 'rotate_mailbox_secret']) {
      const missing = await call(method, {});
      assert.equal(missing.status, 400, method);
      assert.match(missing.body.response.message, /"uid"/);
      const unknown = await call(method, { uid: 'nope' });
      assert.equal(unknown.status, 404, method);
      assert.equal(unknown.body.response.status, 'not_found');
    }
  });

  it('update_mailbox: a new password clears the failure state and makes the mailbox due at once', async () => {
    clock.advance(60_000);
    const next = password();
    const r = await call('update_mailbox', { uid: 'support-1.0', password: next, port: '995' }, '1.0');
    assert.equal(r.status, 200, JSON.stringify(r.body));
    const m = r.body.data.mailbox;
    assert.equal(m.status, 'active');
    assert.equal(m.last_error, null);
    assert.equal(m.failures, 0);
    assert.equal(m.port, 995);
    assert.equal(m.postback_secret, undefined);
    const stored = await row('support-1.0');
    assert.equal(t.app.services.secrets.open(stored.password), next);
    assert.equal(stored.next_check_at, clock.now());

    // A label change leaves the polling state alone; a new host forgets the IMAP position.
    await t.app.services.store.db.updateTable('mailboxes').set({ uid_validity: '42', last_seen_uid: 7, next_check_at: 1 }).where('id', '=', stored.id).execute();
    await call('update_mailbox', { uid: 'support-1.0', label: 'Renamed' });
    let now = await row('support-1.0');
    assert.equal(now.label, 'Renamed');
    assert.equal(now.last_seen_uid, 7);
    assert.equal(now.next_check_at, 1);
    await call('update_mailbox', { uid: 'support-1.0', host: 'imap2.example.com' });
    now = await row('support-1.0');
    assert.equal(now.host, 'imap2.example.com');
    assert.equal(now.last_seen_uid, null);
    assert.equal(now.uid_validity, null);

    const bad = await call('update_mailbox', { uid: 'support-1.0', postback_url: 'mailto:x@y' });
    assert.equal(bad.status, 406);
    const empty = await call('update_mailbox', { uid: 'support-1.0', host: '' });
    assert.equal(empty.status, 406);
    assert.match(empty.body.response.message, /"host"/);
  });

  it('rotate_mailbox_secret returns a new secret once and stores it sealed', async () => {
    const before = t.app.services.secrets.open((await row('support-1.1')).postback_secret);
    const r = await call('rotate_mailbox_secret', { uid: 'support-1.1' });
    assert.equal(r.status, 200);
    const secret = r.body.data.mailbox.postback_secret;
    assert.match(secret, /^[0-9A-Za-z]{32}$/);
    assert.notEqual(secret, before);
    assert.equal(t.app.services.secrets.open((await row('support-1.1')).postback_secret), secret);
    assert.equal((await call('get_mailbox', { uid: 'support-1.1' })).body.data.mailbox.postback_secret, undefined);
  });

  it('delete_mailbox removes it', async () => {
    for (const version of VERSIONS) {
      const uid = `support-${version}`;
      const r = await call('delete_mailbox', { uid }, version);
      assert.equal(r.status, 200);
      assert.deepEqual(r.body.data.mailbox, { uid, deleted: true });
      assert.equal((await call('get_mailbox', { uid }, version)).status, 404);
      assert.equal((await call('delete_mailbox', { uid }, version)).status, 404);
    }
  });

  it('mailbox methods need an account key (401 with a project key)', async () => {
    for (const method of ['create_mailbox', 'list_mailboxes', 'get_mailbox', 'update_mailbox', 'delete_mailbox', 'rotate_mailbox_secret']) {
      const r = await call(method, { ...base(), uid: 'ruby' }, '1.1', seed.projectKey);
      assert.equal(r.status, 401, method);
      assert.match(r.body.response.message, /needs an account API key/);
    }
    assert.equal((await row('ruby')).username, 'u');
  });

  it('no password ever appeared in a response or in the log', () => {
    assert.ok(passwords.length > 20);
    assert.ok(replies.length > 50);
    // The capture works: the server logged (at least its listening line).
    assert.ok(logLines.length > 0);
    const everything = replies.join('\n') + logLines.join('');
    for (const p of passwords) assert.ok(!everything.includes(p), `password ${p} leaked`);
  });
});

// Inbound mailboxes against a real Dovecot (IMAP) and a real HTTP receiver on 127.0.0.1: every new
// email is posted as {"inbound_email": {"message": raw}} with X-PostageApp-Signature, checked here
// the way the Ruby gem's Rails ingress checks it; \Seen is set only after a 2xx; a failing postback
// is retried, never lost; a refused login is visible through list_mailboxes.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import { startApp } from '../../src/app.ts';
import { ManualClock } from '../../src/domain/clock.ts';
import { REDACT_PATHS } from '../../src/log.ts';
import type { MailboxWatcher } from '../../src/ingress/watch-mailboxes.ts';
import { mailboxRetryDelayMs } from '../../src/operations/ingress.ts';
import type { OutboundDispatcher } from '../../src/webhooks/index.ts';
import { startTestApp, type Seed, type TestApp } from '../helpers/app.ts';
import { dovecotSkip, startDovecot, type Dovecot } from '../helpers/dovecot.ts';
import { startHttpSink, verifyPostageAppSignature, type HttpSink } from '../helpers/http-sink.ts';
import { until as waitUntil } from '../helpers/wait.ts';

const user = { name: 'inbound', password: 'imap-pass-7f3' };
const other = { name: 'second', password: 'second-pass-91' };

function email(subject: string, body = 'Hello there.\r\n'): string {
  return [
    'From: Sender <sender@example.com>',
    'To: inbound@example.com',
    `Subject: ${subject}`,
    `Message-ID: <${subject.replace(/\W/g, '')}@example.com>`,
    'MIME-Version: 1.0',
    'Content-Type: text/plain; charset=utf-8',
    'Content-Transfer-Encoding: 8bit',
    '',
    body,
  ].join('\r\n');
}

/** This file's waits poll every 50 ms (IMAP round trips). */
const until = <T>(what: string, probe: () => Promise<T | undefined | false>, timeoutMs = 15_000) => waitUntil(what, probe, timeoutMs, 50);

function seenUids(flags: Map<number, Set<string>>): number[] {
  return [...flags].filter(([, f]) => f.has('\\Seen')).map(([uid]) => uid).sort((a, b) => a - b);
}

describe('inbound mailboxes over IMAP', { skip: dovecotSkip() }, () => {
  let dovecot: Dovecot;
  let sink: HttpSink;
  let t: TestApp;
  let seed: Seed;
  const clock = new ManualClock(Date.now());
  const secrets = new Map<string, string>();
  let failing = false;
  const logLines: string[] = [];

  before(async () => {
    dovecot = await startDovecot({ users: [user, other] });
    sink = await startHttpSink();
    // The receiver is the Rails ingress: 401 on a bad signature; the secret is found by path.
    sink.answer((req) => {
      if (failing) return 500;
      const secret = secrets.get(req.path);
      return secret && verifyPostageAppSignature(secret, req).ok ? 200 : 401;
    });
    // Everything the service logs, down to debug, is kept to check no secret reaches it.
    const log = pino({ level: 'debug', redact: { paths: REDACT_PATHS, censor: '[redacted]' } }, { write: (line: string) => void logLines.push(line) });
    t = await startTestApp({ clock, log, config: { allowPrivateWebhooks: true, mailboxPollMs: 200, pollMs: 100 } });
    seed = await t.seed();
  });
  after(async () => {
    await t?.close();
    await sink?.close();
    await dovecot?.stop();
  });

  const watcher = () => t.app.background.find((s) => s.name === 'mailboxes') as MailboxWatcher;
  const dispatcher = () => t.app.background.find((s) => s.name === 'webhooks') as OutboundDispatcher;

  async function createMailbox(args: Record<string, unknown>) {
    const r = await t.call('create_mailbox', { api_key: seed.accountKey, arguments: args });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    return r.body.data.mailbox;
  }

  async function mailboxRow(uid: string) {
    const r = await t.call('list_mailboxes', { api_key: seed.accountKey });
    return r.body.data.mailboxes.find((m: { uid: string }) => m.uid === uid);
  }

  it('posts each unseen email, signed as the Ruby ingress expects, then marks it \\Seen', async () => {
    const first = await dovecot.append(user, email('First', 'Grüße aus Köln.\r\n'));
    const read = await dovecot.append(user, email('Already read'), ['\\Seen']);
    const second = await dovecot.append(user, email('Second'));
    // The Ruby gem's CLI sends every argument as a string.
    const mailbox = await createMailbox({
      uid: 'inbox-1',
      host: '127.0.0.1',
      port: String(dovecot.port),
      username: user.name,
      password: user.password,
      tls: 'false',
      postback_url: sink.url + '/inbound-1',
    });
    secrets.set('/inbound-1', mailbox.postback_secret);
    await sink.waitFor(2);
    const posted = sink.requests.filter((r) => r.path === '/inbound-1');
    assert.equal(posted.length, 2);
    for (const req of posted) {
      assert.equal(req.headers['content-type'], 'application/json');
      const body = JSON.parse(req.body);
      assert.deepEqual(Object.keys(body), ['inbound_email']);
      assert.deepEqual(Object.keys(body.inbound_email), ['message']);
      const check = verifyPostageAppSignature(mailbox.postback_secret, req);
      assert.ok(check.ok, 'X-PostageApp-Signature verifies');
      assert.ok(!verifyPostageAppSignature('wrong-secret', req).ok);
    }
    const messages = posted.map((r) => JSON.parse(r.body).inbound_email.message as string);
    assert.match(messages[0], /^From: Sender <sender@example.com>\r\n/);
    assert.match(messages[0], /Subject: First\r\n/);
    assert.match(messages[0], /Grüße aus Köln\./);
    assert.match(messages[1], /Subject: Second\r\n/);
    assert.ok(!messages.some((m) => m.includes('Already read')));

    await until('both emails flagged \\Seen', async () => {
      const seen = seenUids(await dovecot.flags(user));
      return seen.length === 3 && seen;
    });
    assert.deepEqual(seenUids(await dovecot.flags(user)), [first, read, second].sort((a, b) => a - b));
    // Once delivered, the stored postback forgets the raw email (it is still on the IMAP server).
    const bodies = await t.app.services.store.db.selectFrom('outbound_requests').select(['body', 'state']).where('kind', '=', 'postback').execute();
    assert.deepEqual(bodies.map((b) => [b.state, b.body]), [['delivered', ''], ['delivered', '']]);
    const row = await mailboxRow('inbox-1');
    assert.equal(row.status, 'active');
    assert.equal(row.last_error, null);
    assert.ok(row.checked_at);
  });

  it('receives new mail while connected (IDLE) and never posts an email twice', async () => {
    const before = sink.requests.length;
    const uid = await dovecot.append(user, email('While idle'));
    await sink.waitFor(before + 1);
    assert.match(JSON.parse(sink.requests[before].body).inbound_email.message, /Subject: While idle/);
    await until('flagged', async () => (await dovecot.flags(user)).get(uid)?.has('\\Seen'));
    await watcher().syncNow();
    await watcher().syncNow();
    assert.equal(sink.requests.length, before + 1);
  });

  it('keeps a failing postback unseen and retries it until a 2xx, with the rotated secret applying to new mail', async () => {
    failing = true;
    const before = sink.requests.length;
    const uid = await dovecot.append(user, email('Receiver down'));
    await sink.waitFor(before + 1);
    await watcher().syncNow();
    assert.ok(!(await dovecot.flags(user)).get(uid)?.has('\\Seen'), 'not seen after a 500');
    const pending = await t.call('list_webhook_deliveries', { api_key: seed.accountKey, arguments: { kind: 'postback', status: 'pending' } });
    assert.equal(pending.body.data.deliveries.length, 1);
    assert.equal(pending.body.data.deliveries[0].last_status_code, 500);
    assert.equal(pending.body.data.deliveries[0].mailbox_uid, 'inbox-1');
    assert.equal(pending.body.data.deliveries[0].kind, 'postback');

    // The application moved: the retry goes to the mailbox's new postback_url.
    secrets.set('/inbound-1-moved', secrets.get('/inbound-1')!);
    const moved = await t.call('update_mailbox', { api_key: seed.accountKey, arguments: { uid: 'inbox-1', postback_url: sink.url + '/inbound-1-moved' } });
    assert.equal(moved.status, 200, JSON.stringify(moved.body));
    failing = false;
    clock.advance(61_000);
    await dispatcher().drain();
    assert.equal(sink.requests.length, before + 2);
    assert.equal(sink.requests[before + 1].path, '/inbound-1-moved');
    assert.equal(sink.requests[before + 1].body, sink.requests[before].body, 'the same email again');
    await until('flagged after the retry', async () => (await dovecot.flags(user)).get(uid)?.has('\\Seen'));

    const rotated = await t.call('rotate_mailbox_secret', { api_key: seed.accountKey, arguments: { uid: 'inbox-1' } });
    assert.equal(rotated.status, 200, JSON.stringify(rotated.body));
    const newSecret = rotated.body.data.mailbox.postback_secret;
    secrets.set('/inbound-1', newSecret);
    secrets.set('/inbound-1-moved', newSecret);
    const next = await dovecot.append(user, email('After rotation'));
    await sink.waitFor(before + 3);
    assert.ok(verifyPostageAppSignature(newSecret, sink.requests[before + 2]).ok);
    await until('flagged with the new secret', async () => (await dovecot.flags(user)).get(next)?.has('\\Seen'));
  });

  it('marks a mailbox whose login is refused auth_failed, retries with backoff, and recovers once fixed', async () => {
    await dovecot.append(other, email('For the second user'));
    const mailbox = await createMailbox({
      uid: 'wrong-pass',
      host: '127.0.0.1',
      port: dovecot.port,
      username: other.name,
      password: 'not-the-password',
      tls: false,
      postback_url: sink.url + '/inbound-2',
    });
    secrets.set('/inbound-2', mailbox.postback_secret);
    const row = await until('auth_failed', async () => {
      const r = await mailboxRow('wrong-pass');
      return r.status === 'auth_failed' && r;
    });
    assert.match(row.last_error, /login refused/i);
    assert.ok(!row.last_error.includes('not-the-password'));
    assert.equal(row.failures, 1);
    assert.equal(Date.parse(row.next_check_at) - Date.parse(row.checked_at), 60_000);
    // Not tried again before the backoff is over.
    await watcher().syncNow();
    assert.equal((await mailboxRow('wrong-pass')).failures, 1);
    // The delay doubles with each failure, up to an hour (each further real failed login costs seconds
    // of Dovecot's auth penalty, so the later steps are checked on the policy itself).
    assert.deepEqual([1, 2, 3, 4, 7, 8, 20].map(mailboxRetryDelayMs), [60_000, 120_000, 240_000, 480_000, 3_600_000, 3_600_000, 3_600_000]);

    const fixed = await t.call('update_mailbox', { api_key: seed.accountKey, arguments: { uid: 'wrong-pass', password: other.password } });
    assert.equal(fixed.status, 200, JSON.stringify(fixed.body));
    await until('posted after the fix', async () => sink.requests.some((r) => r.path === '/inbound-2'));
    const ok = await until('active', async () => {
      const r = await mailboxRow('wrong-pass');
      return r.status === 'active' && r;
    });
    assert.equal(ok.last_error, null);
    assert.equal(ok.failures, 0);
  });

  it('never writes a mailbox password or postback secret to the log, and stores them sealed', async () => {
    const text = logLines.join('');
    // The log is not empty: the failed postback and the refused login were reported.
    assert.match(text, /outbound request not delivered/);
    for (const secret of [user.password, other.password, 'not-the-password', ...secrets.values()]) {
      assert.ok(!text.includes(secret), 'a secret reached the log');
    }
    const stored = await t.app.services.store.db.selectFrom('mailboxes').select(['password', 'postback_secret']).execute();
    for (const r of stored) {
      assert.match(r.password, /^v1:/);
      assert.match(r.postback_secret, /^v1:/);
      assert.ok(![user.password, other.password].some((p) => r.password.includes(p)));
    }
  });
});

describe('a postback that failed and was put back in the queue', { skip: dovecotSkip() }, () => {
  it('flags its email \\Seen once the requeued postback is delivered', async () => {
    const dovecot = await startDovecot({ users: [user] });
    const sink = await startHttpSink();
    let failing = true;
    sink.answer(() => (failing ? 503 : 200));
    // One retry 100 ms after the first attempt, then failed: the whole schedule in a moment.
    const t = await startTestApp({ config: { allowPrivateWebhooks: true, webhookRetrySchedule: '100ms', mailboxPollMs: 200, pollMs: 100 } });
    try {
      const seed = await t.seed();
      const watcher = t.app.background.find((s) => s.name === 'mailboxes') as MailboxWatcher;
      const uid = await dovecot.append(user, email('Receiver down for a day'));
      const r = await t.call('create_mailbox', {
        api_key: seed.accountKey,
        arguments: { uid: 'requeued', host: '127.0.0.1', port: dovecot.port, username: user.name, password: user.password, tls: false, postback_url: sink.url + '/in' },
      });
      assert.equal(r.status, 200, JSON.stringify(r.body));
      const deliveries = async (status: string) =>
        (await t.call('list_webhook_deliveries', { api_key: seed.accountKey, arguments: { kind: 'postback', status } })).body.data.deliveries;
      const failed = await until('the postback failed', async () => (await deliveries('failed'))[0]);
      assert.equal(failed.attempts, 2);
      // The watcher settles it as given up (docs/mailboxes.md, "Failures"): the email stays unseen.
      await watcher.syncNow();
      const email0 = await t.app.services.store.db.selectFrom('inbound_emails').select('state').executeTakeFirstOrThrow();
      assert.equal(email0.state, 'failed');
      assert.ok(!(await dovecot.flags(user)).get(uid)?.has('\\Seen'), 'not seen after the postback failed');

      failing = false;
      const requeued = await t.call('retry_webhook_deliveries', { api_key: seed.accountKey, arguments: { ids: [failed.id] } });
      assert.equal(requeued.body.data.requeued, 1);
      await until('the requeued postback delivered', async () => (await deliveries('delivered')).length === 1);
      await until('the email flagged \\Seen', async () => (await dovecot.flags(user)).get(uid)?.has('\\Seen'));
      assert.equal(sink.requests.length, 3, 'two failed attempts, one delivered');
    } finally {
      await t.close();
      await sink.close();
      await dovecot.stop();
    }
  });
});

describe('IMAP without IDLE, and TLS', { skip: dovecotSkip() }, () => {
  it('polls a server that does not offer IDLE every --mailbox-poll-ms', async () => {
    const dovecot = await startDovecot({ users: [user], idle: false });
    const sink = await startHttpSink();
    const t = await startTestApp({ config: { allowPrivateWebhooks: true, mailboxPollMs: 150, pollMs: 100 } });
    try {
      const seed = await t.seed();
      const r = await t.call('create_mailbox', {
        api_key: seed.accountKey,
        arguments: { host: '127.0.0.1', port: dovecot.port, username: user.name, password: user.password, tls: false, postback_url: sink.url + '/p' },
      });
      assert.equal(r.status, 200);
      await until('connected', async () => (t.app.background.find((s) => s.name === 'mailboxes') as MailboxWatcher).sessions().length === 1);
      await dovecot.append(user, email('Polled'));
      await sink.waitFor(1);
      assert.ok(verifyPostageAppSignature(r.body.data.mailbox.postback_secret, sink.requests[0]).ok);
    } finally {
      await t.close();
      await sink.close();
      await dovecot.stop();
    }
  });

  it('verifies the server certificate: implicit TLS and STARTTLS work with --mailbox-ca-file, and fail without it', async () => {
    const dovecot = await startDovecot({ users: [user], tls: true });
    const sink = await startHttpSink();
    const caFile = path.join(dovecot.dir, 'ca.pem');
    fs.writeFileSync(caFile, dovecot.certPem!);
    const trusting = await startTestApp({ config: { allowPrivateWebhooks: true, mailboxCaFile: caFile, pollMs: 100 } });
    const strict = await startTestApp({ config: { allowPrivateWebhooks: true, pollMs: 100 } });
    try {
      await dovecot.append(user, email('Over TLS'));
      const s1 = await trusting.seed();
      const implicit = await trusting.call('create_mailbox', {
        api_key: s1.accountKey,
        arguments: { uid: 'implicit', host: '127.0.0.1', port: dovecot.tlsPort, username: user.name, password: user.password, tls: true, postback_url: sink.url + '/tls' },
      });
      assert.equal(implicit.status, 200);
      await sink.waitFor(1);
      assert.match(JSON.parse(sink.requests[0].body).inbound_email.message, /Subject: Over TLS/);
      // Plain port, upgraded with STARTTLS (offered by this server) and verified the same way.
      await until('implicit flagged', async () => (await dovecot.flags(user)).get(1)?.has('\\Seen'));
      await dovecot.append(user, email('Over STARTTLS'));
      await trusting.call('delete_mailbox', { api_key: s1.accountKey, arguments: { uid: 'implicit' } });
      const starttls = await trusting.call('create_mailbox', {
        api_key: s1.accountKey,
        arguments: { uid: 'starttls', host: '127.0.0.1', port: dovecot.port, username: user.name, password: user.password, tls: false, postback_url: sink.url + '/tls' },
      });
      assert.equal(starttls.status, 200);
      await sink.waitFor(2);
      assert.match(JSON.parse(sink.requests[1].body).inbound_email.message, /Subject: Over STARTTLS/);

      const s2 = await strict.seed();
      for (const [uid, port, tls] of [['strict-implicit', dovecot.tlsPort, true], ['strict-starttls', dovecot.port, false]] as const) {
        await strict.call('create_mailbox', {
          api_key: s2.accountKey,
          arguments: { uid, host: '127.0.0.1', port, username: user.name, password: user.password, tls, postback_url: sink.url + '/strict' },
        });
        const row = await until(`${uid} error`, async () => {
          const list = await strict.call('list_mailboxes', { api_key: s2.accountKey });
          const m = list.body.data.mailboxes.find((x: { uid: string }) => x.uid === uid);
          return m.status === 'error' && m;
        });
        assert.match(row.last_error, /certificate/i, uid);
      }
      assert.ok(!sink.requests.some((r) => r.path === '/strict'));
    } finally {
      await trusting.close();
      await strict.close();
      await sink.close();
      await dovecot.stop();
    }
  });
});

describe('several processes share the mailboxes', { skip: dovecotSkip() }, () => {
  it('holds one IMAP session per mailbox across services, and posts each email once', async () => {
    const dovecot = await startDovecot({ users: [user, other] });
    const sink = await startHttpSink();
    const a = await startTestApp({ config: { allowPrivateWebhooks: true, pollMs: 50 } });
    // A second service on the same database (as a second worker process would be).
    const b = await startApp({ ...a.app.services.config, port: 0 }, { log: pino({ level: 'silent' }) });
    try {
      const seed = await a.seed();
      for (const [uid, u] of [['one', user], ['two', other]] as const) {
        const r = await a.call('create_mailbox', {
          api_key: seed.accountKey,
          arguments: { uid, host: '127.0.0.1', port: dovecot.port, username: u.name, password: u.password, tls: false, postback_url: sink.url + '/' + uid },
        });
        assert.equal(r.status, 200);
      }
      const watchers = [a.app, b].map((app) => app.background.find((s) => s.name === 'mailboxes') as MailboxWatcher);
      await until('both mailboxes watched', async () => watchers.flatMap((w) => w.sessions()).length === 2);
      for (let i = 0; i < 5; i++) {
        await dovecot.append(user, email(`Shared ${i}`));
        await dovecot.append(other, email(`Other ${i}`));
      }
      await sink.waitFor(10);
      // Give a second session, if there were one, the time to post again.
      await Promise.all(watchers.map((w) => w.syncNow()));
      await new Promise((r) => setTimeout(r, 300));
      const sessions = watchers.flatMap((w) => w.sessions());
      assert.equal(sessions.length, 2, 'one session per mailbox in all');
      assert.equal(new Set(sessions).size, 2);
      const subjects = sink.requests.map((r) => /Subject: (.*)\r\n/.exec(JSON.parse(r.body).inbound_email.message)![1]).sort();
      assert.deepEqual(subjects, [...Array.from({ length: 5 }, (_, i) => `Other ${i}`), ...Array.from({ length: 5 }, (_, i) => `Shared ${i}`)].sort());
    } finally {
      await b.close();
      await a.close();
      await sink.close();
      await dovecot.stop();
    }
  });
});

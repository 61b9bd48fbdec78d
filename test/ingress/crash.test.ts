// A worker killed (SIGKILL) while its postbacks are in flight loses no email: after a restart the
// postbacks are sent again and the mailbox watched again, within RESUME_LIMIT_MS of the kill (the
// registry of live processes releases the dead one's leases, docs/decisions/0008-lease-runner.md;
// they would hold for 30 s and 120 s), the emails are flagged \Seen once a 2xx came, and no email
// is skipped.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import pino from 'pino';
import { startApp } from '../../src/app.ts';
import type { MailboxWatcher } from '../../src/ingress/watch-mailboxes.ts';
import type { OutboundDispatcher } from '../../src/webhooks/index.ts';
import { startTestApp } from '../helpers/app.ts';
import { spawnServe } from '../helpers/child-service.ts';
import { dovecotSkip, startDovecot } from '../helpers/dovecot.ts';
import { startHttpSink, verifyPostageAppSignature } from '../helpers/http-sink.ts';

const user = { name: 'crash', password: 'crash-pass-5' };
const RESUME_LIMIT_MS = 15_000;

describe('inbound mailboxes survive a crash', { skip: dovecotSkip() }, () => {
  it('SIGKILL with postbacks in flight, restart: every email posted and flagged \\Seen', async () => {
    const dovecot = await startDovecot({ users: [user] });
    const sink = await startHttpSink();
    // API only; the child process watches the mailbox.
    const t = await startTestApp({ background: false, config: { allowPrivateWebhooks: true } });
    try {
      const seed = await t.seed();
      const uids: number[] = [];
      for (let i = 0; i < 6; i++) uids.push(await dovecot.append(user, `From: a@example.com\r\nSubject: Crash ${i}\r\nMessage-ID: <crash${i}@example.com>\r\n\r\nbody ${i}\r\n`));
      const created = await t.call('create_mailbox', {
        api_key: seed.accountKey,
        arguments: { uid: 'crashbox', host: '127.0.0.1', port: dovecot.port, username: user.name, password: user.password, tls: false, postback_url: sink.url + '/in' },
      });
      assert.equal(created.status, 200);
      const secret = created.body.data.mailbox.postback_secret as string;
      // The receiver takes the postbacks and never answers while the child runs.
      sink.answer(() => ({ status: 200, stall: true }));

      const config = t.app.services.config;
      const worker = spawnServe(config, ['--role', 'worker'], {
        POSTHORN_ALLOW_PRIVATE_WEBHOOKS: 'true',
        POSTHORN_POLL_MS: '100',
        POSTHORN_OPS_PORT: '0',
        POSTHORN_WORKERS: '0',
      });
      try {
        await sink.waitFor(6, 20_000);
      } finally {
        await worker.kill();
      }
      const killedAt = Date.now();
      const flags = await dovecot.flags(user);
      assert.ok(uids.every((u) => !flags.get(u)?.has('\\Seen')), 'nothing is seen before a 2xx');

      // Restart, on the real clock: the dead process's leases (outbound requests, mailbox) still hold.
      sink.answer(() => 200);
      const restarted = await startApp({ ...config, port: 0 }, { log: pino({ level: 'silent' }) });
      let resumeMs = -1;
      try {
        const dispatcher = restarted.background.find((s) => s.name === 'webhooks') as OutboundDispatcher;
        const watcher = restarted.background.find((s) => s.name === 'mailboxes') as MailboxWatcher;
        await dispatcher.drain();
        const deadline = Date.now() + 30_000;
        for (;;) {
          await watcher.syncNow();
          const now = await dovecot.flags(user);
          if (uids.every((u) => now.get(u)?.has('\\Seen'))) {
            resumeMs = Date.now() - killedAt;
            break;
          }
          assert.ok(Date.now() < deadline, 'every email flagged \\Seen after the restart');
          await new Promise((r) => setTimeout(r, 100));
        }
      } finally {
        await restarted.close();
      }
      const subjects = new Set<string>();
      for (const req of sink.requests) {
        const check = verifyPostageAppSignature(secret, req);
        assert.ok(check.ok);
        subjects.add(/Subject: (.*)\r\n/.exec(check.message!)![1]);
      }
      assert.equal(subjects.size, 6, 'every email reached the application');
      process.stdout.write(`# ingress crash test: ${sink.requests.length} postbacks for 6 emails; all posted and flagged \\Seen ${resumeMs} ms after the kill (limit ${RESUME_LIMIT_MS} ms)\n`);
      assert.ok(resumeMs >= 0 && resumeMs < RESUME_LIMIT_MS, `the dead process's mailbox work resumed ${resumeMs} ms after the kill`);
    } finally {
      await t.close();
      await sink.close();
      await dovecot.stop();
    }
  });
});

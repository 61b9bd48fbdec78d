// A postback that gave up, settled by the mailbox watcher while retry_webhook_deliveries puts it
// back in the queue (docs/mailboxes.md, "Failures"). The watcher reads the request's state, then
// writes the email's: a requeue that lands in between found the email still `posting` and did not
// reopen it, so if the watcher's write went through, the email would stay `failed` and never be
// flagged \Seen after the retry is delivered. The two operations are driven here in that losing
// order through the real operations and storage, on the run's database; on PostgreSQL also with
// the requeue still uncommitted while the watcher writes. No IMAP server is needed: the watcher's
// IMAP side is test/ingress/mailboxes.test.ts.
import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, it } from 'node:test';
import { sql } from 'kysely';
import { generateWorkerId } from '../../src/domain/keys.ts';
import { createAccount } from '../../src/operations/accounts.ts';
import { claimDueMailboxes, enqueuePostback, findFinishedPostbacks, markInboundEmails } from '../../src/operations/ingress.ts';
import { createMailbox } from '../../src/operations/mailboxes.ts';
import { retryDeliveries } from '../../src/operations/webhooks.ts';
import { reopenInboundEmails } from '../../src/storage/inbound-emails.ts';
import { claimDueOutbound, finishOutbound, requeueFailedOutbound } from '../../src/storage/outbound.ts';
import type { Account, Mailbox } from '../../src/storage/schema.ts';
import type { Services } from '../../src/services.ts';
import { onlyOn } from '../helpers/databases.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { until } from '../helpers/wait.ts';

describe('a postback requeued while the watcher settles it as failed', () => {
  let t: TestApp;
  let services: Services;
  let account: Account;
  let mailbox: Mailbox;
  const watcher = generateWorkerId();
  const dispatcher = generateWorkerId();
  let nextUid = 1;

  before(async () => {
    // No background jobs: the test is the watcher and the dispatcher.
    t = await startTestApp({ background: false, config: { allowPrivateWebhooks: true } });
    services = t.app.services;
    ({ account } = await createAccount(services, { name: 'Requeue race' }));
    await createMailbox(services, account, {
      uid: 'inbox',
      host: '127.0.0.1',
      port: 143,
      username: 'u',
      password: 'p',
      tls: false,
      postback_url: 'http://127.0.0.1:9/in',
    });
    [mailbox] = await claimDueMailboxes(services, watcher, 600_000, 1);
    assert.ok(mailbox, 'the watcher holds the mailbox');
  });
  after(() => t?.close());

  /** An email handed over (as the watcher does), its postback tried once and given up. */
  async function failedPostback(): Promise<{ emailId: number; requestId: number }> {
    const imapUid = nextUid++;
    assert.ok(await enqueuePostback(services, mailbox, watcher, '1', { imapUid, raw: Buffer.from(`Subject: ${imapUid}\r\n\r\nbody\r\n`), messageId: null }));
    const email = await services.store.db.selectFrom('inbound_emails').select(['id', 'outbound_id']).where('imap_uid', '=', imapUid).executeTakeFirstOrThrow();
    const requestId = Number(email.outbound_id);
    await finishPostback(requestId, 'failed');
    return { emailId: Number(email.id), requestId };
  }

  /** The dispatcher's claim and finish of one attempt. */
  async function finishPostback(requestId: number, state: 'delivered' | 'failed'): Promise<void> {
    const now = services.clock.now();
    const claimed = await services.store.write((trx) => claimDueOutbound(trx, { worker: dispatcher, now, leaseUntil: now + 60_000, limit: 100 }));
    assert.deepEqual(claimed.map((r) => r.id), [requestId]);
    const kept = await services.store.write((trx) =>
      finishOutbound(trx, { id: requestId, worker: dispatcher, now, state, nextAttemptAt: now, statusCode: 503, error: null, url: 'http://127.0.0.1:9/in' }),
    );
    assert.ok(kept);
  }

  async function emailState(id: number): Promise<string> {
    const row = await services.store.db.selectFrom('inbound_emails').select('state').where('id', '=', id).executeTakeFirstOrThrow();
    return row.state;
  }

  /** The watcher's settle read: which of the mailbox's emails it will mark failed. */
  async function settleRead(emailId: number): Promise<number[]> {
    const { failed } = await findFinishedPostbacks(services, mailbox.id);
    const ids = failed.map((e) => e.id);
    assert.deepEqual(ids, [emailId], 'the watcher read the postback as given up');
    return ids;
  }

  beforeEach(async () => {
    // Each test starts with nothing left posting or pending from the one before.
    await services.store.write(async (trx) => {
      await trx.updateTable('inbound_emails').set({ state: 'seen' }).where('state', '<>', 'seen').execute();
      await trx.updateTable('outbound_requests').set({ state: 'delivered', locked_by: null }).where('state', '=', 'pending').execute();
    });
  });

  it('a given-up postback that nobody requeued is marked failed', async () => {
    const { emailId } = await failedPostback();
    await markInboundEmails(services, await settleRead(emailId), 'failed');
    assert.equal(await emailState(emailId), 'failed');
  });

  it('the requeue that came between the read and the write wins: the email stays posting, then is settled as delivered', async () => {
    const { emailId, requestId } = await failedPostback();
    const ids = await settleRead(emailId);
    // The requeue finds the email still posting: there is nothing for it to reopen.
    assert.equal(await retryDeliveries(services, account, [requestId]), 1);
    assert.equal(await emailState(emailId), 'posting');
    // The watcher's write, from what it read before the requeue.
    await markInboundEmails(services, ids, 'failed');
    assert.equal(await emailState(emailId), 'posting', 'the requeue is not undone');
    // The retry is delivered: the next settle finds the email and flags it \Seen.
    await finishPostback(requestId, 'delivered');
    const next = await findFinishedPostbacks(services, mailbox.id);
    assert.deepEqual(next.delivered.map((e) => e.id), [emailId]);
    await markInboundEmails(services, [emailId], 'seen');
    assert.equal(await emailState(emailId), 'seen');
  });

  it('a requeued postback that gave up again before the write is marked failed (and can be requeued again)', async () => {
    const { emailId, requestId } = await failedPostback();
    const ids = await settleRead(emailId);
    assert.equal(await retryDeliveries(services, account, [requestId]), 1);
    await finishPostback(requestId, 'failed');
    await markInboundEmails(services, ids, 'failed');
    assert.equal(await emailState(emailId), 'failed');
    assert.equal(await retryDeliveries(services, account, [requestId]), 1);
    assert.equal(await emailState(emailId), 'posting');
  });

  it('PostgreSQL: a requeue still uncommitted when the watcher writes is waited for, and wins', { skip: onlyOn('postgres') }, async () => {
    const { emailId, requestId } = await failedPostback();
    const ids = await settleRead(emailId);
    // retryDeliveries' two statements, in a transaction held open after both ran: the request is
    // pending (uncommitted) and the email, still posting, was not reopened.
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let requeued!: () => void;
    const ran = new Promise<void>((resolve) => (requeued = resolve));
    const requeue = services.store.db.transaction().execute(async (trx) => {
      const now = services.clock.now();
      const reopened = await requeueFailedOutbound(trx, account.id, [requestId], now);
      assert.deepEqual(reopened, [requestId]);
      await reopenInboundEmails(trx, reopened, now);
      requeued();
      await held;
    });
    try {
      await ran;
      let written = false;
      const settle = markInboundEmails(services, ids, 'failed').then(() => (written = true));
      // Either the watcher's write waits on the requeue's row lock, or (without the hold) it wrote at once.
      await until('the watcher writing or waiting on a lock', async () => {
        if (written) return true;
        const waiting = await sql<{ n: string }>`select count(*) as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`.execute(services.store.db);
        return Number(waiting.rows[0].n) > 0;
      });
      release();
      await requeue;
      await settle;
    } finally {
      release();
      await requeue.catch(() => {});
    }
    assert.equal(await emailState(emailId), 'posting', 'the requeue is not undone');
  });

  it('an email whose request was pruned is marked failed (its outcome is unknown: left unseen)', async () => {
    const { emailId, requestId } = await failedPostback();
    const ids = await settleRead(emailId);
    await services.store.write((trx) => trx.deleteFrom('outbound_requests').where('id', '=', requestId).execute());
    await markInboundEmails(services, ids, 'failed');
    assert.equal(await emailState(emailId), 'failed');
  });
});

// The message page for a project-scoped user and its "Retry now" (docs/dashboard.md, "One
// message"), over HTTP against a real server with real SMTP and webhook peers on 127.0.0.1, on
// both databases: a scoped user sees its own project's endpoints' URLs in full and an account-wide
// endpoint's as its origin alone, on every page it can open; a copy waiting to retry is made due
// now by a form with the one-time token, and a delivery worker sends it.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startTestApp, type Seed, type TestApp } from '../helpers/app.ts';
import { startHttpSink, type HttpSink } from '../helpers/http-sink.ts';
import { reply, startSmtpPeer, type SmtpPeer } from '../helpers/smtp-peers.ts';
import { until } from '../helpers/wait.ts';
import { signedInClient, type SessionClient } from './session-client.ts';

const ACCOUNT_TOKEN = 'account-wide-token-5f2c';
const PROJECT_TOKEN = 'project-own-token-9a1d';

describe('the message page: account-wide webhook URLs and Retry now', () => {
  let t: TestApp;
  let peer: SmtpPeer;
  let sink: HttpSink;
  let seed: Seed;
  let account: SessionClient;
  let scoped: SessionClient;
  let refuse = true;

  before(async () => {
    peer = await startSmtpPeer({ starttls: false, rcpt: (to) => (refuse && to.startsWith('later@') ? reply(451, '4.7.1 Try again later') : null) });
    sink = await startHttpSink();
    t = await startTestApp({ config: { workers: 1, pollMs: 100, transportMap: [peer.transportFor('*')], allowPrivateWebhooks: true } });
    seed = await t.seed('actions');
    ({ client: account } = await signedInClient(t, seed.accountUid));
    ({ client: scoped } = await signedInClient(t, seed.accountUid, { projectUid: seed.projectUid }));
  });
  after(async () => {
    await t?.close();
    await peer?.close();
    await sink?.close();
  });

  const send = async (uid: string, recipients: string[]) => {
    const r = await t.call('send_message', { api_key: seed.projectKey, uid, arguments: { recipients, headers: { subject: uid, from: 'a@acme.example' }, content: { 'text/plain': 'Hello' } } });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    return Number(r.body.data.message.id);
  };

  it('shows a project-scoped user an account-wide endpoint\'s URL as its origin only, on every page it can open', async () => {
    const wide = await t.call('create_webhook', { api_key: seed.accountKey, arguments: { url: `${sink.url}/hooks/account?token=${ACCOUNT_TOKEN}`, events: ['delivered'] } });
    assert.equal(wide.status, 200, JSON.stringify(wide.body));
    const own = await t.call('create_webhook', { api_key: seed.accountKey, arguments: { url: `${sink.url}/hooks/project?token=${PROJECT_TOKEN}`, events: ['delivered'], project_uid: seed.projectUid } });
    assert.equal(own.status, 200, JSON.stringify(own.body));
    const id = await send('hooked-1', ['ada@example.test']);
    await sink.waitFor(2, 30_000);
    await until('both webhook requests recorded as delivered', async () => {
      const rows = await t.app.services.store.db.selectFrom('outbound_requests').select('state').execute();
      return rows.length === 2 && rows.every((r) => r.state === 'delivered');
    });

    const full = await account.get(`/messages/${id}`);
    assert.ok(full.text.includes(ACCOUNT_TOKEN) && full.text.includes(PROJECT_TOKEN), 'an account user sees every URL in full');

    const page = await scoped.get(`/messages/${id}`);
    assert.equal(page.status, 200);
    assert.ok(page.text.includes(`/hooks/project?token=${PROJECT_TOKEN}`), 'its own project\'s endpoint in full');
    assert.ok(!page.text.includes(ACCOUNT_TOKEN) && !page.text.includes('/hooks/account'), 'no path or query of the account-wide endpoint');
    assert.match(page.text, /account-wide endpoint: its path and query are not shown/);
    const pages = ['/', `/projects/${seed.projectUid}`, '/messages', `/messages/rows?project=${seed.projectUid}`, `/messages/${id}/html`, `/messages/${id}/source`, '/templates', '/suppressions', `/projects/${seed.projectUid}/keys`, '/webhooks'];
    for (const path of pages) {
      const r = await scoped.get(path);
      assert.ok(!r.text.includes(ACCOUNT_TOKEN) && !r.text.includes('/hooks/account'), `${path} names no account-wide URL`);
    }
    assert.equal((await scoped.get('/webhooks')).status, 404);
  });

  it('retries a copy waiting to retry now: a form with the one-time token, and a worker sends it', async () => {
    const id = await send('later-1', ['later@example.test']);
    const db = t.app.services.store.db;
    const copy = await until('the copy deferred', async () => {
      const row = await db.selectFrom('transmissions').select(['id', 'status', 'next_attempt_at', 'locked_by']).where('message_id', '=', id).executeTakeFirst();
      return row && row.status === 'retry' && row.locked_by === null ? row : undefined;
    }, 30_000);
    assert.ok(Number(copy.next_attempt_at) > Date.now() + 10_000, 'its next attempt is well ahead');

    const page = await scoped.get(`/messages/${id}`);
    assert.match(page.text, /<form method="post" action="\/messages\/\d+\/retry" class="retry-now">/);
    refuse = false;
    const posted = await scoped.post(`/messages/${id}/retry`, { copy: String(copy.id) });
    assert.equal(posted.status, 303, posted.text.slice(0, 300));
    assert.match((await scoped.get(`/messages/${id}`)).text, /The copy to later@example.test is due now/);
    await peer.waitForReceived(2, 30_000);
    assert.ok(peer.received.some((m) => m.to.includes('later@example.test')), 'the copy went out');
    await until('the copy completed', async () => (await db.selectFrom('transmissions').select('status').where('id', '=', copy.id).executeTakeFirst())?.status === 'completed');

    // Sent again (a reload), the form runs nothing; a completed copy is refused with a notice.
    const again = await scoped.resubmit();
    assert.equal(again.status, 303);
    await scoped.get(`/messages/${id}`);
    const refused = await scoped.post(`/messages/${id}/retry`, { copy: String(copy.id) });
    assert.equal(refused.status, 303);
    assert.match((await scoped.get(`/messages/${id}`)).text, /is not waiting to retry \(it is completed\)/);
    assert.equal((await scoped.post(`/messages/${id}/retry`, { copy: 'x' })).status, 303);
  });
});

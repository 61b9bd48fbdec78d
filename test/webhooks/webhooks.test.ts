// Delivery webhooks against a real HTTP receiver on 127.0.0.1: the endpoint methods, fan-out of
// events rows, signatures, project scoping, retries with an injected clock, redirects, timeouts.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ManualClock } from '../../src/domain/clock.ts';
import { NO_ENDPOINT, recordEvent, type NewEvent } from '../../src/storage/events.ts';
import type { OutboundDispatcher } from '../../src/webhooks/index.ts';
import { SweepRunner } from '../../src/workers/sweep-runner.ts';
import { startTestApp, type Seed, type TestApp } from '../helpers/app.ts';
import { startDnsServer, type TestDnsServer } from '../helpers/dns-server.ts';
import { startHttpSink, verifyWebhookSignature, type HttpSink } from '../helpers/http-sink.ts';

function dispatcherOf(t: TestApp): OutboundDispatcher {
  const found = t.app.background.find((s) => s.name === 'webhooks');
  assert.ok(found, 'the webhook dispatcher runs');
  return found as OutboundDispatcher;
}

/** The retention purge job, which also forgets finished outbound requests (operations/retention.ts). */
function purgeOf(t: TestApp): SweepRunner {
  const found = t.app.background.find((s) => s.name === 'purge');
  assert.ok(found instanceof SweepRunner, 'the purge job runs');
  return found;
}

async function addEvents(t: TestApp, events: Array<Omit<NewEvent, 'now'>>): Promise<void> {
  const now = t.app.services.clock.now();
  await t.app.services.store.write(async (trx) => {
    for (const e of events) await recordEvent(trx, { ...e, now });
  });
}

function deliveredEvent(seed: Seed, n: number): Omit<NewEvent, 'now'> {
  return {
    accountId: seed.accountId,
    projectId: seed.projectId,
    type: 'delivered',
    payload: {
      message_id: 100 + n,
      message_uid: `msg-${n}`,
      transmission_id: 1000 + n,
      recipient: `r${n}@example.com`,
      result_code: 'SMTP_250',
      result_message: '250 2.0.0 Ok: queued',
      variables: { name: 'Ann', n },
    },
  };
}

describe('delivery webhooks', () => {
  let t: TestApp;
  let seed: Seed;
  let sink: HttpSink;
  const clock = new ManualClock(Date.UTC(2026, 5, 1, 12));
  before(async () => {
    sink = await startHttpSink();
    t = await startTestApp({ clock, config: { allowPrivateWebhooks: true, webhookTimeoutMs: 500, pollMs: 60_000 } });
    seed = await t.seed();
  });
  after(async () => {
    await t.close();
    await sink.close();
  });

  it('creates, lists, updates, rotates and deletes endpoints; the secret is shown only on creation and rotation', async () => {
    const created = await t.call('create_webhook', { api_key: seed.accountKey, arguments: { url: sink.url + '/crud', events: ['delivered', 'failed'] } });
    assert.equal(created.status, 200, JSON.stringify(created.body));
    const hook = created.body.data.webhook;
    assert.match(hook.secret, /^whsec_[0-9A-Za-z]{32}$/);
    assert.deepEqual(hook.events, ['delivered', 'failed']);
    assert.equal(hook.project_uid, null);
    assert.equal(hook.status, 'active');

    const listed = await t.call('list_webhooks', { api_key: seed.accountKey });
    const row = listed.body.data.webhooks.find((w: { uid: string }) => w.uid === hook.uid);
    assert.ok(row);
    assert.equal(row.secret, undefined);
    assert.ok(!JSON.stringify(listed.body).includes(hook.secret));

    const updated = await t.call('update_webhook', { api_key: seed.accountKey, arguments: { uid: hook.uid, events: 'opened,clicked', project_uid: seed.projectUid, status: 'disabled' } });
    assert.equal(updated.status, 200, JSON.stringify(updated.body));
    assert.deepEqual(updated.body.data.webhook.events, ['opened', 'clicked']);
    assert.equal(updated.body.data.webhook.project_uid, seed.projectUid);
    assert.equal(updated.body.data.webhook.status, 'disabled');

    // The listing names each endpoint's scope: this one's project, another's none.
    const other = await t.call('create_webhook', { api_key: seed.accountKey, arguments: { url: sink.url + '/crud-all' } });
    assert.equal(other.status, 200, JSON.stringify(other.body));
    const relisted = (await t.call('list_webhooks', { api_key: seed.accountKey })).body.data.webhooks as Array<{ uid: string; project_uid: string | null }>;
    assert.equal(relisted.find((w) => w.uid === hook.uid)?.project_uid, seed.projectUid);
    assert.equal(relisted.find((w) => w.uid === other.body.data.webhook.uid)?.project_uid, null);
    assert.equal((await t.call('delete_webhook', { api_key: seed.accountKey, arguments: { uid: other.body.data.webhook.uid } })).status, 200);

    const rotated = await t.call('rotate_webhook_secret', { api_key: seed.accountKey, arguments: { uid: hook.uid } });
    assert.match(rotated.body.data.webhook.secret, /^whsec_/);
    assert.notEqual(rotated.body.data.webhook.secret, hook.secret);

    assert.equal((await t.call('delete_webhook', { api_key: seed.accountKey, arguments: { uid: hook.uid } })).status, 200);
    const gone = await t.call('delete_webhook', { api_key: seed.accountKey, arguments: { uid: hook.uid } });
    assert.equal(gone.status, 404);
    assert.equal(gone.body.response.status, 'not_found');
  });

  it('refuses bad arguments with clear errors, and project keys', async () => {
    const cases: Array<[unknown, number, RegExp]> = [
      [{}, 400, /url/],
      [{ url: 'ftp://example.com/x' }, 406, /http or https/],
      [{ url: 'not a url' }, 406, /valid URL/],
      [{ url: 'http://user:pw@127.0.0.1/' }, 406, /credentials/],
      [{ url: sink.url, events: ['delivered', 'exploded'] }, 406, /exploded/],
      [{ url: sink.url, events: [] }, 406, /at least one/],
      [{ url: sink.url, events: { a: 1 } }, 406, /array/],
      [{ url: sink.url, project_uid: 'nope' }, 404, /Project nope/],
    ];
    for (const [args, status, message] of cases) {
      const r = await t.call('create_webhook', { api_key: seed.accountKey, arguments: args });
      assert.equal(r.status, status, JSON.stringify(args));
      assert.match(r.body.response.message, message, JSON.stringify(args));
    }
    const project = await t.call('create_webhook', { api_key: seed.projectKey, arguments: { url: sink.url } });
    assert.equal(project.status, 401);
  });

  it('posts each event to every matching endpoint, signed, with the event id, payload fields and project scoping', async () => {
    const other = await t.seed('Other');
    // A second project of the same account: its events must not reach the scoped endpoint.
    const { createProject } = await import('../../src/operations/projects.ts');
    const account = await t.app.services.store.db.selectFrom('accounts').selectAll().where('id', '=', other.accountId).executeTakeFirstOrThrow();
    const second = await createProject(t.app.services, account, { name: 'second' });

    const all = await t.call('create_webhook', { api_key: other.accountKey, arguments: { url: sink.url + '/all' } });
    const scoped = await t.call('create_webhook', { api_key: other.accountKey, arguments: { url: sink.url + '/scoped', project_uid: other.projectUid, events: ['delivered'] } });
    const secrets = new Map([
      ['/all', all.body.data.webhook.secret as string],
      ['/scoped', scoped.body.data.webhook.secret as string],
    ]);
    sink.requests.length = 0;
    sink.answer(() => 200);
    await addEvents(t, [
      deliveredEvent(other, 1),
      { ...deliveredEvent(other, 2), type: 'failed', payload: { ...deliveredEvent(other, 2).payload, result_code: 'SMTP_550', result_message: '550 5.1.1 no such user' } },
      { ...deliveredEvent(other, 3), projectId: Number(second.project.id) },
      // another account's event: reaches none of these endpoints
      deliveredEvent(seed, 4),
    ]);
    await dispatcherOf(t).drain();

    const got = sink.requests.map((r) => `${r.path} ${JSON.parse(r.body).event} ${JSON.parse(r.body).message_uid}`).sort();
    assert.deepEqual(got, ['/all delivered msg-1', '/all delivered msg-3', '/all failed msg-2', '/scoped delivered msg-1']);
    for (const req of sink.requests) {
      assert.ok(verifyWebhookSignature(secrets.get(req.path)!, req), `signature of ${req.path}`);
      assert.ok(!verifyWebhookSignature(secrets.get(req.path === '/all' ? '/scoped' : '/all')!, req), 'another secret does not verify');
      assert.equal(req.headers['content-type'], 'application/json');
      const body = JSON.parse(req.body);
      assert.equal(req.headers['x-posthorn-event-id'], body.event_id);
      assert.match(body.event_id, /^evt_\d+$/);
      assert.equal(req.headers['x-posthorn-event'], body.event);
      assert.equal(Number(req.headers['x-posthorn-timestamp']), Math.floor(clock.now() / 1000));
    }
    const failed = JSON.parse(sink.requests.find((r) => JSON.parse(r.body).event === 'failed')!.body);
    assert.equal(failed.project_uid, other.projectUid);
    assert.equal(failed.recipient, 'r2@example.com');
    assert.equal(failed.message_id, 102);
    assert.equal(failed.result_code, 'SMTP_550');
    assert.equal(failed.result_message, '550 5.1.1 no such user');
    assert.deepEqual(failed.variables, { name: 'Ann', n: 2 });
    assert.equal(failed.occurred_at, new Date(clock.now()).toISOString().replace(/\.\d{3}Z$/, 'Z'));
    const third = JSON.parse(sink.requests.find((r) => JSON.parse(r.body).message_uid === 'msg-3')!.body);
    assert.equal(third.project_uid, second.project.uid);

    // Nothing is sent twice once delivered.
    await dispatcherOf(t).drain();
    assert.equal(sink.requests.length, 4);
    const deliveries = await t.call('list_webhook_deliveries', { api_key: other.accountKey, arguments: { status: 'delivered' } });
    assert.equal(deliveries.body.data.deliveries.length, 4);
    for (const d of deliveries.body.data.deliveries) {
      assert.equal(d.attempts, 1);
      assert.equal(d.attempt_log.length, 1);
      assert.equal(d.attempt_log[0].status_code, 200);
    }
  });


  it('records the events of an account without an active endpoint as dispatched, and fans out what is recorded once one exists', async () => {
    const quiet = await t.seed('Quiet');
    const stateOf = async (messageUid: string) => {
      const rows = await t.app.services.store.db.selectFrom('events').select(['payload', 'dispatched_at']).where('account_id', '=', quiet.accountId).execute();
      const row = rows.find((r) => JSON.parse(r.payload).message_uid === messageUid);
      assert.ok(row, `event of ${messageUid}`);
      return row.dispatched_at === null ? 'pending' : Number(row.dispatched_at) === NO_ENDPOINT ? 'nobody' : 'fanned out';
    };
    sink.requests.length = 0;
    sink.answer(() => 200);

    await addEvents(t, [deliveredEvent(quiet, 1)]);
    assert.equal(await stateOf('msg-1'), 'nobody');

    const created = await t.call('create_webhook', { api_key: quiet.accountKey, arguments: { url: sink.url + '/quiet' } });
    assert.equal(created.status, 200, JSON.stringify(created.body));
    await addEvents(t, [deliveredEvent(quiet, 2)]);
    assert.equal(await stateOf('msg-2'), 'pending');
    await dispatcherOf(t).drain();
    assert.deepEqual(
      sink.requests.map((r) => `${r.path} ${JSON.parse(r.body).message_uid}`),
      ['/quiet msg-2'],
      'the endpoint hears of what happens after it exists, not of the event before',
    );
    assert.equal(await stateOf('msg-2'), 'fanned out');

    // A disabled endpoint listens to nothing: the account's events are recorded dispatched again.
    await t.call('update_webhook', { api_key: quiet.accountKey, arguments: { uid: created.body.data.webhook.uid, status: 'disabled' } });
    await addEvents(t, [deliveredEvent(quiet, 3)]);
    assert.equal(await stateOf('msg-3'), 'nobody');
    await dispatcherOf(t).drain();
    assert.equal(sink.requests.length, 1);
  });
  it('retries on the default schedule (5s,5m,30m,2h,5h,10h,10h) for over a day, records every attempt, then marks the delivery failed (and can requeue it)', async () => {
    const s = await t.seed('Retry');
    const created = await t.call('create_webhook', { api_key: s.accountKey, arguments: { url: sink.url + '/retry', events: ['delivered'] } });
    const uid = created.body.data.webhook.uid;
    sink.requests.length = 0;
    sink.answer(() => ({ status: 503, body: 'busy' }));
    await addEvents(t, [deliveredEvent(s, 9)]);
    const d = dispatcherOf(t);
    await d.drain();
    assert.equal(sink.requests.length, 1);
    // Not due before the first backoff (5 s) is over.
    clock.advance(4_000);
    await d.drain();
    assert.equal(sink.requests.length, 1);
    const start = clock.now() - 4_000;
    const times: number[] = [0];
    for (let i = 0; i < 40; i++) {
      clock.advance(i === 0 ? 1_000 : 60_000);
      await d.drain();
      if (sink.requests.length > times.length) times.push(clock.now() - start);
      const list = await t.call('list_webhook_deliveries', { api_key: s.accountKey, arguments: { webhook_uid: uid } });
      if (list.body.data.deliveries[0].status === 'failed') break;
      // jump ahead to just before the next attempt
      const next = Date.parse(list.body.data.deliveries[0].next_attempt_at);
      if (next - clock.now() > 60_000) clock.set(next - 30_000);
    }
    const list = await t.call('list_webhook_deliveries', { api_key: s.accountKey, arguments: { webhook_uid: uid, status: 'failed' } });
    assert.equal(list.body.data.deliveries.length, 1);
    const failed = list.body.data.deliveries[0];
    assert.equal(failed.attempts, sink.requests.length);
    assert.equal(failed.attempt_log.length, failed.attempts);
    assert.equal(failed.attempts, 8, 'the first try and one per delay of the schedule');
    assert.equal(failed.last_status_code, 503);
    assert.equal(failed.last_error, 'HTTP 503');
    for (const a of failed.attempt_log) assert.equal(a.status_code, 503);
    // The gaps follow the schedule (seconds, then minutes, then hours) and the last attempt is over a day after the first.
    const gaps = times.slice(1).map((x, i) => x - times[i]);
    assert.equal(gaps[0], 5_000, `first gap ${gaps[0]}`);
    assert.ok(gaps[1] >= 5 * 60_000 && gaps[1] < 6 * 60_000, `second gap ${gaps[1]}`);
    assert.ok(gaps[2] >= 30 * 60_000, `third gap ${gaps[2]}`);
    assert.ok(times[times.length - 1] >= 24 * 3600_000, `last attempt at ${times[times.length - 1]} ms`);
    // every attempt carried the same event id
    assert.equal(new Set(sink.requests.map((r) => r.headers['x-posthorn-event-id'])).size, 1);

    // The receiver moved: fixing the endpoint's URL and requeueing sends the event there.
    sink.answer((req) => (req.path === '/retry-fixed' ? 204 : 503));
    await t.call('update_webhook', { api_key: s.accountKey, arguments: { uid, url: sink.url + '/retry-fixed' } });
    const noIds = await t.call('retry_webhook_deliveries', { api_key: s.accountKey, arguments: {} });
    assert.equal(noIds.status, 400);
    assert.equal(noIds.body.response.status, 'bad_request');
    assert.equal(noIds.body.response.message, 'Missing required argument "ids".');
    const retried = await t.call('retry_webhook_deliveries', { api_key: s.accountKey, arguments: { ids: [failed.id] } });
    assert.equal(retried.body.data.requeued, 1);
    await d.drain();
    const after = await t.call('list_webhook_deliveries', { api_key: s.accountKey, arguments: { webhook_uid: uid } });
    assert.equal(after.body.data.deliveries[0].status, 'delivered');
    assert.equal(after.body.data.deliveries[0].url, sink.url + '/retry-fixed');
    assert.equal(sink.requests[sink.requests.length - 1].path, '/retry-fixed');
  });

  it('backs off a failing endpoint as a whole, so it cannot hold every slot while others wait', async () => {
    const dead = await t.seed('Dead');
    const alive = await t.seed('Alive');
    await t.call('create_webhook', { api_key: dead.accountKey, arguments: { url: sink.url + '/dead', events: ['delivered'] } });
    await t.call('create_webhook', { api_key: alive.accountKey, arguments: { url: sink.url + '/alive', events: ['delivered'] } });
    sink.requests.length = 0;
    sink.answer((req) => (req.path === '/dead' ? 500 : 200));
    await addEvents(t, Array.from({ length: 40 }, (_, i) => deliveredEvent(dead, 100 + i)));
    await addEvents(t, Array.from({ length: 5 }, (_, i) => deliveredEvent(alive, 200 + i)));
    await dispatcherOf(t).drain();
    const byPath = (p: string) => sink.requests.filter((r) => r.path === p).length;
    assert.equal(byPath('/alive'), 5);
    // The first batch (32 slots) failed; the other 8 were held back without being tried.
    assert.equal(byPath('/dead'), 32);
    const pending = await t.call('list_webhook_deliveries', { api_key: dead.accountKey, arguments: { status: 'pending' } });
    const untried = pending.body.data.deliveries.filter((d: { attempts: number }) => d.attempts === 0);
    assert.equal(untried.length, 8);
    const tried = pending.body.data.deliveries.filter((d: { attempts: number }) => d.attempts === 1);
    assert.equal(untried[0].next_attempt_at, tried[0].next_attempt_at, 'held until the failed ones retry');
    // Once the endpoint answers again, everything goes.
    sink.answer(() => 200);
    clock.advance(61_000);
    await dispatcherOf(t).drain();
    assert.equal(byPath('/dead'), 72);
    const left = await t.call('list_webhook_deliveries', { api_key: dead.accountKey, arguments: { status: 'pending' } });
    assert.equal(left.body.data.deliveries.length, 0);
  });

  it('forgets delivered requests after a week (and keeps failed ones for a month)', async () => {
    const s = await t.seed('Prune');
    await t.call('create_webhook', { api_key: s.accountKey, arguments: { url: sink.url + '/prune', events: ['delivered'] } });
    sink.answer(() => 200);
    await addEvents(t, [deliveredEvent(s, 300)]);
    await dispatcherOf(t).drain();
    const list = async () => (await t.call('list_webhook_deliveries', { api_key: s.accountKey })).body.data.deliveries;
    assert.equal((await list()).length, 1);
    clock.advance(6 * 86_400_000);
    await purgeOf(t).runNow();
    assert.equal((await list()).length, 1, 'kept for a week');
    clock.advance(2 * 86_400_000);
    await purgeOf(t).runNow();
    assert.equal((await list()).length, 0);
    const attempts = await t.app.services.store.db.selectFrom('outbound_attempts').select('id').where('request_id', 'not in', t.app.services.store.db.selectFrom('outbound_requests').select('id')).execute();
    assert.equal(attempts.length, 0, 'attempts go with their request');
  });

  it('does not follow redirects and gives up on a receiver that does not answer in time', async () => {
    const s = await t.seed('Redirect');
    const created = await t.call('create_webhook', { api_key: s.accountKey, arguments: { url: sink.url + '/moved', events: ['delivered'] } });
    const uid = created.body.data.webhook.uid;
    sink.requests.length = 0;
    sink.answer((req) => (req.path === '/moved' ? { status: 302, headers: { location: sink.url + '/elsewhere' } } : 200));
    await addEvents(t, [deliveredEvent(s, 20)]);
    await dispatcherOf(t).drain();
    assert.deepEqual(sink.requests.map((r) => r.path), ['/moved']);
    let list = await t.call('list_webhook_deliveries', { api_key: s.accountKey, arguments: { webhook_uid: uid } });
    assert.equal(list.body.data.deliveries[0].status, 'pending');
    assert.equal(list.body.data.deliveries[0].last_status_code, 302);

    sink.answer(() => ({ status: 200, stall: true }));
    clock.advance(61_000);
    await dispatcherOf(t).drain();
    list = await t.call('list_webhook_deliveries', { api_key: s.accountKey, arguments: { webhook_uid: uid } });
    const d = list.body.data.deliveries[0];
    assert.equal(d.status, 'pending');
    assert.equal(d.attempts, 2);
    assert.match(d.last_error, /timed out after 500 ms/);
    assert.equal(d.last_status_code, null);
  });
});

describe('webhook URL policy (SSRF)', () => {
  let t: TestApp;
  let seed: Seed;
  let dns: TestDnsServer;
  before(async () => {
    // Names resolve through a DNS server of the test on 127.0.0.1 (nothing leaves the machine).
    dns = await startDnsServer({
      'private.test': { a: ['10.0.0.7'] },
      'mixed.test': { a: ['93.184.216.34', '127.0.0.1'] },
      'v6loop.test': { aaaa: ['::1'] },
      'rebind.test': { a: ['93.184.216.34'] },
    });
    t = await startTestApp({ config: { allowPrivateWebhooks: false, dnsServers: [dns.address] } });
    seed = await t.seed();
  });
  after(async () => {
    await t.close();
    await dns.close();
  });

  it('refuses URLs that resolve to private, loopback, link-local, CGNAT or unspecified addresses', async () => {
    const refused = [
      'http://127.0.0.1:8080/hook',
      'http://127.9.9.9/',
      'http://10.1.2.3/',
      'http://172.16.0.1/',
      'http://192.168.1.1/',
      'http://100.64.0.1/',
      'http://169.254.169.254/latest/meta-data',
      'http://0.0.0.0/',
      'http://[::1]/',
      'http://[::]/',
      'http://[fe80::1]/',
      'http://[fd00::1]/',
      'http://[::ffff:127.0.0.1]/',
      'http://[::ffff:a9fe:a9fe]/',
      'http://[64:ff9b::a00:1]/',
      'http://[64:ff9b:1::7f00:1]/',
      'http://[::ffff:0:7f00:1]/',
      'http://[2001:0:4136:e378:8000:63bf:80ff:fffe]/',
      'http://[100::1]/',
      'https://2130706433/',
      'http://0x7f.1/',
      'http://private.test/hook',
      'http://mixed.test/hook',
      'http://v6loop.test/hook',
    ];
    for (const url of refused) {
      const r = await t.call('create_webhook', { api_key: seed.accountKey, arguments: { url } });
      assert.equal(r.status, 400, url);
      assert.match(r.body.response.message, /non-public address/, url);
    }
    const unknown = await t.call('create_webhook', { api_key: seed.accountKey, arguments: { url: 'http://nowhere.test/' } });
    assert.equal(unknown.status, 400);
    assert.match(unknown.body.response.message, /does not resolve/);
  });

  it('classifies public addresses as public', async () => {
    const { isPublicAddress } = await import('../../src/webhooks/url-policy.ts');
    for (const ip of ['8.8.8.8', '1.1.1.1', '100.128.0.1', '172.32.0.1', '2606:4700::1111', '::ffff:8.8.8.8']) assert.ok(isPublicAddress(ip), ip);
    for (const ip of ['100.127.255.255', '172.31.255.255', '::ffff:10.0.0.1', '2002:0a00:0001::1', 'fc00::', 'ff02::1', '255.255.255.255']) {
      assert.ok(!isPublicAddress(ip), ip);
    }
  });

  it('re-checks at send time: after DNS rebinding to a private address nothing is sent', async () => {
    const sink = await startHttpSink();
    try {
      // Accepted while the name pointed at a public address (never contacted: see below).
      const created = await t.call('create_webhook', { api_key: seed.accountKey, arguments: { url: `http://rebind.test:${new URL(sink.url).port}/hook`, events: ['failed'] } });
      assert.equal(created.status, 200, JSON.stringify(created.body));
      dns.set('rebind.test', { a: ['127.0.0.1'], ttl: 0 });
      const now = t.app.services.clock.now();
      await t.app.services.store.write((trx) =>
        recordEvent(trx, { accountId: seed.accountId, projectId: seed.projectId, type: 'failed', payload: { recipient: 'x@example.com' }, now }),
      );
      await dispatcherOf(t).drain();
      assert.equal(sink.requests.length, 0, 'nothing reached the loopback receiver');
      const list = await t.call('list_webhook_deliveries', { api_key: seed.accountKey, arguments: { status: 'pending' } });
      assert.equal(list.body.data.deliveries.length, 1);
      assert.match(list.body.data.deliveries[0].last_error, /refused: host rebind\.test resolves to a non-public address \(127\.0\.0\.1\)/);
      assert.equal(list.body.data.deliveries[0].attempt_log.length, 1);
    } finally {
      await sink.close();
    }
  });
});

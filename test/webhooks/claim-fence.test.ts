// Outbound requests (webhooks, postbacks) are claimed under leases as transmissions are, and get
// what transmissions have (docs/reliability.md, "Outbound requests: the fence and the deaths of
// their holders"):
//
//   the fence   right before a request is posted (after its host was resolved, where a stalled
//               process may have spent its stall), the dispatcher asks whether it still holds it;
//               what was taken meanwhile (its lease ran out and another worker claimed it, or a
//               process on another host presumed this one dead and released it) is not posted by
//               it, and nothing is recorded for it: its next holder posts it, once. A real DNS
//               server holds the answer for the endpoint's host while the claim is taken.
//   deaths      a request whose holders died with it three times in a row fails with
//               WORKER_CRASHED without being posted; from two it is claimed alone.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ManualClock } from '../../src/domain/clock.ts';
import { recordEvent } from '../../src/storage/events.ts';
import { claimDueOutbound } from '../../src/storage/outbound.ts';
import { createDispatchWorker, type DispatchWorker } from '../../src/webhooks/dispatch-outbound.ts';
import { createFanOutJob } from '../../src/webhooks/fan-out-events.ts';
import { ProcessRegistry } from '../../src/workers/process-registry.ts';
import { startTestApp, type Seed, type TestApp } from '../helpers/app.ts';
import { startDnsServer, type TestDnsServer } from '../helpers/dns-server.ts';
import { startHttpSink, type HttpSink } from '../helpers/http-sink.ts';
import { until } from '../helpers/wait.ts';
import { loseNextAnswer } from '../helpers/lost-answer.ts';
import { StoreUnavailableError } from '../../src/storage/store.ts';

const EVENTS = 4;
const HOST = 'hook.posthorn.test';

/** A test app whose webhook endpoint's host answers only once `open()` is called. */
async function startGated(clock?: ManualClock) {
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  const sink = await startHttpSink();
  // Held once the endpoint is saved (saving resolves the host too).
  let holding = false;
  const dns = await startDnsServer({ [HOST]: { a: ['127.0.0.1'], hold: () => (holding ? gate : null) } });
  const t = await startTestApp({ background: false, clock, config: { allowPrivateWebhooks: true, dnsServers: [dns.address], webhookTimeoutMs: 5000 } });
  const seed = await t.seed();
  const port = new URL(sink.url).port;
  const created = await t.call('create_webhook', { api_key: seed.accountKey, arguments: { url: `http://${HOST}:${port}/hook`, events: ['delivered'] } });
  assert.equal(created.status, 200, JSON.stringify(created.body));
  holding = true;
  await addEvents(t, seed, EVENTS);
  return { t, seed, sink, dns, open, gate };
}

async function addEvents(t: TestApp, seed: Seed, n: number): Promise<void> {
  const now = t.app.services.clock.now();
  await t.app.services.store.write(async (trx) => {
    for (let i = 0; i < n; i++) {
      await recordEvent(trx, { accountId: seed.accountId, projectId: seed.projectId, type: 'delivered', payload: { recipient: `r${i}@example.com`, n: i }, now });
    }
  });
  const fanOut = createFanOutJob(t.app.services);
  await fanOut.runNow();
  await fanOut.stop();
}

const requests = (t: TestApp) => t.app.services.store.db.selectFrom('outbound_requests').selectAll().orderBy('id').execute();
const attemptRows = (t: TestApp) => t.app.services.store.db.selectFrom('outbound_attempts').selectAll().orderBy('id').execute();
const eventIds = (sink: HttpSink) => sink.requests.map((r) => String(r.headers['x-posthorn-event-id'])).sort();

describe('the fence before a webhook is posted: a lease that ran out while resolving', () => {
  const clock = new ManualClock(Date.UTC(2026, 5, 1, 12));
  let g: Awaited<ReturnType<typeof startGated>>;
  let a: DispatchWorker;
  let b: DispatchWorker;
  before(async () => {
    g = await startGated(clock);
  });
  after(async () => {
    g?.open();
    await a?.stop();
    await b?.stop();
    await g?.t.close();
    await g?.sink.close();
    await g?.dns.close();
  });

  it('posts none of what another worker claimed meanwhile, records nothing for it; each is posted once by its next holder', async () => {
    const services = g.t.app.services;
    a = createDispatchWorker(services, 'worker-a');
    const running = a.runOnce();
    await until('every request resolving its host', () => g.dns.countQueries(HOST, 'A') >= EVENTS);
    // The lease (30 s) runs out while the answer is held; another worker claims every request.
    clock.advance(31_000);
    const stolen = await services.store.write((trx) => claimDueOutbound(trx, { worker: 'thief', now: clock.now(), leaseUntil: clock.now() + 30_000, limit: 10 }));
    assert.equal(stolen.length, EVENTS, 'the leases ran out: another worker claims every request');
    g.open();
    assert.equal(await running, EVENTS);
    assert.equal(g.sink.requests.length, 0, 'nothing posted by the worker that lost them');
    assert.deepEqual((await requests(g.t)).map((r) => [r.locked_by, r.state]), Array.from({ length: EVENTS }, () => ['thief', 'pending']));
    assert.deepEqual(await attemptRows(g.t), [], 'no attempt recorded by it');

    // The thief dies without posting; once its lease ends, the next holder posts each request once.
    clock.advance(31_000);
    b = createDispatchWorker(services, 'worker-b');
    assert.equal(await b.runOnce(), EVENTS);
    assert.equal(g.sink.requests.length, EVENTS);
    assert.equal(new Set(eventIds(g.sink)).size, EVENTS, 'each event once');
    assert.ok((await requests(g.t)).every((r) => r.state === 'delivered' && r.locked_by === null));
    assert.deepEqual((await attemptRows(g.t)).map((r) => r.worker), Array.from({ length: EVENTS }, () => 'worker-b'));
  });
});

describe('the fence before a webhook is posted: presumed dead by a process on another host', () => {
  let g: Awaited<ReturnType<typeof startGated>>;
  let registry: ProcessRegistry;
  let elsewhere: ProcessRegistry;
  let a: DispatchWorker;
  before(async () => {
    g = await startGated();
    // This process beats only when asked (the hour between heartbeats stands for a stall: SIGSTOP).
    registry = new ProcessRegistry(g.t.app.services, { heartbeatMs: 3_600_000, deadAfterMs: 1000 });
    await registry.start();
    elsewhere = new ProcessRegistry(g.t.app.services, { host: 'another-host', heartbeatMs: 3_600_000, deadAfterMs: 1000 });
    await elsewhere.start();
  });
  after(async () => {
    g?.open();
    await a?.stop();
    await registry?.stop();
    await elsewhere?.stop();
    await g?.t.close();
    await g?.sink.close();
    await g?.dns.close();
  });

  it('posts none of what was released while it was silent; each is posted once by its next claim', async () => {
    const services = g.t.app.services;
    a = createDispatchWorker(services, registry.id, registry);
    const running = a.runOnce();
    await until('every request resolving its host', () => g.dns.countQueries(HOST, 'A') >= EVENTS);
    await until("the other host to release this process's claims", async () => (await elsewhere.reap()).includes(registry.id), 10_000, 100);
    const released = await requests(g.t);
    assert.deepEqual(released.map((r) => [r.locked_by, Number(r.holder_deaths)]), Array.from({ length: EVENTS }, () => [null, 1]), 'released, the death of their holder counted');
    g.open();
    assert.equal(await running, EVENTS);
    assert.equal(g.sink.requests.length, 0, 'nothing posted of what was released');
    assert.deepEqual(await attemptRows(g.t), []);
    // Released, they are claimed again (here by this same process, registered again, as soon as
    // its slots free up) and each is posted once.
    await until('each request posted by its next claim', async () => {
      await a.runOnce();
      await a.idle();
      return (await requests(g.t)).every((r) => r.state === 'delivered');
    });
    assert.equal(g.sink.requests.length, EVENTS);
    assert.equal(new Set(eventIds(g.sink)).size, EVENTS, 'each event once');
    assert.ok((await requests(g.t)).every((r) => r.state === 'delivered' && Number(r.holder_deaths) === 0));
  });
});

describe('webhook requests whose holders died', () => {
  let t: TestApp;
  let seed: Seed;
  let sink: HttpSink;
  let dispatcher: DispatchWorker;
  before(async () => {
    sink = await startHttpSink();
    t = await startTestApp({ background: false, config: { allowPrivateWebhooks: true, webhookTimeoutMs: 1000 } });
    seed = await t.seed();
    const created = await t.call('create_webhook', { api_key: seed.accountKey, arguments: { url: `${sink.url}/hook`, events: ['delivered'] } });
    assert.equal(created.status, 200, JSON.stringify(created.body));
  });
  after(async () => {
    await dispatcher?.stop();
    await t?.close();
    await sink?.close();
  });

  it('fails at the third death with WORKER_CRASHED, posting nothing; posts those at the second one at a time', async () => {
    await addEvents(t, seed, 4);
    const rows = await requests(t);
    const [poison, suspectA, suspectB, plain] = rows.map((r) => Number(r.id));
    const bodies = new Map(rows.map((r) => [Number(r.id), r.body]));
    const posted = (id: number) => sink.requests.filter((r) => r.body === bodies.get(id)).length;
    const store = t.app.services.store;
    for (const [id, deaths] of [[poison, 3], [suspectA, 2], [suspectB, 2]]) {
      await store.write((trx) => trx.updateTable('outbound_requests').set({ holder_deaths: deaths }).where('id', '=', id).execute());
    }
    const row = async (id: number) => (await requests(t)).find((r) => Number(r.id) === id)!;
    // The receiver holds the first suspect's post until its timeout.
    let heldA = false;
    sink.answer((req) => (req.body === bodies.get(suspectA) && !heldA ? ((heldA = true), { status: 200, stall: true }) : 200));
    dispatcher = createDispatchWorker(t.app.services, 'dispatcher');
    // The poison (the first suspect due) and the plain one: one suspect per claim.
    assert.equal(await dispatcher.runOnce(), 2);
    const p = await row(poison);
    assert.deepEqual([p.state, Number(p.holder_deaths), p.locked_by], ['failed', 0, null]);
    assert.match(p.last_error ?? '', /^WORKER_CRASHED: a process died while holding this request 3 times in a row/);
    const attempts = (await attemptRows(t)).filter((a) => Number(a.request_id) === poison);
    assert.deepEqual(attempts.map((a) => [a.status_code, a.error?.slice(0, 14)]), [[null, 'WORKER_CRASHED']]);
    assert.equal((await row(plain)).state, 'delivered');
    // The next suspect (at the next poll once one is done; here at once): held at the receiver.
    await dispatcher.claimNow();
    await until('the first other suspect at the receiver', () => posted(suspectA) === 1);
    // While it is held, a claim takes no other suspect.
    await dispatcher.claimNow();
    assert.equal((await row(suspectB)).locked_by, null, 'the second suspect waits: one at a time');
    // Once it is done (timed out, to be retried), the next suspect.
    await until('the second suspect posted', async () => {
      await dispatcher.claimNow();
      return posted(suspectB) === 1;
    }, 15_000, 100);
    await dispatcher.idle();
    assert.equal(posted(poison), 0, 'the poison was never posted');
    assert.deepEqual([posted(suspectB), posted(plain)], [1, 1]);
    const b = await row(suspectB);
    assert.deepEqual([b.state, Number(b.holder_deaths)], ['delivered', 0]);
    // Its attempt recorded (timed out; retried on the schedule): a process worked it and lived.
    assert.equal(Number((await row(suspectA)).holder_deaths), 0);
    assert.equal((await attemptRows(t)).find((a) => Number(a.request_id) === suspectA)?.error, 'timed out after 1000 ms');
  });
});

describe('a claim of webhook requests whose answer was lost', () => {
  let t: TestApp;
  let sink: HttpSink;
  let dispatcher: DispatchWorker;
  before(async () => {
    sink = await startHttpSink();
    t = await startTestApp({ background: false, config: { allowPrivateWebhooks: true, webhookTimeoutMs: 5000 } });
    const seed = await t.seed();
    const created = await t.call('create_webhook', { api_key: seed.accountKey, arguments: { url: `${sink.url}/hook`, events: ['delivered'] } });
    assert.equal(created.status, 200, JSON.stringify(created.body));
    await addEvents(t, seed, 3);
  });
  after(async () => {
    await dispatcher?.stop();
    await t?.close();
    await sink?.close();
  });

  it('gives back what the claim took at the next claim, which posts each once, not when the lease ends', async () => {
    dispatcher = createDispatchWorker(t.app.services, 'dispatcher');
    const lost = loseNextAnswer(t.app.services.store);
    try {
      await assert.rejects(dispatcher.runOnce(), StoreUnavailableError);
    } finally {
      lost.restore();
    }
    const taken = await requests(t);
    assert.deepEqual(taken.map((r) => [r.state, r.locked_by]), Array.from({ length: 3 }, () => ['pending', 'dispatcher']), 'the claim was written');
    assert.equal(sink.requests.length, 0);
    // The leases run for minutes; the next claim takes the three at once.
    assert.equal(await dispatcher.runOnce(), 3);
    assert.deepEqual((await requests(t)).map((r) => r.state), ['delivered', 'delivered', 'delivered']);
    assert.equal(new Set(eventIds(sink)).size, 3);
    assert.equal(sink.requests.length, 3);
  });
});

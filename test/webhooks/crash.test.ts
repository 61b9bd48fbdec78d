// A crash in the middle of dispatch loses nothing: a real `posthorn serve --role worker` process
// posts webhooks to a slow receiver and is killed with SIGKILL part-way; a restarted service
// delivers every remaining event, the dead process's leased requests within RESUME_LIMIT_MS of the
// kill (the registry of live processes releases them, docs/decisions/0008-lease-runner.md; their
// leases would hold for 30 s). Receivers may see an event twice (the requests in flight at the
// kill), never zero times; they de-duplicate on the event id.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startApp } from '../../src/app.ts';
import { createLogger } from '../../src/log.ts';
import { recordEvent } from '../../src/storage/events.ts';
import type { OutboundDispatcher } from '../../src/webhooks/index.ts';
import { startTestApp, type Seed, type TestApp } from '../helpers/app.ts';
import { spawnServe } from '../helpers/child-service.ts';
import { startHttpSink, verifyWebhookSignature, type HttpSink } from '../helpers/http-sink.ts';

const EVENTS = 300;
const RESUME_LIMIT_MS = 15_000;

describe('webhook dispatch survives a crash', () => {
  let t: TestApp;
  let seed: Seed;
  let sink: HttpSink;
  before(async () => {
    sink = await startHttpSink();
    // API only: the dispatching is done by the child process, then by the restarted service.
    t = await startTestApp({ background: false, config: { allowPrivateWebhooks: true } });
    seed = await t.seed();
  });
  after(async () => {
    await t.close();
    await sink.close();
  });

  it('SIGKILL mid-dispatch, restart: every event delivered at least once, duplicates bounded by what was in flight', async () => {
    const created = await t.call('create_webhook', { api_key: seed.accountKey, arguments: { url: sink.url + '/hook', events: ['delivered'] } });
    const secret = created.body.data.webhook.secret as string;
    const now = Date.now();
    await t.app.services.store.write(async (trx) => {
      for (let i = 0; i < EVENTS; i++) {
        await recordEvent(trx, { accountId: seed.accountId, projectId: seed.projectId, type: 'delivered', payload: { recipient: `r${i}@example.com`, n: i }, now });
      }
    });
    sink.answer(() => ({ status: 200, delayMs: 30 }));

    const config = t.app.services.config;
    const worker = spawnServe(config, ['--role', 'worker'], {
      POSTHORN_ALLOW_PRIVATE_WEBHOOKS: 'true',
      POSTHORN_POLL_MS: '100',
      POSTHORN_OPS_PORT: '0',
    });
    try {
      await sink.waitFor(60, 30_000);
    } finally {
      await worker.kill();
    }
    const killedAt = Date.now();
    const beforeRestart = sink.requests.length;
    assert.ok(beforeRestart < EVENTS, `the crash happened mid-dispatch (${beforeRestart} of ${EVENTS} sent)`);
    const stranded = await t.app.services.store.db
      .selectFrom('outbound_requests')
      .select('id')
      .where('state', '=', 'pending')
      .where('locked_by', 'is not', null)
      .execute();
    assert.ok(stranded.length > 0, 'requests were in flight (leased) when the process died');

    // Restart, on the real clock: the dead process's leases still hold.
    const restarted = await startApp({ ...config, port: 0 }, { log: createLogger('silent') });
    try {
      sink.answer(() => 200);
      await (restarted.background.find((s) => s.name === 'webhooks') as OutboundDispatcher).drain();
    } finally {
      await restarted.close();
    }

    const ids = sink.requests.map((r) => {
      assert.ok(verifyWebhookSignature(secret, r, Infinity));
      return String(r.headers['x-posthorn-event-id']);
    });
    const unique = new Set(ids);
    assert.equal(unique.size, EVENTS, 'every event reached the receiver');
    const duplicates = ids.length - unique.size;
    assert.ok(duplicates <= stranded.length, `duplicates (${duplicates}) bounded by the requests in flight at the kill (${stranded.length})`);
    const states = await t.app.services.store.db.selectFrom('outbound_requests').select('state').execute();
    assert.equal(states.length, EVENTS, 'one request per event, fan-out not repeated');
    assert.ok(states.every((s) => s.state === 'delivered'));
    const resumed = await t.app.services.store.db
      .selectFrom('outbound_requests')
      .select((eb) => eb.fn.max('delivered_at').as('last'))
      .where('id', 'in', stranded.map((r) => r.id))
      .executeTakeFirstOrThrow();
    const resumeMs = Number(resumed.last) - killedAt;
    process.stdout.write(
      `# crash test: ${beforeRestart} received before SIGKILL, ${stranded.length} in flight, ${duplicates} delivered twice; ` +
        `the in-flight ones delivered ${resumeMs} ms after the kill (limit ${RESUME_LIMIT_MS} ms)\n`,
    );
    assert.ok(resumeMs < RESUME_LIMIT_MS, `the dead process's requests were delivered ${resumeMs} ms after the kill`);
  });
});

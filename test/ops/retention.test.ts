// Retention (docs/operations.md): the purge deletes exactly what is past each project's retention
// (messages with their transmissions and attempts, fanned-out events, finished outbound requests
// with their attempts) and nothing else, in small batches, while send_message keeps being answered
// and every message it accepted stays. will_purge_at tells the same rule.
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { DAY_MS } from '../../src/domain/time.ts';
import { updateProject } from '../../src/operations/projects.ts';
import { purgeExpired, willPurgeAt } from '../../src/operations/retention.ts';
import { SweepRunner } from '../../src/workers/sweep-runner.ts';
import type { Services } from '../../src/services.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { insertMessage } from '../helpers/fixtures.ts';
import { simpleMessage } from '../delivery/harness.ts';
import { sampleValue, scrape } from './prometheus.ts';

async function insertEvent(services: Services, e: { accountId: number; projectId: number | null; createdAt: number; dispatched: boolean }): Promise<number> {
  const row = await services.store.write((trx) =>
    trx
      .insertInto('events')
      .values({ account_id: e.accountId, project_id: e.projectId, type: 'delivered', payload: '{}', created_at: e.createdAt, dispatched_at: e.dispatched ? e.createdAt : null })
      .returning('id')
      .executeTakeFirstOrThrow(),
  );
  return Number(row.id);
}

async function insertOutbound(
  services: Services,
  o: { accountId: number; projectId: number | null; createdAt: number; state: string; attempts: number; variablesOf?: number },
): Promise<number> {
  return services.store.write(async (trx) => {
    const row = await trx
      .insertInto('outbound_requests')
      .values({
        account_id: o.accountId,
        project_id: o.projectId,
        kind: 'webhook',
        webhook_id: null,
        event_id: null,
        event_type: 'delivered',
        url: 'https://hooks.example/x',
        headers: '{}',
        ref: null,
        state: o.state,
        attempts: o.attempts,
        next_attempt_at: o.createdAt,
        locked_by: null,
        locked_until: null,
        last_status_code: null,
        last_error: null,
        created_at: o.createdAt,
        updated_at: o.createdAt,
        delivered_at: null,
        failed_at: null,
        variables_of: o.variablesOf ?? null,
        body: '{}',
      })
      .returning('id')
      .executeTakeFirstOrThrow();
    for (let i = 0; i < o.attempts; i++) {
      await trx.insertInto('outbound_attempts').values({ request_id: row.id, started_at: o.createdAt, duration_ms: 5, status_code: 200, error: null, worker: null }).execute();
    }
    return Number(row.id);
  });
}

async function addAttempt(services: Services, transmissionId: number, at: number): Promise<void> {
  await services.store.write((trx) =>
    trx.insertInto('attempts').values({ transmission_id: transmissionId, started_at: at, duration_ms: 10, mx_host: 'mx.example', outcome: 'sent', result_code: 'SMTP_250', result_message: 'ok', worker: 'w' }).execute(),
  );
}

describe('retention and the purge', () => {
  const cleanup: Array<() => Promise<void>> = [];
  after(async () => {
    for (const f of cleanup.reverse()) await f();
  });

  it('removes exactly what is due, per project, while send_message goes on', async () => {
    // No background jobs: the webhook dispatcher would mark the undispatched event dispatched.
    const t: TestApp = await startTestApp({ background: false, config: { retentionDays: 30 } });
    cleanup.push(() => t.close());
    const services = t.app.services;
    const now = services.clock.now();
    const ago = (days: number) => now - days * DAY_MS - 60_000;
    const a = await t.seed('Short');
    const b = await t.seed('Default');
    const keep = await t.seed('Forever');
    const account = await services.store.db.selectFrom('accounts').selectAll().where('id', '=', a.accountId).executeTakeFirstOrThrow();
    await updateProject(services, account, a.projectUid, { settings: { retention_days: 10 } });
    const keepAccount = await services.store.db.selectFrom('accounts').selectAll().where('id', '=', keep.accountId).executeTakeFirstOrThrow();
    await updateProject(services, keepAccount, keep.projectUid, { settings: { retention_days: 0 } });

    const due: string[] = [];
    const kept: string[] = [];
    // Project A (10 days): many old completed messages (so the purge takes many batches), each
    // with two transmissions and an attempt; a young one; an old one still being retried.
    for (let i = 0; i < 60; i++) {
      const m = await insertMessage(services, { projectId: a.projectId, uid: `a-old-${i}`, created_at: ago(11), recipients: [{ recipient: `x${i}@example.test`, status: 'completed' }, { recipient: `y${i}@example.test`, status: 'failed' }] });
      await addAttempt(services, Number(m.transmissions[0].id), ago(11));
      due.push(m.message.uid);
    }
    kept.push((await insertMessage(services, { projectId: a.projectId, uid: 'a-young', created_at: ago(9), recipients: [{ recipient: 'y@example.test', status: 'completed' }] })).message.uid);
    kept.push((await insertMessage(services, { projectId: a.projectId, uid: 'a-live', created_at: ago(11), recipients: [{ recipient: 'z@example.test', status: 'completed' }, { recipient: 'r@example.test', status: 'retry' }] })).message.uid);
    // Project B (the server's 30 days) and project Forever (0: never).
    kept.push((await insertMessage(services, { projectId: b.projectId, uid: 'b-11', created_at: ago(11), recipients: [{ recipient: 'b@example.test', status: 'completed' }] })).message.uid);
    due.push((await insertMessage(services, { projectId: b.projectId, uid: 'b-31', created_at: ago(31), recipients: [{ recipient: 'b@example.test', status: 'completed' }] })).message.uid);
    kept.push((await insertMessage(services, { projectId: keep.projectId, uid: 'k-400', created_at: ago(400), recipients: [{ recipient: 'k@example.test', status: 'completed' }] })).message.uid);

    const dueEvents = [await insertEvent(services, { accountId: a.accountId, projectId: a.projectId, createdAt: ago(11), dispatched: true })];
    const keptEvents = [
      await insertEvent(services, { accountId: a.accountId, projectId: a.projectId, createdAt: ago(11), dispatched: false }),
      await insertEvent(services, { accountId: a.accountId, projectId: a.projectId, createdAt: ago(9), dispatched: true }),
      await insertEvent(services, { accountId: b.accountId, projectId: null, createdAt: ago(11), dispatched: true }),
    ];
    dueEvents.push(await insertEvent(services, { accountId: b.accountId, projectId: null, createdAt: ago(31), dispatched: true }));
    const dueOutbound = [await insertOutbound(services, { accountId: a.accountId, projectId: a.projectId, createdAt: ago(11), state: 'delivered', attempts: 2 })];
    dueOutbound.push(await insertOutbound(services, { accountId: a.accountId, projectId: a.projectId, createdAt: ago(11), state: 'failed', attempts: 1 }));
    const keptOutbound = [
      await insertOutbound(services, { accountId: a.accountId, projectId: a.projectId, createdAt: ago(11), state: 'pending', attempts: 1 }),
      await insertOutbound(services, { accountId: keep.accountId, projectId: keep.projectId, createdAt: ago(400), state: 'delivered', attempts: 1 }),
    ];

    // Ingest runs during the purge: every answer is 200 and every accepted message survives.
    let purging = true;
    const accepted: string[] = [];
    const ingest = (async () => {
      for (let i = 0; i < 400 && (purging || i < 20); i++) {
        const uid = `live-${i}`;
        const r = await t.call('send_message', { api_key: a.projectKey, uid, arguments: simpleMessage(`live${i}@example.test`) });
        assert.equal(r.status, 200, JSON.stringify(r.body));
        accepted.push(uid);
      }
    })();
    let batches = 0;
    const totals = await purgeExpired(services, { batchSize: 7, pauseMs: 2, onProgress: () => batches++ });
    purging = false;
    await ingest;

    assert.equal(totals.messages, 61);
    assert.equal(totals.transmissions, 121);
    assert.equal(totals.attempts, 60);
    assert.equal(totals.events, 2);
    assert.equal(totals.outbound_requests, 2);
    assert.equal(totals.outbound_attempts, 3);
    assert.ok(batches >= 9, `small batches (${batches})`);

    const db = services.store.db;
    const uids = new Set((await db.selectFrom('messages').select('uid').execute()).map((r) => r.uid));
    for (const uid of due) assert.ok(!uids.has(uid), `${uid} purged`);
    for (const uid of [...kept, ...accepted]) assert.ok(uids.has(uid), `${uid} kept`);
    // No orphans: every transmission has its message, every attempt its transmission.
    const orphanT = await db.selectFrom('transmissions').select('id').where('message_id', 'not in', db.selectFrom('messages').select('id')).execute();
    assert.equal(orphanT.length, 0);
    const orphanA = await db.selectFrom('attempts').select('id').where('transmission_id', 'not in', db.selectFrom('transmissions').select('id')).execute();
    assert.equal(orphanA.length, 0);
    const events = new Set((await db.selectFrom('events').select('id').execute()).map((r) => Number(r.id)));
    for (const id of dueEvents) assert.ok(!events.has(id));
    for (const id of keptEvents) assert.ok(events.has(id));
    const outbound = new Set((await db.selectFrom('outbound_requests').select('id').execute()).map((r) => Number(r.id)));
    for (const id of dueOutbound) assert.ok(!outbound.has(id));
    for (const id of keptOutbound) assert.ok(outbound.has(id));
    assert.equal((await db.selectFrom('outbound_attempts').select('id').where('request_id', 'in', dueOutbound).execute()).length, 0);

    // A second run finds nothing more; the counters saw the first.
    assert.equal((await purgeExpired(services)).messages, 0);
    const samples = await scrape(t.url);
    assert.equal(sampleValue(samples, 'posthorn_purged_rows_total', { table: 'messages' }), 61);
  });

  it('keeps a message while a pending webhook request still takes its variables from it', async () => {
    const t = await startTestApp({ background: false, config: { retentionDays: 10 } });
    cleanup.push(() => t.close());
    const services = t.app.services;
    const seed = await t.seed();
    const old = services.clock.now() - 11 * DAY_MS;
    const m = await insertMessage(services, { projectId: seed.projectId, uid: 'clicked-late', created_at: old, recipients: [{ recipient: 'c@example.test', status: 'completed' }] });
    // A click long after the message was sent: its webhook request is young and still pending.
    const request = await insertOutbound(services, { accountId: seed.accountId, projectId: seed.projectId, createdAt: services.clock.now(), state: 'pending', attempts: 1, variablesOf: Number(m.transmissions[0].id) });
    const exists = async () => (await services.store.db.selectFrom('messages').select('id').where('id', '=', m.message.id).executeTakeFirst()) !== undefined;
    assert.equal((await purgeExpired(services)).messages, 0);
    assert.ok(await exists(), 'kept while the request waits for its variables');
    await services.store.write((trx) => trx.updateTable('outbound_requests').set({ state: 'delivered' }).where('id', '=', request).execute());
    assert.equal((await purgeExpired(services)).messages, 1);
    assert.ok(!(await exists()), 'purged once the request is settled');
  });

  it('will_purge_at in get_messages is the purge rule: created_at + the project retention, null when kept forever', async () => {
    const t = await startTestApp({ config: { retentionDays: 45 } });
    cleanup.push(() => t.close());
    const seed = await t.seed();
    const r = await t.call('send_message', { api_key: seed.projectKey, uid: 'wp', arguments: simpleMessage('w@example.test') });
    assert.equal(r.status, 200);
    const list = async () => (await t.call('get_messages', { api_key: seed.projectKey })).body.data.wp;
    let m = await list();
    assert.equal(Date.parse(m.will_purge_at) - Date.parse(m.created_at), 45 * DAY_MS);
    const updated = await t.call('update_project', { api_key: seed.accountKey, arguments: { uid: seed.projectUid, settings: { retention_days: 7 } } });
    assert.equal(updated.status, 200, JSON.stringify(updated.body));
    assert.equal(updated.body.data.project.settings.retention_days, 7);
    m = await list();
    assert.equal(Date.parse(m.will_purge_at) - Date.parse(m.created_at), 7 * DAY_MS);
    const bad = await t.call('update_project', { api_key: seed.accountKey, arguments: { uid: seed.projectUid, settings: { retention_days: -1 } } });
    assert.notEqual(bad.status, 200);
    const zero = await t.call('update_project', { api_key: seed.accountKey, arguments: { uid: seed.projectUid, settings: { retention_days: 0 } } });
    assert.equal(zero.status, 200, JSON.stringify(zero.body));
    m = await list();
    assert.equal(m.will_purge_at, null);
    // The same rule the purge applies.
    const project = await t.app.services.store.db.selectFrom('projects').selectAll().where('id', '=', seed.projectId).executeTakeFirstOrThrow();
    assert.equal(willPurgeAt(t.app.services, project, 1000), null);
  });

  it('counts the retention of a scheduled message from its send_at: will_purge_at says so and the purge keeps it until then', async () => {
    const t = await startTestApp({ background: false, config: { retentionDays: 1 } });
    cleanup.push(() => t.close());
    const services = t.app.services;
    const seed = await t.seed();
    const now = services.clock.now();
    // Accepted 31 days ago for 30 days ahead, sent yesterday less a minute: kept for a minute more.
    const createdAt = now - 31 * DAY_MS;
    const sendAt = now - DAY_MS + 60_000;
    await insertMessage(services, { projectId: seed.projectId, uid: 'scheduled', created_at: createdAt, send_at: sendAt, recipients: [{ recipient: 's@example.test', status: 'completed' }] });
    await insertMessage(services, { projectId: seed.projectId, uid: 'unscheduled', created_at: createdAt, recipients: [{ recipient: 'u@example.test', status: 'completed' }] });
    const list = (await t.call('get_messages', { api_key: seed.projectKey })).body.data;
    assert.equal(Date.parse(list.scheduled.will_purge_at), Math.floor((sendAt + DAY_MS) / 1000) * 1000);
    assert.equal(Date.parse(list.unscheduled.will_purge_at), Math.floor((createdAt + DAY_MS) / 1000) * 1000);
    assert.equal((await purgeExpired(services)).messages, 1);
    const left = await services.store.db.selectFrom('messages').select('uid').where('project_id', '=', seed.projectId).execute();
    assert.deepEqual(left.map((r) => r.uid), ['scheduled']);
  });

  it('runs in the worker role as a background job that stops cleanly', async () => {
    const t = await startTestApp({ config: { retentionDays: 1 } });
    cleanup.push(() => t.close());
    const job = t.app.background.find((b) => b.name === 'purge');
    assert.ok(job instanceof SweepRunner, 'the purge job is among the background services');
    const seed = await t.seed();
    await insertMessage(t.app.services, { projectId: seed.projectId, uid: 'old', created_at: t.app.services.clock.now() - 2 * DAY_MS, recipients: [{ recipient: 'o@example.test', status: 'completed' }] });
    await job.runNow();
    const rows = await t.app.services.store.db.selectFrom('messages').select('uid').execute();
    assert.deepEqual(rows.map((r) => r.uid), []);
  });
});

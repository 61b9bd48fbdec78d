// get_metrics across hour, day, week and month boundaries with a ManualClock; get_project_info,
// get_account_info and get_suppression_list; against the real server.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ManualClock } from '../../src/domain/clock.ts';
import { createProject } from '../../src/operations/projects.ts';
import { createUser } from '../../src/operations/users.ts';
import { findAccountByUid } from '../../src/storage/accounts.ts';
import { startTestApp, type Seed, type TestApp } from '../helpers/app.ts';
import { insertMessage, insertSuppression } from '../helpers/fixtures.ts';

const at = (iso: string) => Date.parse(iso);
// Monday 2 March 2026, 10:30 UTC: the week and the month started at different times (Mon 2 Mar,
// Sun 1 Mar), so each period's boundary is tested apart.
const NOW = at('2026-03-02T10:30:00Z');

function metric(current_value: number, previous_value: number, current_percent: number, previous_percent: number, diff_percent: number) {
  return { current_value, previous_value, current_percent, previous_percent, diff_percent };
}

describe('get_metrics, get_project_info, get_account_info, get_suppression_list', () => {
  let t: TestApp;
  let seed: Seed;
  let clock: ManualClock;
  let secondProjectKey: string;
  before(async () => {
    clock = new ManualClock(NOW);
    // No background workers: delivery would claim these rows and change what the reports show.
    t = await startTestApp({ clock, background: false });
    seed = await t.seed('metrics');
    const s = t.app.services;
    const add = (uid: string, created: string, fields: Record<string, unknown> = {}) =>
      insertMessage(s, { projectId: seed.projectId, uid, created_at: at(created), recipients: [{ recipient: `${uid}@example.com`, ...fields }] });
    await add('A', '2026-03-02T10:15:00Z', {
      status: 'completed',
      completed_at: at('2026-03-02T10:16:00Z'),
      opened_at: at('2026-03-02T10:20:00Z'),
      clicked_at: at('2026-03-02T10:21:00Z'),
    });
    await add('B', '2026-03-02T09:59:59Z', { status: 'failed', failed_at: at('2026-03-02T10:00:00Z'), result_code: 'SUPPRESSED' });
    await add('C', '2026-03-01T23:59:59Z', { status: 'queued' });
    await add('D', '2026-02-28T12:00:00Z', { status: 'completed', completed_at: at('2026-02-28T12:01:00Z') });
    await add('E', '2026-02-15T08:00:00Z', { status: 'failed', failed_at: at('2026-02-15T08:00:05Z'), result_code: 'SMTP_550' });
    await add('F', '2026-03-02T10:45:00Z', { status: 'retry' });
    await add('G', '2026-01-31T23:59:59Z', { status: 'completed', completed_at: at('2026-01-31T23:59:59Z') });
    // another account's transmission in the current hour must not count
    const stranger = await t.seed('stranger');
    await insertMessage(s, { projectId: stranger.projectId, uid: 'S', created_at: at('2026-03-02T10:15:00Z'), recipients: ['s@example.com'] });
    // a second project of the same account, for get_account_info
    const account = (await findAccountByUid(s.store.db, seed.accountUid))!;
    const second = await createProject(s, account, { name: 'Second project' });
    secondProjectKey = second.apiKey;
    await insertMessage(s, { projectId: second.project.id, uid: 'P2', created_at: at('2026-03-02T08:00:00Z'), recipients: ['x@example.com', 'y@example.com'] });
    // dashboard users: one of the whole account, one of the second project alone, one of another account
    await createUser(s, { accountUid: seed.accountUid, email: 'Ops@Example.com' });
    await createUser(s, { accountUid: seed.accountUid, email: 'second@example.com', projectUid: second.project.uid });
    await createUser(s, { accountUid: stranger.accountUid, email: 'stranger@example.com' });
  });
  after(() => t.close());

  const metrics = async (version: '1.0' | '1.1' = '1.1') => {
    const r = await t.call('get_metrics', { api_key: seed.projectKey }, { version });
    assert.equal(r.status, 200);
    assert.equal(r.body.response.status, 'ok');
    return r.body.data.metrics;
  };

  it('answers every period and metric as numbers', async () => {
    for (const version of ['1.0', '1.1'] as const) {
      const m = await metrics(version);
      assert.deepEqual(Object.keys(m), ['hour', 'date', 'week', 'month']);
      for (const period of Object.values(m) as any[]) {
        assert.deepEqual(Object.keys(period).sort(), ['clicked', 'created', 'delivered', 'failed', 'opened', 'queued', 'rejected', 'spammed']);
        for (const value of Object.values(period) as any[]) {
          assert.deepEqual(Object.keys(value), ['current_value', 'previous_value', 'current_percent', 'previous_percent', 'diff_percent']);
          for (const n of Object.values(value)) assert.equal(typeof n, 'number');
        }
        assert.deepEqual(period.spammed, metric(0, 0, 0, 0, 0));
      }
    }
  });

  it('counts the current hour against the previous one (start inclusive, end exclusive)', async () => {
    const { hour } = await metrics();
    assert.deepEqual(hour.created, metric(2, 1, 0, 0, 0)); // created and queued carry no percent
    assert.deepEqual(hour.delivered, metric(1, 0, 50, 0, 50));
    assert.deepEqual(hour.failed, metric(1, 0, 50, 0, 50)); // B failed at 10:00:00 exactly
    assert.deepEqual(hour.rejected, metric(1, 0, 50, 0, 50));
    assert.deepEqual(hour.opened, metric(1, 0, 50, 0, 50));
    assert.deepEqual(hour.clicked, metric(1, 0, 50, 0, 50));
    assert.deepEqual(hour.queued, metric(1, 0, 0, 0, 0)); // F (retry); B, created 09:59:59, is final
  });

  it('counts today against yesterday, this week (from Monday) and this month against the previous ones', async () => {
    const m = await metrics();
    assert.deepEqual(m.date.created, metric(3, 1, 0, 0, 0));
    assert.deepEqual(m.date.delivered, metric(1, 0, 33.33, 0, 33.33));
    assert.deepEqual(m.date.queued, metric(1, 1, 0, 0, 0));
    assert.deepEqual(m.date.failed, metric(1, 0, 33.33, 0, 33.33));
    // Sunday 1 March belongs to the previous week
    assert.deepEqual(m.week.created, metric(3, 2, 0, 0, 0));
    assert.deepEqual(m.week.delivered, metric(1, 1, 33.33, 50, -16.67)); // percentage points
    assert.deepEqual(m.week.queued, metric(1, 1, 0, 0, 0));
    // G (31 January) is in neither month
    assert.deepEqual(m.month.created, metric(4, 2, 0, 0, 0));
    assert.deepEqual(m.month.delivered, metric(1, 1, 25, 50, -25));
    assert.deepEqual(m.month.failed, metric(1, 1, 25, 50, -25));
    assert.deepEqual(m.month.rejected, metric(1, 0, 25, 0, 25));
    assert.deepEqual(m.month.queued, metric(2, 0, 0, 0, 0));
  });

  it('moves with the clock: an hour later, and at the turn of the month', async () => {
    try {
      clock.set(at('2026-03-02T11:00:00Z'));
      const later = await metrics();
      assert.deepEqual(later.hour.created, metric(0, 2, 0, 0, 0));
      assert.deepEqual(later.hour.delivered, metric(0, 1, 0, 50, -50));
      assert.deepEqual(later.date.created, metric(3, 1, 0, 0, 0));
      clock.set(at('2026-04-01T00:00:00Z'));
      const april = await metrics();
      assert.deepEqual(april.month.created, metric(0, 4, 0, 0, 0));
      assert.deepEqual(april.month.failed, metric(0, 1, 0, 25, -25));
      assert.deepEqual(april.date.created, metric(0, 0, 0, 0, 0));
    } finally {
      clock.set(NOW);
    }
  });

  it('refuses an account key', async () => {
    const r = await t.call('get_metrics', { api_key: seed.accountKey });
    assert.equal(r.status, 401);
    assert.match(r.body.response.message, /project/);
  });

  it('get_project_info: name, url, transmissions today / this month / overall, the users who see it', async () => {
    for (const version of ['1.0', '1.1'] as const) {
      const r = await t.call('get_project_info', { api_key: seed.projectKey }, { version });
      assert.equal(r.status, 200);
      assert.deepEqual(r.body.data.project, {
        uid: seed.projectUid,
        name: 'metrics project',
        url: `http://127.0.0.1:0/projects/${seed.projectUid}`,
        transmissions: { today: 3, this_month: 4, overall: 7 },
        users: { 'ops@example.com': 'ops@example.com' },
      });
    }
    const account = await t.call('get_project_info', { api_key: seed.accountKey });
    assert.equal(account.status, 401);
  });

  it('get_account_info: the same shape over all the account\'s projects, with either key kind', async () => {
    const expected = {
      uid: seed.accountUid,
      name: 'metrics account',
      url: `http://127.0.0.1:0/accounts/${seed.accountUid}`,
      transmissions: { today: 5, this_month: 6, overall: 9 },
      users: { 'ops@example.com': 'ops@example.com', 'second@example.com': 'second@example.com' },
    };
    for (const key of [seed.accountKey, seed.projectKey, secondProjectKey]) {
      for (const version of ['1.0', '1.1'] as const) {
        const r = await t.call('get_account_info', { api_key: key, uid: 'u1' }, { version });
        assert.equal(r.status, 200);
        assert.equal(r.body.response.uid, 'u1');
        assert.deepEqual(r.body.data.account, expected);
      }
    }
    assert.equal((await t.call('get_account_info', { api_key: 'wrong' })).status, 401);
  });

  it('get_suppression_list: active entries keyed by address; expired warnings left out; optional paging', async () => {
    const s = t.app.services;
    const empty = await t.call('get_suppression_list', { api_key: seed.projectKey });
    assert.equal(empty.status, 200);
    assert.deepEqual(empty.body.data, {});
    await insertSuppression(s, { projectId: seed.projectId, address: 'gone@example.com', status: 'rejected', suppression_state: 'hard_bounce', message: '550 5.1.1 no such user', now: NOW });
    await insertSuppression(s, {
      projectId: seed.projectId,
      address: 'busy@example.com',
      status: 'warning',
      suppression_state: 'soft_bounce',
      blocked_until: at('2026-03-03T10:30:00Z'),
      message: '452 mailbox full',
      now: NOW,
    });
    await insertSuppression(s, { projectId: seed.projectId, address: 'old@example.com', status: 'warning', suppression_state: 'soft_bounce', blocked_until: NOW - 1, now: NOW });
    for (const version of ['1.0', '1.1'] as const) {
      const r = await t.call('get_suppression_list', { api_key: seed.projectKey }, { version });
      assert.equal(r.status, 200);
      assert.deepEqual(r.body.data, {
        'busy@example.com': { status: 'warning', suppression_state: 'soft_bounce', blocked_until: '2026-03-03T10:30:00Z', message: '452 mailbox full' },
        'gone@example.com': { status: 'rejected', suppression_state: 'hard_bounce', blocked_until: null, message: '550 5.1.1 no such user' },
      });
    }
    const page2 = await t.call('get_suppression_list', { api_key: seed.projectKey, arguments: { per_page: 1, page: 2 } });
    assert.deepEqual(Object.keys(page2.body.data), ['gone@example.com']);
    const bad = await t.call('get_suppression_list', { api_key: seed.projectKey, arguments: { per_page: 0 } });
    assert.equal(bad.status, 406);
    assert.match(bad.body.response.message, /per_page/);
    assert.equal((await t.call('get_suppression_list', { api_key: seed.accountKey })).status, 401);
  });
});

describe('get_metrics percentages against a recorded PostageApp answer', () => {
  // The official .NET client's fixture of a real get_metrics answer has, for `date`: 85 created
  // today and 82 delivered, 118 created yesterday and 108 delivered, answered as
  // current_percent 96.47..., previous_percent 91.52..., diff_percent 4.94... (the difference of
  // the percents), with 0 as the percents of `created`.
  let t: TestApp;
  after(() => t?.close());

  it('reproduces its figures', async () => {
    const now = at('2026-06-10T15:00:00Z');
    t = await startTestApp({ clock: new ManualClock(now), background: false });
    const seed = await t.seed('recorded');
    const writes: Array<Promise<unknown>> = [];
    const add = (uid: string, created: number, delivered: boolean) =>
      writes.push(
        insertMessage(t.app.services, {
          projectId: seed.projectId,
          uid,
          created_at: created,
          recipients: [delivered ? { recipient: `${uid}@example.com`, status: 'completed', completed_at: created + 1000 } : { recipient: `${uid}@example.com`, status: 'failed', failed_at: created + 1000 }],
        }),
      );
    for (let i = 0; i < 85; i++) add(`today-${i}`, at('2026-06-10T01:00:00Z') + i * 1000, i < 82);
    for (let i = 0; i < 118; i++) add(`yesterday-${i}`, at('2026-06-09T01:00:00Z') + i * 1000, i < 108);
    await Promise.all(writes);
    const r = await t.call('get_metrics', { api_key: seed.projectKey });
    assert.deepEqual(r.body.data.metrics.date.delivered, metric(82, 108, 96.47, 91.53, 4.94));
    assert.deepEqual(r.body.data.metrics.date.failed, metric(3, 10, 3.53, 8.47, -4.94));
    assert.deepEqual(r.body.data.metrics.date.created, metric(85, 118, 0, 0, 0));
  });
});

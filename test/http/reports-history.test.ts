// messages_history, messages_history_detailed and get_messages: ordering, paging, inclusive date
// filtering and every argument error, against the real server.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ManualClock } from '../../src/domain/clock.ts';
import { startTestApp, type Seed, type TestApp } from '../helpers/app.ts';
import { insertMessage } from '../helpers/fixtures.ts';

const DAY = 86_400_000;
// 2026-04-01 .. 2026-04-05, one message a day at 00:00:00, 12:00:00 and 23:59:59 (15 transmissions,
// some with two recipients), plus one message in another project that must never show.
const D1 = Date.UTC(2026, 3, 1);

describe('messages_history and get_messages', () => {
  let t: TestApp;
  let seed: Seed;
  /** every transmission's uid/recipient, newest first (created_at desc, then id desc) */
  const expected: Array<{ uid: string; recipient: string; created_at: number }> = [];
  before(async () => {
    // No background workers: delivery would claim these rows and change what the reports show.
    t = await startTestApp({ clock: new ManualClock(D1 + 10 * DAY), config: { maxPerPage: 50 }, background: false });
    seed = await t.seed('history');
    const other = await t.seed('other');
    for (let day = 0; day < 5; day++) {
      for (const [i, offset] of [0, 12 * 3_600_000, DAY - 1000].entries()) {
        const uid = `d${day + 1}-${i}`;
        const created = D1 + day * DAY + offset;
        const recipients = i === 1 ? [`${uid}-a@example.com`, `${uid}-b@example.com`] : [`${uid}@example.com`];
        await insertMessage(t.app.services, {
          projectId: seed.projectId,
          uid,
          created_at: created,
          template: i === 0 ? 'sample_child_template' : null,
          recipients: recipients.map((r, k) =>
            k === 1
              ? { recipient: r, status: 'failed' as const, failed_at: created + 1000, result_code: 'SMTP_550', result_message: '550 no', attempts: 1 }
              : { recipient: r, status: 'completed' as const, completed_at: created + 2000, result_code: 'SMTP_250', result_message: '250 ok', attempts: 1 },
          ),
        });
        for (const r of recipients) expected.push({ uid, recipient: r, created_at: created });
      }
    }
    await insertMessage(t.app.services, { projectId: other.projectId, uid: 'foreign', created_at: D1 + DAY, recipients: ['foreign@example.com'] });
    // newest first; inserted in time order, so within one created_at the later id (b after a) comes first
    expected.reverse();
  });
  after(() => t.close());

  const history = (args: Record<string, unknown>, opts: { version?: '1.0' | '1.1'; method?: string } = {}) =>
    t.call(opts.method ?? 'messages_history', { api_key: seed.projectKey, arguments: args }, { version: opts.version });

  it('lists every transmission of the project, newest first, with the record fields typed as clients expect', async () => {
    for (const version of ['1.0', '1.1'] as const) {
      const r = await history({}, { version });
      assert.equal(r.status, 200);
      assert.equal(r.body.response.status, 'ok');
      assert.equal(r.body.response.uid, null);
      const rows = r.body.data.messages_history;
      assert.equal(rows.length, expected.length);
      assert.deepEqual(
        rows.map((x: any) => [x.uid, x.recipient]),
        expected.map((x) => [x.uid, x.recipient]),
      );
      const first = rows[0];
      assert.deepEqual(Object.keys(first).sort(), ['created_at', 'message_id', 'recipient', 'status', 'uid', 'unique_id']);
      assert.equal(first.unique_id, `${first.uid}@posthorn.test`);
      assert.equal(typeof first.message_id, 'number');
      assert.equal(first.created_at, '2026-04-05 23:59:59');
      assert.equal(first.status, 'completed');
      assert.equal(r.body.data.page, 1);
      assert.equal(r.body.data.per_page, 50);
      assert.equal(r.body.data.has_more, false);
      assert.deepEqual(r.body.data.date_range, [null, null]);
    }
  });

  it('filters by inclusive UTC dates: `to` includes its whole last day', async () => {
    const one = await history({ from: '2026-04-02', to: '2026-04-02' });
    assert.deepEqual(
      one.body.data.messages_history.map((x: any) => x.created_at),
      ['2026-04-02 23:59:59', '2026-04-02 12:00:00', '2026-04-02 12:00:00', '2026-04-02 00:00:00'],
    );
    assert.deepEqual(one.body.data.date_range, ['2026-04-02', '2026-04-02']);
    const range = await history({ from: '2026-04-02', to: '2026-04-04' });
    assert.equal(range.body.data.messages_history.length, 12);
    assert.deepEqual(
      range.body.data.messages_history.map((x: any) => x.uid),
      expected.filter((x) => x.created_at >= D1 + DAY && x.created_at < D1 + 4 * DAY).map((x) => x.uid),
    );
    const onlyFrom = await history({ from: '2026-04-05' });
    assert.equal(onlyFrom.body.data.messages_history.length, 4);
    const onlyTo = await history({ to: '2026-04-01' });
    assert.equal(onlyTo.body.data.messages_history.length, 4);
    assert.ok(onlyTo.body.data.messages_history.every((x: any) => x.created_at.startsWith('2026-04-01')));
    const none = await history({ from: '2026-05-01', to: '2026-05-31' });
    assert.deepEqual(none.body.data.messages_history, []);
    // nulls and empty strings count as absent
    assert.equal((await history({ from: null, to: '' })).body.data.messages_history.length, expected.length);
  });

  it('reads from/to at the top level of the body when arguments lacks them (the .NET client sends them there)', async () => {
    for (const method of ['messages_history', 'messages_history_detailed']) {
      const r = await t.call(method, { api_key: seed.projectKey, from: '2026-04-02', to: '2026-04-02' });
      assert.equal(r.status, 200);
      assert.equal(r.body.data.messages_history.length, 4, method);
      assert.deepEqual(r.body.data.date_range, ['2026-04-02', '2026-04-02']);
      // arguments wins over the top level
      const both = await t.call(method, { api_key: seed.projectKey, from: '2026-04-01', arguments: { from: '2026-04-05' } });
      assert.equal(both.body.data.messages_history.length, 4);
      const bad = await t.call(method, { api_key: seed.projectKey, to: 'someday' });
      assert.equal(bad.status, 406);
      assert.match(bad.body.response.message, /"to"/);
    }
  });

  it('pages with page/per_page: disjoint, complete, in order, has_more until the last page', async () => {
    const seen: string[] = [];
    for (let page = 1; page <= 4; page++) {
      const r = await history({ page, per_page: 6 });
      assert.equal(r.status, 200);
      const rows = r.body.data.messages_history;
      assert.equal(rows.length, page < 4 ? 6 : 2, `page ${page}`);
      assert.equal(r.body.data.has_more, page < 4);
      assert.equal(r.body.data.page, page);
      assert.equal(r.body.data.per_page, 6);
      seen.push(...rows.map((x: any) => `${x.uid}/${x.recipient}`));
    }
    assert.deepEqual(seen, expected.map((x) => `${x.uid}/${x.recipient}`));
    const far = await history({ page: 1_000_000_000, per_page: 50 });
    assert.equal(far.status, 200);
    assert.deepEqual(far.body.data.messages_history, []);
    assert.match((await history({ page: 1_000_000_001 })).body.response.message, /"page".*between 1 and 1000000000/);
    const beyond = await history({ page: 99, per_page: 6 });
    assert.deepEqual(beyond.body.data.messages_history, []);
    assert.equal(beyond.body.data.has_more, false);
    // numbers spelled as strings (the Ruby gem's CLI) are accepted
    const strings = await history({ page: '2', per_page: '6' });
    assert.equal(strings.body.data.messages_history[0].uid, expected[6].uid);
    // paging within a date range
    const p2 = await history({ from: '2026-04-02', to: '2026-04-04', page: 2, per_page: 5 });
    assert.deepEqual(
      p2.body.data.messages_history.map((x: any) => x.recipient),
      expected.filter((x) => x.created_at >= D1 + DAY && x.created_at < D1 + 4 * DAY).slice(5, 10).map((x) => x.recipient),
    );
  });

  it('messages_history_detailed adds results, attempts and event times', async () => {
    for (const version of ['1.0', '1.1'] as const) {
      const r = await history({ from: '2026-04-03', to: '2026-04-03' }, { version, method: 'messages_history_detailed' });
      assert.equal(r.status, 200);
      const rows = r.body.data.messages_history;
      assert.equal(rows.length, 4);
      const failed = rows.find((x: any) => x.recipient === 'd3-1-b@example.com');
      assert.deepEqual(failed, {
        unique_id: 'd3-1@posthorn.test',
        message_id: failed.message_id,
        uid: 'd3-1',
        recipient: 'd3-1-b@example.com',
        status: 'failed',
        created_at: '2026-04-03 12:00:00',
        result_code: 'SMTP_550',
        result_message: '550 no',
        completed_at: null,
        failed_at: '2026-04-03 12:00:01',
        opened_at: null,
        clicked_at: null,
        attempts: 1,
      });
      assert.equal(typeof failed.message_id, 'number');
      const ok = rows.find((x: any) => x.recipient === 'd3-1-a@example.com');
      assert.equal(ok.completed_at, '2026-04-03 12:00:02');
      assert.equal(ok.message_id, failed.message_id);
    }
  });

  it('refuses bad dates, a from after to, and per_page/page out of range with 406 call_error naming the field', async () => {
    for (const method of ['messages_history', 'messages_history_detailed']) {
      const cases: Array<[Record<string, unknown>, RegExp]> = [
        [{ from: '2026-13-01' }, /"from".*YYYY-MM-DD/],
        [{ to: '2026-02-30' }, /"to".*YYYY-MM-DD/],
        [{ from: 'yesterday' }, /"from"/],
        [{ to: '2026/04/01' }, /"to"/],
        [{ from: { day: 1 } }, /"from"/],
        [{ from: '2026-04-03', to: '2026-04-02' }, /"from".*after.*"to"/],
        [{ per_page: 0 }, /"per_page".*between 1 and 50/],
        [{ per_page: 51 }, /"per_page".*between 1 and 50/],
        [{ per_page: -1 }, /"per_page"/],
        [{ per_page: 'many' }, /"per_page"/],
        [{ per_page: 2.5 }, /"per_page"/],
        [{ page: 0 }, /"page".*between 1/],
        [{ page: 'x' }, /"page"/],
      ];
      for (const [args, message] of cases) {
        const r = await history(args, { method });
        assert.equal(r.status, 406, `${method} ${JSON.stringify(args)}`);
        assert.equal(r.body.response.status, 'call_error');
        assert.match(r.body.response.message, message);
        assert.equal(r.body.data, undefined);
      }
      assert.equal((await history({ per_page: 50 }, { method })).status, 200);
      assert.equal((await history({ per_page: 1 }, { method })).body.data.messages_history.length, 1);
      const account = await t.call(method, { api_key: seed.accountKey });
      assert.equal(account.status, 401);
      assert.match(account.body.response.message, /project/);
    }
  });

  it('get_messages: keyed by uid, newest first, with tallies as numbers and ISO-8601 times', async () => {
    for (const version of ['1.0', '1.1'] as const) {
      const r = await t.call('get_messages', { api_key: seed.projectKey }, { version });
      assert.equal(r.status, 200);
      const data = r.body.data;
      assert.equal(Object.keys(data).length, 15);
      assert.deepEqual(data['d2-1'], {
        project_id: seed.projectId,
        template: null,
        transmissions_total: 2,
        transmissions_failed: 1,
        transmissions_completed: 1,
        created_at: '2026-04-02T12:00:00Z',
        will_purge_at: '2026-07-01T12:00:00Z',
        send_at: null,
      });
      assert.equal(data['d1-0'].template, 'sample_child_template');
      assert.equal(data['d1-0'].transmissions_total, 1);
      assert.equal(data.foreign, undefined);
    }
  });

  it('get_messages pages newest first, answers {} past the end, and checks per_page', async () => {
    const p1 = await t.call('get_messages', { api_key: seed.projectKey, arguments: { per_page: 4 } });
    assert.deepEqual(Object.keys(p1.body.data).sort(), ['d4-2', 'd5-0', 'd5-1', 'd5-2']);
    const p2 = await t.call('get_messages', { api_key: seed.projectKey, arguments: { per_page: 4, page: 2 } });
    assert.deepEqual(Object.keys(p2.body.data).sort(), ['d3-2', 'd4-0', 'd4-1', 'd3-1'].sort());
    const empty = await t.call('get_messages', { api_key: seed.projectKey, arguments: { page: 5, per_page: 4 } });
    assert.equal(empty.status, 200);
    assert.deepEqual(empty.body.data, {});
    for (const per_page of [0, 51]) {
      const r = await t.call('get_messages', { api_key: seed.projectKey, arguments: { per_page } });
      assert.equal(r.status, 406);
      assert.match(r.body.response.message, /"per_page".*between 1 and 50/);
    }
    assert.equal((await t.call('get_messages', { api_key: seed.accountKey })).status, 401);
  });

  it('get_messages answers data: {} for a project without messages', async () => {
    const fresh = await t.seed('empty');
    const r = await t.call('get_messages', { api_key: fresh.projectKey });
    assert.equal(r.status, 200);
    assert.deepEqual(r.body.data, {});
    const h = await t.call('messages_history', { api_key: fresh.projectKey });
    assert.deepEqual(h.body.data.messages_history, []);
  });
});

// messages_history pages by a dense per-project number (migration 140, docs/decisions/0003-performance.md):
// rows written since the last request are numbered by the next one, 1, 2, 3... in write order per
// project, and the page query is a descending range of transmissions_project_history_seq on both
// databases, never a sort or a scan of the pages before it.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { CompiledQuery, sql } from 'kysely';
import { ManualClock } from '../../src/domain/clock.ts';
import { selectHistoryPageIds } from '../../src/storage/reports.ts';
import { startTestApp, type Seed, type TestApp } from '../helpers/app.ts';
import { insertMessage } from '../helpers/fixtures.ts';

const T0 = Date.UTC(2026, 3, 1);

describe('messages_history paging by history_seq', () => {
  let t: TestApp;
  let seed: Seed;
  let other: Seed;
  before(async () => {
    t = await startTestApp({ clock: new ManualClock(T0 + 86_400_000), config: { maxPerPage: 50 }, background: false });
    seed = await t.seed('seq');
    other = await t.seed('seq-other');
  });
  after(() => t.close());

  const history = async (args: Record<string, unknown>, key = seed.projectKey) => {
    const r = await t.call('messages_history', { api_key: key, arguments: args });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    return r.body.data as { messages_history: Array<{ uid: string; recipient: string }>; has_more: boolean };
  };
  const numbers = async (projectId: number) =>
    (
      await t.app.services.store.db
        .selectFrom('transmissions')
        .select(['id', 'history_seq'])
        .where('project_id', '=', projectId)
        .orderBy('id')
        .execute()
    ).map((r) => (r.history_seq === null ? null : Number(r.history_seq)));

  it('numbers new rows densely per project at the next request, and pages newest first across batches', async () => {
    const write = async (projectId: number, uid: string, n: number, at: number) =>
      insertMessage(t.app.services, { projectId, uid, created_at: at, recipients: Array.from({ length: n }, (_, i) => `${uid}-${i}@example.com`) });
    for (let i = 0; i < 7; i++) await write(seed.projectId, `a${i}`, 3, T0 + i * 1000);
    await write(other.projectId, 'o0', 2, T0);
    assert.deepEqual(await numbers(seed.projectId), Array(21).fill(null), 'ingest leaves rows unnumbered');

    const first = await history({ per_page: 50 });
    assert.equal(first.messages_history.length, 21);
    assert.deepEqual(await numbers(seed.projectId), Array.from({ length: 21 }, (_, i) => i + 1));
    assert.deepEqual(await numbers(other.projectId), [null, null], "another project's rows wait for its own request");

    for (let i = 7; i < 12; i++) await write(seed.projectId, `a${i}`, 3, T0 + i * 1000);
    await write(other.projectId, 'o1', 1, T0 + 1);
    await history({}, other.projectKey);
    assert.deepEqual(await numbers(other.projectId), [1, 2, 3]);

    // Page 3 of 4 (per_page 10 over 36 rows) is read by its numbers: rows 16..7 newest first.
    const all = (await history({ per_page: 50 })).messages_history.map((r) => r.recipient);
    assert.equal(all.length, 36);
    assert.deepEqual(all.slice(0, 3), ['a11-2@example.com', 'a11-1@example.com', 'a11-0@example.com']);
    assert.deepEqual(await numbers(seed.projectId), Array.from({ length: 36 }, (_, i) => i + 1));
    const pages = [];
    for (let page = 1; page <= 4; page++) {
      const p = await history({ page, per_page: 10 });
      assert.equal(p.has_more, page < 4, `has_more of page ${page}`);
      pages.push(...p.messages_history.map((r) => r.recipient));
    }
    assert.deepEqual(pages, all);
    assert.deepEqual((await history({ page: 5, per_page: 10 })).messages_history, []);
  });

  it('the page query is a descending range of transmissions_project_history_seq, with and without dates', async () => {
    const store = t.app.services.store;
    for (const dates of [{ fromMs: null, untilMs: null }, { fromMs: T0, untilMs: T0 + 86_400_000 }]) {
      const compiled = selectHistoryPageIds(store.db, { projectId: seed.projectId, ...dates, offset: 0, limit: 11 }, 30, 1).compile();
      const plan = await store.db.transaction().execute(async (trx) => {
        if (store.dialect.name === 'postgres') {
          // A table this small would be scanned and sorted; what matters is that the index can
          // serve the query in order (its partial predicate is implied, no sort is needed).
          await sql`SET LOCAL enable_seqscan = off`.execute(trx);
          await sql`SET LOCAL enable_bitmapscan = off`.execute(trx);
          await sql`SET LOCAL enable_sort = off`.execute(trx);
          const r = await trx.executeQuery(CompiledQuery.raw(`EXPLAIN ${compiled.sql}`, [...compiled.parameters]));
          return r.rows.map((row: any) => row['QUERY PLAN']).join('\n');
        }
        const r = await trx.executeQuery(CompiledQuery.raw(`EXPLAIN QUERY PLAN ${compiled.sql}`, [...compiled.parameters]));
        return r.rows.map((row: any) => row.detail).join('\n');
      });
      assert.match(plan, /transmissions_project_history_seq/, plan);
      assert.doesNotMatch(plan, /TEMP B-TREE|Sort/, plan);
    }
  });
});

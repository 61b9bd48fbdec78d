// finishTransmissions for a batch (storage/delivery-queue.ts), on the run's database: one
// UPDATE ... FROM the batch's values (PostgreSQL: unnest of arrays, SQLite: json_each) and the
// attempts' INSERT for the whole batch; each row changes only under its own lease, in input order,
// with the columns a single finish writes. Also: the events a store.write unit records are all inserted
// when it ends (storage/events.ts), in the order recorded.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { claimDueTransmissions, finishTransmissions, listAttempts, type FinishInput } from '../../src/storage/delivery-queue.ts';
import { recordEvent } from '../../src/storage/events.ts';
import { openTestStore, testDatabase, type TestStore } from '../helpers/databases.ts';

const T0 = 1_800_000_000_000;

describe(`finishing a batch of transmissions (${testDatabase()})`, () => {
  let t: TestStore;
  let accountId: number;
  let projectId: number;
  let messageId: number;
  before(async () => {
    t = await openTestStore();
    ({ accountId, projectId, messageId } = await t.store.write(async (trx) => {
      const account = await trx.insertInto('accounts').values({ uid: 'a', name: 'a', status: 'active', settings: '{}', created_at: T0, updated_at: T0 }).returning('id').executeTakeFirstOrThrow();
      const project = await trx.insertInto('projects').values({ account_id: account.id, uid: 'p', name: 'p', status: 'active', settings: '{}', created_at: T0, updated_at: T0 }).returning('id').executeTakeFirstOrThrow();
      const message = await trx.insertInto('messages').values({ project_id: project.id, uid: 'm', unique_id: 'm@posthorn.test', recipient_count: 4, deliver: 1, created_at: T0, payload: '{}' }).returning('id').executeTakeFirstOrThrow();
      await trx
        .insertInto('transmissions')
        .values(['a', 'b', 'c', 'd'].map((r) => ({ message_id: message.id, project_id: project.id, recipient: `${r}@example.test`, status: 'queued', attempts: 0, next_attempt_at: T0, created_at: T0, updated_at: T0 })))
        .execute();
      return { accountId: account.id, projectId: project.id, messageId: message.id };
    }));
  });
  after(() => t.close());

  it('writes each held row its new state and attempt, and nothing for a row whose lease was lost', async () => {
    const claimed = await t.store.write((trx) => claimDueTransmissions(trx, { worker: 'w1', now: T0, leaseMs: 60_000, limit: 10 }));
    assert.equal(claimed.length, 4);
    const [a, b, c, d] = claimed.map((row) => row.id);
    // d's lease was lost: another worker holds it now.
    await t.store.db.updateTable('transmissions').set({ locked_by: 'w2' }).where('id', '=', d).execute();
    const now = T0 + 1000;
    const input = (id: number, state: FinishInput['state'], code: string, tls: boolean | null): FinishInput => ({
      id, worker: 'w1', now, state, resultCode: code, resultMessage: `${code} text`,
      attempt: { startedAt: now - 50, durationMs: 50, mxHost: 'mx.example.test', outcome: state.status === 'completed' ? 'sent' : state.status === 'retry' ? 'deferred' : 'failed', tls },
    });
    const results = await t.store.write((trx) =>
      finishTransmissions(trx, [
        input(c, { status: 'retry', nextAttemptAt: now + 60_000 }, 'SMTP_451', null),
        input(d, { status: 'completed', at: now }, 'SMTP_250', true),
        input(a, { status: 'completed', at: now }, 'SMTP_250', true),
        input(b, { status: 'failed', at: now }, 'SMTP_550', false),
      ]),
    );
    assert.deepEqual(results, [1, null, 1, 1]);
    const rows = new Map((await t.store.db.selectFrom('transmissions').selectAll().execute()).map((r) => [r.id, r]));
    const pick = (id: number) => {
      const r = rows.get(id)!;
      return [r.status, r.attempts, r.locked_by, r.locked_until, r.result_code, r.completed_at, r.failed_at, Number(r.next_attempt_at), r.updated_at];
    };
    assert.deepEqual(pick(a), ['completed', 1, null, null, 'SMTP_250', now, null, T0 + 60_000, now]);
    assert.deepEqual(pick(b), ['failed', 1, null, null, 'SMTP_550', null, now, T0 + 60_000, now]);
    assert.deepEqual(pick(c), ['retry', 1, null, null, 'SMTP_451', null, null, now + 60_000, now]);
    assert.deepEqual(pick(d), ['queued', 0, 'w2', T0 + 60_000, null, null, null, T0 + 60_000, T0], 'the lost row is untouched');
    const attempts = await Promise.all([a, b, c, d].map((id) => listAttempts(t.store.db, id)));
    assert.deepEqual(
      attempts.map((list) => list.map((x) => [x.outcome, x.result_code, x.worker, x.tls, x.duration_ms, x.mx_host])),
      [[['sent', 'SMTP_250', 'w1', 1, 50, 'mx.example.test']], [['failed', 'SMTP_550', 'w1', 0, 50, 'mx.example.test']], [['deferred', 'SMTP_451', 'w1', null, 50, 'mx.example.test']], []],
    );
  });

  it('the events of one write unit are all stored when it commits, in the order recorded, and none when it fails', async () => {
    const payload = (n: number) => ({ message_id: messageId, n });
    await t.store.write(async (trx) => {
      for (let n = 1; n <= 3; n++) await recordEvent(trx, { accountId, projectId, type: 'delivered', payload: payload(n), now: T0 + n });
      await recordEvent(trx, { accountId, projectId: null, type: 'failed', payload: { n: 4 }, now: T0 + 4 });
    });
    await assert.rejects(
      t.store.write(async (trx) => {
        await recordEvent(trx, { accountId, projectId, type: 'delivered', payload: payload(5), now: T0 + 5 });
        throw new Error('the unit fails');
      }),
      /the unit fails/,
    );
    const events = await t.store.db.selectFrom('events').selectAll().orderBy('id').execute();
    assert.deepEqual(
      events.map((e) => [e.type, JSON.parse(e.payload).n, e.project_id === null ? null : Number(e.project_id), e.message_id === null ? null : Number(e.message_id), Number(e.created_at)]),
      [
        ['delivered', 1, projectId, messageId, T0 + 1],
        ['delivered', 2, projectId, messageId, T0 + 2],
        ['delivered', 3, projectId, messageId, T0 + 3],
        ['failed', 4, null, null, T0 + 4],
      ],
    );
  });

  it('looks rows up by key however small the table was when the batch statement first ran (PostgreSQL)', async (ctx) => {
    if (testDatabase() !== 'postgres') return ctx.skip('a PostgreSQL planner question');
    // One connection, so every batch below runs on it: a server-prepared statement would switch to
    // its generic plan after five executions, made for this small table, and keep it.
    const one = await t.openAnother({ poolSize: 1 });
    const now = T0 + 5000;
    const batch = (ids: number[]): FinishInput[] =>
      ids.map((id) => ({ id, worker: 'nobody', now, state: { status: 'completed', at: now }, resultCode: 'SMTP_250', resultMessage: 'ok', attempt: { startedAt: now, durationMs: 1, mxHost: null, outcome: 'sent' } }));
    const ids = (await one.db.selectFrom('transmissions').select('id').execute()).map((r) => Number(r.id));
    for (let i = 0; i < 8; i++) await one.write((trx) => finishTransmissions(trx, batch(ids)));
    // The table grows (no ANALYZE runs in between)...
    await one.write(async (trx) => {
      await sql`INSERT INTO transmissions (message_id, project_id, recipient, status, attempts, next_attempt_at, created_at, updated_at)
        SELECT ${messageId}, ${projectId}, 'g' || g || '@example.test', 'completed', 1, ${T0}, ${T0}, ${T0} FROM generate_series(1, 20000) AS g`.execute(trx);
    });
    // ...and the next batch still reads only its rows: no sequential scan of transmissions.
    // (The backend's counts not yet reported include earlier transactions': the difference is this batch's.)
    const scans = await one.write(async (trx) => {
      const count = async () =>
        Number((await sql<{ seq_scan: string }>`SELECT seq_scan FROM pg_stat_xact_user_tables WHERE relname = 'transmissions'`.execute(trx)).rows[0]?.seq_scan ?? 0);
      const before = await count();
      await finishTransmissions(trx, batch(ids));
      return (await count()) - before;
    });
    assert.equal(scans, 0, 'sequential scans of transmissions by the batch finish');
  });
});

// Claim semantics under concurrency, on the run's database: many claimers racing over one queue
// (on PostgreSQL from several stores = several processes' pools, FOR UPDATE SKIP LOCKED; on SQLite
// from one store, whose single writer serialises them) claim every due row exactly once; a lease
// that expires hands the row to another worker and the first worker's finish writes nothing.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { claimDueTransmissions, finishTransmission } from '../../src/storage/delivery-queue.ts';
import type { Store } from '../../src/storage/store.ts';
import { claimUndispatchedEvents } from '../../src/storage/webhooks.ts';
import { openTestStore, seedProject, testDatabase, type TestStore } from '../helpers/databases.ts';

const T0 = 1_800_000_000_000;

async function enqueueTransmissions(store: Store, seed: { projectId: number; messageId: number }, count: number): Promise<void> {
  await store.write(async (trx) => {
    for (let i = 0; i < count; i += 200) {
      const rows = Array.from({ length: Math.min(200, count - i) }, (_, j) => ({
        message_id: seed.messageId,
        project_id: seed.projectId,
        recipient: `r${i + j}@example.test`,
        status: 'queued',
        attempts: 0,
        next_attempt_at: T0,
        created_at: T0,
        updated_at: T0,
      }));
      await trx.insertInto('transmissions').values(rows).execute();
    }
  });
}

/**
 * Runs `claimers` loops (spread over `stores`) that each claim batches until a claim comes back
 * empty; returns every id claimed, in claim order, with its claimer.
 */
async function raceClaims(stores: Store[], claimers: number, claim: (store: Store, worker: string) => Promise<number[]>): Promise<Map<number, string[]>> {
  const claimedBy = new Map<number, string[]>();
  await Promise.all(
    Array.from({ length: claimers }, async (_, i) => {
      const store = stores[i % stores.length];
      const worker = `w${i}`;
      for (let rounds = 0; rounds < 10_000; rounds++) {
        const ids = await claim(store, worker);
        if (ids.length === 0) return;
        for (const id of ids) claimedBy.set(id, [...(claimedBy.get(id) ?? []), worker]);
      }
      throw new Error('claim loop did not drain the queue');
    }),
  );
  return claimedBy;
}

describe(`claims under concurrency on ${testDatabase()}`, () => {
  let t: TestStore;
  let stores: Store[];
  before(async () => {
    t = await openTestStore({ poolSize: 4 });
    stores = [t.store];
    // PostgreSQL: four stores, as four processes would hold them. SQLite: one process owns the file.
    if (t.store.dialect.name === 'postgres') for (let i = 0; i < 3; i++) stores.push(await t.openAnother({ poolSize: 4 }));
  });
  after(() => t.close());

  it('every due transmission is claimed exactly once by racing claimers', async () => {
    const seed = await seedProject(t.store);
    const count = 2000;
    await enqueueTransmissions(t.store, seed, count);
    const claimedBy = await raceClaims(stores, 12, async (store, worker) => {
      const rows = await store.write((trx) =>
        claimDueTransmissions(trx, { worker, now: T0, leaseMs: 60_000, limit: 25 }),
      );
      assert.ok(rows.length <= 25, `a claim returned ${rows.length} rows, more than its limit`);
      return rows.map((r) => r.id);
    });
    const twice = [...claimedBy].filter(([, workers]) => workers.length > 1);
    assert.deepEqual(twice, [], 'rows claimed by more than one claimer');
    assert.equal(claimedBy.size, count);
    const holders = await t.store.db.selectFrom('transmissions').select(['id', 'locked_by']).where('message_id', '=', seed.messageId).execute();
    for (const row of holders) assert.equal(row.locked_by, claimedBy.get(row.id)?.[0], `row ${row.id}'s lease holder`);
    assert.ok(new Set([...claimedBy.values()].map((w) => w[0])).size > 1, 'the work was spread over several claimers');
  });

  it('an expired lease passes the row to another worker; the first worker then finishes nothing', async () => {
    const seed = await seedProject(t.store);
    await enqueueTransmissions(t.store, seed, 3);
    const other = stores[stores.length - 1];
    const claim = (store: Store, worker: string, now: number) =>
      store.write((trx) => claimDueTransmissions(trx, { worker, now, leaseMs: 1000, limit: 10 }));
    const first = await claim(t.store, 'dead-worker', T0 + 10_000);
    assert.equal(first.length, 3);
    assert.deepEqual(await claim(other, 'heir', T0 + 10_500), [], 'nothing is claimable while the lease holds');
    const taken = await claim(other, 'heir', T0 + 11_001);
    assert.deepEqual(taken.map((r) => r.id), first.map((r) => r.id));
    const finish = (store: Store, worker: string, id: number) =>
      store.write((trx) =>
        finishTransmission(trx, {
          id,
          worker,
          now: T0 + 11_500,
          state: { status: 'completed', at: T0 + 11_500 },
          resultCode: 'SMTP_250',
          resultMessage: '250 ok',
          attempt: { startedAt: T0 + 11_100, durationMs: 5, mxHost: '127.0.0.1', outcome: 'sent' },
        }),
      );
    assert.equal(await finish(t.store, 'dead-worker', first[0].id), null, 'the lease was lost: nothing written');
    assert.equal(await finish(other, 'heir', first[0].id), 1);
    const attempts = await t.store.db.selectFrom('attempts').select('worker').where('transmission_id', '=', first[0].id).execute();
    assert.deepEqual(attempts, [{ worker: 'heir' }]);
  });

  it('every undispatched event is fanned out exactly once by racing dispatchers', async () => {
    const seed = await seedProject(t.store);
    const count = 600;
    await t.store.write(async (trx) => {
      for (let i = 0; i < count; i += 200) {
        const rows = Array.from({ length: Math.min(200, count - i) }, () => ({ account_id: seed.accountId, project_id: seed.projectId, type: 'delivered', payload: '{}', created_at: T0 }));
        await trx.insertInto('events').values(rows).execute();
      }
    });
    const claimedBy = await raceClaims(stores, 8, async (store) => {
      const rows = await store.write((trx) => claimUndispatchedEvents(trx, { now: T0, limit: 20 }));
      return rows.map((r) => r.id);
    });
    assert.deepEqual([...claimedBy].filter(([, w]) => w.length > 1), []);
    assert.equal(claimedBy.size, count);
  });
});

// A claim touches about as much of the database for a queue of 20,000 as for one of 500, on a
// database that was never analyzed (a new one, or autovacuum off). On PostgreSQL the claims run in
// migration 320's functions, planned to walk the partial due index in order and update the rows
// taken by key; the plain statement there was planned from default selectivities: it read every
// due row with a bitmap scan and sorted them (docs/decisions/0003-performance.md, "A claim's plan
// must not depend on statistics"). SQLite, which plans without statistics, walks the due index with
// no sort.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { CompiledQuery } from 'kysely';
import { claimDueTransmissions, claimQuery } from '../../src/storage/delivery-queue.ts';
import { claimDueOutbound, outboundClaimQuery } from '../../src/storage/outbound.ts';
import type { Store } from '../../src/storage/store.ts';
import { openTestStore, seedProject, testDatabase, type TestStore } from '../helpers/databases.ts';

const T0 = 1_800_000_000_000;
const TAKEN = 20;
const SHORT = 500;
const LONG = 20_000;

interface PlanNode {
  'Shared Hit Blocks'?: number;
  'Shared Read Blocks'?: number;
}

describe('a claim reads about the rows it takes, however long the queue', () => {
  let t: TestStore;
  let store: Store;
  let accountId: number;
  let projectId: number;
  let messageId: number;
  before(async () => {
    t = await openTestStore();
    store = t.store;
    ({ accountId, projectId, messageId } = await seedProject(store));
  });
  after(() => t.close());

  /** `count` more due rows, each due a millisecond after the one before. */
  async function enqueue(table: 'transmissions' | 'outbound_requests', from: number, count: number): Promise<void> {
    await store.write(async (trx) => {
      for (let i = from; i < from + count; i += 200) {
        const n = Math.min(200, from + count - i);
        if (table === 'transmissions') {
          const rows = Array.from({ length: n }, (_, j) => ({
            message_id: messageId, project_id: projectId, recipient: `r${i + j}@example.test`, status: 'queued',
            attempts: 0, next_attempt_at: T0 + i + j, created_at: T0, updated_at: T0,
          }));
          await trx.insertInto('transmissions').values(rows).execute();
        } else {
          const rows = Array.from({ length: n }, (_, j) => ({
            account_id: accountId, kind: 'webhook', url: 'http://127.0.0.1:9/', headers: '{}', state: 'pending', attempts: 0,
            next_attempt_at: T0 + i + j, created_at: T0, updated_at: T0, body: '{}',
          }));
          await trx.insertInto('outbound_requests').values(rows).execute();
        }
      }
    });
  }

  /**
   * PostgreSQL: the shared buffers the whole claim touches, run and rolled back (the rows stay due).
   * SQLite: 0, once its query plan is seen to walk the due index with no sort.
   */
  async function claimCost(compiled: CompiledQuery<unknown>, index: string): Promise<number> {
    if (testDatabase() === 'sqlite') {
      const { rows } = await store.db.executeQuery<{ detail: string }>(CompiledQuery.raw(`EXPLAIN QUERY PLAN ${compiled.sql}`, [...compiled.parameters]));
      const plan = rows.map((r) => r.detail).join('\n');
      assert.match(plan, new RegExp(index), plan);
      assert.doesNotMatch(plan, /TEMP B-TREE/, plan);
      return 0;
    }
    try {
      await store.db.transaction().execute(async (trx) => {
        const { rows } = await trx.executeQuery<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>(
          CompiledQuery.raw(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${compiled.sql}`, [...compiled.parameters]),
        );
        const plan = rows[0]['QUERY PLAN'][0].Plan;
        throw new RolledBack((plan['Shared Hit Blocks'] ?? 0) + (plan['Shared Read Blocks'] ?? 0));
      });
    } catch (error) {
      if (error instanceof RolledBack) return error.cost;
      throw error;
    }
    throw new Error('unreachable');
  }

  it('transmissions: the same rows read for a queue 40 times longer', async () => {
    const claim = () => claimQuery(store.db, { worker: 'w', now: T0 + 10 * LONG, leaseMs: 60_000, limit: TAKEN });
    await enqueue('transmissions', 0, SHORT);
    const short = await claimCost(claim(), 'transmissions_due');
    await enqueue('transmissions', SHORT, LONG - SHORT);
    const long = await claimCost(claim(), 'transmissions_due');
    assert.ok(long <= short * 1.5, `buffers to claim ${TAKEN}: ${short} of ${SHORT} waiting, ${long} of ${LONG}`);
    // And the claim takes what it should: the first TAKEN, in order.
    const taken = await store.writeStatement((db) => claimDueTransmissions(db, { worker: 'w', now: T0 + 10 * LONG, leaseMs: 60_000, limit: TAKEN }));
    assert.deepEqual(taken.map((r) => r.recipient), Array.from({ length: TAKEN }, (_, i) => `r${i}@example.test`));
  });

  it('outbound requests: the same rows read for a queue 40 times longer', async () => {
    const claim = () => outboundClaimQuery(store.db, { worker: 'w', now: T0 + 10 * LONG, leaseUntil: T0 + 20 * LONG, limit: TAKEN }).compile();
    await enqueue('outbound_requests', 0, SHORT);
    const short = await claimCost(claim(), 'outbound_requests_due');
    await enqueue('outbound_requests', SHORT, LONG - SHORT);
    const long = await claimCost(claim(), 'outbound_requests_due');
    assert.ok(long <= short * 1.5, `buffers to claim ${TAKEN}: ${short} of ${SHORT} waiting, ${long} of ${LONG}`);
    const taken = await store.writeStatement((db) => claimDueOutbound(db, { worker: 'w', now: T0 + 10 * LONG, leaseUntil: T0 + 20 * LONG, limit: TAKEN }));
    assert.deepEqual(taken.map((r) => r.next_attempt_at), Array(TAKEN).fill(T0 + 20 * LONG));
    assert.deepEqual(taken.map((r) => r.attempts), Array(TAKEN).fill(1));
  });
});

/** Ends the measuring transaction with a rollback, carrying what it measured. */
class RolledBack extends Error {
  constructor(readonly cost: number) {
    super('rolled back');
  }
}

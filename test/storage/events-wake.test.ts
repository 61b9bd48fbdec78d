// The webhook fan-out is woken by the store, once a write that recorded an event some endpoint can
// hear has committed, and only then (storage/events.ts, store.ts settleUnit; docs/webhooks.md): a
// delivery to an account without endpoints wakes no process. Checked on the run's database: the
// in-process wake (emitted before the write resolves, so a write that resolved without one sent none), and on PostgreSQL the NOTIFY other
// processes hear, by a LISTEN connection of the test's own (notifications arrive in commit order,
// so once a later write's has arrived, one an earlier write sent would have too).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { recordEvent } from '../../src/storage/events.ts';
import type { Store } from '../../src/storage/store.ts';
import { openTestStore, seedProject, testDatabase, type TestStore } from '../helpers/databases.ts';

const NOW = 1_800_000_000_000;

/** Records `count` events of `accountId`'s project in one unit of store.write. */
function recordEvents(store: Store, seed: { accountId: number; projectId: number; messageId: number }, count: number): Promise<void> {
  return store.write(async (trx) => {
    for (let i = 0; i < count; i++) {
      await recordEvent(trx, { accountId: seed.accountId, projectId: seed.projectId, type: 'delivered', payload: { message_id: seed.messageId, n: i }, now: NOW });
    }
  });
}

/** A LISTEN connection on the store's `events` channel (PostgreSQL). */
async function listenForEvents(url: string): Promise<{ count(): number; next(): Promise<void>; close(): Promise<void> }> {
  const pg = (await import('pg')).default;
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  let received = 0;
  const waiters: Array<() => void> = [];
  client.on('notification', () => {
    received++;
    waiters.splice(0).forEach((w) => w());
  });
  await client.query('LISTEN posthorn_events');
  return {
    count: () => received,
    next: () =>
      new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error('no NOTIFY on posthorn_events within 10 s')), 10_000);
        waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      }),
    close: () => client.end(),
  };
}

describe(`the fan-out is woken by the writes whose events an endpoint hears (${testDatabase()})`, () => {
  let t: TestStore;
  let quiet: { accountId: number; projectId: number; messageId: number };
  let heard: { accountId: number; projectId: number; messageId: number };
  before(async () => {
    t = await openTestStore();
    quiet = await seedProject(t.store);
    heard = await seedProject(t.store);
    await t.store.write((trx) =>
      trx
        .insertInto('webhooks')
        .values({ account_id: heard.accountId, project_id: null, uid: 'hook', url: 'http://127.0.0.1:9/hook', events: '["delivered"]', secret: 'x', status: 'active', created_at: NOW, updated_at: NOW })
        .execute(),
    );
  });
  after(() => t?.close());

  it('wakes no one for events without an endpoint, and once per write for events with one', async () => {
    const listener = testDatabase() === 'postgres' ? await listenForEvents(t.url) : null;
    try {
      let wakes = 0;
      const unsubscribe = await t.store.onWake('events', () => wakes++);
      try {
        // One event (a single-row INSERT) and several (PostgreSQL: the array INSERT) of an account
        // without an endpoint: recorded already dispatched, nobody woken.
        await recordEvents(t.store, quiet, 1);
        await recordEvents(t.store, quiet, 3);
        assert.equal(wakes, 0, 'a write whose events no endpoint hears woke the fan-out');
        // The same of an account with an endpoint: woken once the write has committed (on
        // PostgreSQL the store's own LISTEN hears its NOTIFY too: more wakes may follow).
        const first = listener?.next();
        await recordEvents(t.store, heard, 3);
        assert.ok(wakes >= 1, 'a write whose events wait for the fan-out did not wake it');
        await first;
        const before = wakes;
        const second = listener?.next();
        await recordEvents(t.store, heard, 1);
        assert.ok(wakes > before, 'a write of one event that waits for the fan-out did not wake it');
        await second;
        if (listener) assert.equal(listener.count(), 2, 'NOTIFY was sent for a write whose events no endpoint hears');
      } finally {
        await unsubscribe();
      }
    } finally {
      await listener?.close();
    }
    const waiting = await t.store.db.selectFrom('events').select(['project_id', 'dispatched_at']).orderBy('id').execute();
    assert.deepEqual(
      waiting.map((e) => [Number(e.project_id), e.dispatched_at === null ? null : Number(e.dispatched_at)]),
      [...Array(4).fill([quiet.projectId, 0]), ...Array(4).fill([heard.projectId, null])],
    );
  });
});

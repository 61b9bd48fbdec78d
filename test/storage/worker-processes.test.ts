// The registry of live worker processes (docs/decisions/0008-lease-runner.md), on the run's
// database: a process seen dead (its pid gone on this host, or silent past the limit on another)
// has everything it claimed released at once, due at the front of the queue; a live one keeps its
// claims, and silence right after our own outage proves nothing.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import { claimDueTransmissions } from '../../src/storage/delivery-queue.ts';
import { claimDueOutbound } from '../../src/storage/outbound.ts';
import { registerWorkerProcess } from '../../src/storage/worker-processes.ts';
import { hostIdentity, ProcessRegistry } from '../../src/workers/process-registry.ts';
import { startTestApp, type Seed, type TestApp } from '../helpers/app.ts';

/** The pid of a process that has exited. */
async function deadPid(): Promise<number> {
  const child = spawn(process.execPath, ['-e', '']);
  await new Promise((resolve) => child.once('exit', resolve));
  return child.pid!;
}

describe('registry of live worker processes', () => {
  let t: TestApp;
  let seed: Seed;
  before(async () => {
    t = await startTestApp({ background: false });
    seed = await t.seed();
  });
  after(async () => t?.close());

  /** A message with `count` queued transmissions and one pending outbound request, claimed by `worker`. */
  async function claimWork(worker: string, count: number): Promise<{ transmissions: number[]; outbound: number[] }> {
    const { store } = t.app.services;
    const now = Date.now();
    return store.write(async (trx) => {
      const message = await trx
        .insertInto('messages')
        .values({ project_id: seed.projectId, uid: `m-${worker}`, unique_id: `m-${worker}@posthorn.test`, recipient_count: count, deliver: 1, created_at: now - 1000, payload: '{}' })
        .returning('id')
        .executeTakeFirstOrThrow();
      for (let i = 0; i < count; i++) {
        await trx
          .insertInto('transmissions')
          .values({ message_id: message.id, project_id: seed.projectId, recipient: `r${i}@example.test`, status: 'queued', attempts: 0, next_attempt_at: now - 1000, created_at: now - 1000, updated_at: now - 1000 })
          .execute();
      }
      await trx
        .insertInto('outbound_requests')
        .values({ account_id: seed.accountId, project_id: seed.projectId, kind: 'webhook', url: 'http://127.0.0.1:9/x', headers: '{}', state: 'pending', attempts: 0, next_attempt_at: now - 1000, created_at: now - 1000, updated_at: now - 1000, body: '{}' })
        .execute();
      const claimed = await claimDueTransmissions(trx, { worker, now, leaseMs: 300_000, limit: count });
      const requests = await claimDueOutbound(trx, { worker, now, leaseUntil: now + 300_000, limit: 1 });
      return { transmissions: claimed.map((c) => c.id), outbound: requests.map((r) => r.id) };
    });
  }

  async function lockedBy(worker: string): Promise<number> {
    const db = t.app.services.store.db;
    const a = await db.selectFrom('transmissions').select('id').where('locked_by', '=', worker).execute();
    const b = await db.selectFrom('outbound_requests').select('id').where('locked_by', '=', worker).execute();
    return a.length + b.length;
  }

  it('releases at once the claims of a process on this host whose pid is gone, due before the backlog', async () => {
    const dead = `dead:${await deadPid()}`;
    const now = Date.now();
    await t.app.services.store.write((trx) => registerWorkerProcess(trx, { id: dead, host: hostIdentity(), pid: Number(dead.split(':')[1]), started_at: now, heartbeat_at: now }));
    const work = await claimWork(dead, 3);
    assert.equal(work.transmissions.length, 3);
    assert.equal(await lockedBy(dead), 4);
    const registry = new ProcessRegistry(t.app.services);
    await registry.start();
    try {
      assert.equal(await lockedBy(dead), 0, 'released by the registry at start');
      const rows = await t.app.services.store.db.selectFrom('transmissions').select(['next_attempt_at', 'created_at', 'attempts']).where('id', 'in', work.transmissions).execute();
      for (const r of rows) {
        assert.equal(Number(r.next_attempt_at), Number(r.created_at), 'due at its creation: the front of the queue');
        assert.equal(Number(r.attempts), 0, 'no attempt charged');
      }
      const left = await t.app.services.store.db.selectFrom('worker_processes').select('id').where('id', '=', dead).execute();
      assert.deepEqual(left, [], 'the dead process is forgotten');
    } finally {
      await registry.stop();
    }
  });

  it('keeps the claims of a live process; releases those of one silent past the limit, but only once it has been connected that long itself', async () => {
    const { store } = t.app.services;
    const now = Date.now();
    // Another host: only the heartbeat tells. One beat just now, one silent for a minute.
    await store.write(async (trx) => {
      await registerWorkerProcess(trx, { id: 'live', host: 'elsewhere', pid: 1, started_at: now, heartbeat_at: now });
      await registerWorkerProcess(trx, { id: 'silent', host: 'elsewhere', pid: 1, started_at: now - 120_000, heartbeat_at: now - 60_000 });
    });
    await claimWork('live', 1);
    await claimWork('silent', 1);
    // Connected for less than the limit (a start, or the end of an outage): silence proves nothing yet.
    const young = new ProcessRegistry(t.app.services, { deadAfterMs: 30_000 });
    await young.start();
    try {
      assert.equal(await lockedBy('silent'), 2);
    } finally {
      await young.stop();
    }
    const registry = new ProcessRegistry(t.app.services, { deadAfterMs: 1000 });
    await registry.start();
    try {
      // Until our own connected time passes the limit (bounded), while 'live' keeps beating.
      const deadline = Date.now() + 10_000;
      let reaped: string[] = [];
      while (reaped.length === 0 && Date.now() < deadline) {
        await store.write((trx) => trx.updateTable('worker_processes').set({ heartbeat_at: Date.now() }).where('id', '=', 'live').execute());
        reaped = await registry.reap();
      }
      assert.deepEqual(reaped, ['silent']);
      assert.equal(await lockedBy('silent'), 0, 'the silent process\'s claims are released');
      assert.equal(await lockedBy('live'), 2, 'the live process keeps its claims');
    } finally {
      await registry.stop();
    }
  });

  it('a heartbeat finding its row gone registers again', async () => {
    const registry = new ProcessRegistry(t.app.services);
    await registry.start();
    try {
      await t.app.services.store.write((trx) => trx.deleteFrom('worker_processes').where('id', '=', registry.id).execute());
      await registry.beat();
      const rows = await t.app.services.store.db.selectFrom('worker_processes').select('id').where('id', '=', registry.id).execute();
      assert.equal(rows.length, 1);
    } finally {
      await registry.stop();
    }
    const rows = await t.app.services.store.db.selectFrom('worker_processes').select('id').where('id', '=', registry.id).execute();
    assert.equal(rows.length, 0, 'a graceful stop unregisters');
  });
});

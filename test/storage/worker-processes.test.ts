// The registry of live worker processes (docs/decisions/0008-lease-runner.md, docs/reliability.md
// "When a process is dead"), on the run's database: a process seen dead (on this host its pid gone
// or reused, on another its heartbeat unchanged past the limit) has everything it claimed released
// at once, each row counting the death of its holder; a live one keeps its claims however old its
// heartbeat on this host, whatever its clock says on another; a heartbeat recorded after the
// judgement keeps them; and silence right after our own outage proves nothing.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import { claimDueTransmissions, claimSuspectTransmission } from '../../src/storage/delivery-queue.ts';
import { SUSPECT_DELAY_MS } from '../../src/domain/holder-deaths.ts';
import { registerWorkerProcess, releaseClaimsOf } from '../../src/storage/worker-processes.ts';
import { hostIdentity, processStart, ProcessRegistry } from '../../src/workers/process-registry.ts';
import { startTestApp, type Seed, type TestApp } from '../helpers/app.ts';
import { until } from '../helpers/wait.ts';

/** A process that runs until killed, with its start time as the kernel counts it. */
async function runningProcess(): Promise<{ child: ChildProcess; pid: number; start: number }> {
  const child = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });
  await new Promise((resolve) => child.once('spawn', resolve));
  const stat = processStart(child.pid!);
  assert.ok(stat, 'its /proc/<pid>/stat is readable');
  return { child, pid: child.pid!, start: stat.start };
}

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
    const now = t.app.services.clock.now();
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
      const request = await trx
        .insertInto('outbound_requests')
        .values({ account_id: seed.accountId, project_id: seed.projectId, kind: 'webhook', url: 'http://127.0.0.1:9/x', headers: '{}', state: 'pending', attempts: 0, next_attempt_at: now - 1000, created_at: now - 1000, updated_at: now - 1000, body: '{}' })
        .returning('id')
        .executeTakeFirstOrThrow();
      // Claimed as the claims do, but only these rows (earlier tests leave released rows due).
      const claimed = await trx
        .updateTable('transmissions')
        .set({ locked_by: worker, locked_until: now + 300_000, next_attempt_at: now + 300_000 })
        .where('message_id', '=', message.id)
        .returning('id')
        .execute();
      const requests = await trx
        .updateTable('outbound_requests')
        .set({ locked_by: worker, locked_until: now + 300_000 })
        .where('id', '=', request.id)
        .returning('id')
        .execute();
      return { transmissions: claimed.map((c) => c.id).sort((a, b) => a - b), outbound: requests.map((r) => r.id) };
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
      const rows = await t.app.services.store.db.selectFrom('transmissions').select(['next_attempt_at', 'created_at', 'attempts', 'holder_deaths']).where('id', 'in', work.transmissions).execute();
      for (const r of rows) {
        assert.equal(Number(r.next_attempt_at), Number(r.created_at), 'due at its creation: the front of the queue');
        assert.equal(Number(r.attempts), 0, 'no attempt charged');
        assert.equal(Number(r.holder_deaths), 1, 'the death of its holder counted');
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

  it('on this host, a process whose pid runs is alive however old its heartbeat; one whose pid now names another process is dead at once', async () => {
    const { store } = t.app.services;
    const stalled = await runningProcess();
    try {
      const now = Date.now();
      await store.write(async (trx) => {
        // A minute without a heartbeat: a stall of its event loop, SIGSTOP, a loaded machine.
        await registerWorkerProcess(trx, { id: 'stalled', host: hostIdentity(), pid: stalled.pid, pid_start: stalled.start, started_at: now - 120_000, heartbeat_at: now - 60_000 });
        // The same pid, but the process registered under it started at another time: gone, its pid reused.
        await registerWorkerProcess(trx, { id: 'reused', host: hostIdentity(), pid: stalled.pid, pid_start: stalled.start - 1, started_at: now - 120_000, heartbeat_at: now });
        // The yardstick: silent on another host, dead once this registry has watched it for the limit.
        await registerWorkerProcess(trx, { id: 'yardstick', host: 'elsewhere', pid: 1, started_at: now - 120_000, heartbeat_at: now - 60_000 });
      });
      await claimWork('stalled', 1);
      await claimWork('reused', 1);
      await claimWork('yardstick', 1);
      const registry = new ProcessRegistry(t.app.services, { deadAfterMs: 500 });
      await registry.start();
      try {
        assert.equal(await lockedBy('reused'), 0, 'a reused pid: released at start');
        await until('the yardstick to be judged dead', async () => (await registry.reap()).includes('yardstick') || (await lockedBy('yardstick')) === 0, 10_000, 50);
        // Judged at least once more after the yardstick: the stalled process is silent longer still.
        await registry.reap();
        assert.equal(await lockedBy('stalled'), 2, 'the stalled process keeps its claims');
        const rows = await store.db.selectFrom('worker_processes').select('id').where('id', 'in', ['stalled', 'reused', 'yardstick']).execute();
        assert.deepEqual(rows.map((r) => r.id), ['stalled']);
      } finally {
        await registry.stop();
      }
    } finally {
      stalled.child.kill('SIGKILL');
      await new Promise((resolve) => stalled.child.once('exit', resolve));
    }
    // Once it is gone, it is dead at the next look.
    const registry = new ProcessRegistry(t.app.services);
    await registry.start();
    try {
      assert.equal(await lockedBy('stalled'), 0, 'released once its pid is gone');
    } finally {
      await registry.stop();
    }
  });

  it('on another host, a process is dead only once its heartbeat has stayed the same past the limit, whatever its clock says', async () => {
    const { store } = t.app.services;
    const now = Date.now();
    // Its clock is a minute behind ours: every heartbeat it records looks a minute old here.
    await store.write(async (trx) => {
      await registerWorkerProcess(trx, { id: 'behind', host: 'elsewhere', pid: 1, started_at: now - 120_000, heartbeat_at: now - 60_000 });
      await registerWorkerProcess(trx, { id: 'quiet', host: 'elsewhere', pid: 2, started_at: now - 120_000, heartbeat_at: now - 60_000 });
    });
    await claimWork('behind', 1);
    await claimWork('quiet', 1);
    const registry = new ProcessRegistry(t.app.services, { deadAfterMs: 500 });
    await registry.start();
    try {
      let beat = now - 60_000;
      await until('the quiet process to be judged dead', async () => {
        beat += 100;
        await store.write((trx) => trx.updateTable('worker_processes').set({ heartbeat_at: beat }).where('id', '=', 'behind').execute());
        return (await registry.reap()).includes('quiet');
      }, 10_000, 50);
      assert.equal(await lockedBy('behind'), 2, 'a process that keeps beating keeps its claims');
      assert.equal(await lockedBy('quiet'), 0);
    } finally {
      await registry.stop();
    }
  });

  it('a release is guarded by the heartbeat it was judged on; each counts the death of the holder, the second one behind what is due', async () => {
    const { store, clock } = t.app.services;
    const now = Date.now();
    await store.write((trx) => registerWorkerProcess(trx, { id: 'slow', host: 'elsewhere', pid: 1, started_at: now - 120_000, heartbeat_at: now - 20_000 }));
    const work = await claimWork('slow', 1);
    // Judged on an older heartbeat: it has beaten since, so nothing is released.
    const late = await store.write((trx) => releaseClaimsOf(trx, [{ id: 'slow', heartbeat_at: now - 30_000 }], clock.now()));
    assert.deepEqual(late, { processes: [], transmissions: 0, outbound: 0, mailboxes: 0 });
    assert.equal(await lockedBy('slow'), 2);
    const released = await store.write((trx) => releaseClaimsOf(trx, [{ id: 'slow', heartbeat_at: now - 20_000 }], clock.now()));
    assert.deepEqual(released, { processes: ['slow'], transmissions: 1, outbound: 1, mailboxes: 0 });
    const row = () => store.db.selectFrom('transmissions').select(['next_attempt_at', 'created_at', 'holder_deaths', 'attempts']).where('id', '=', work.transmissions[0]).executeTakeFirstOrThrow();
    const first = await row();
    assert.deepEqual([first.holder_deaths, first.attempts], [1, 0], 'the death counted, no attempt charged');
    assert.equal(Number(first.next_attempt_at), Number(first.created_at), 'the first death: at the front');
    // Claimed again by a process that dies too.
    await store.write((trx) => registerWorkerProcess(trx, { id: 'slow-2', host: 'elsewhere', pid: 1, started_at: now, heartbeat_at: now }));
    await store.write((trx) => trx.updateTable('transmissions').set({ locked_by: 'slow-2', locked_until: clock.now() + 300_000 }).where('id', '=', work.transmissions[0]).execute());
    const at = clock.now();
    await store.write((trx) => releaseClaimsOf(trx, [{ id: 'slow-2', heartbeat_at: now }], at));
    const second = await row();
    assert.equal(second.holder_deaths, 2);
    assert.equal(Number(second.next_attempt_at), at + SUSPECT_DELAY_MS, 'the second: behind what is due, after a delay');
    const others = await store.write((trx) => claimDueTransmissions(trx, { worker: 'other', now: at + SUSPECT_DELAY_MS, leaseMs: 300_000, limit: 100 }));
    assert.ok(!others.some((c) => c.id === work.transmissions[0]), 'never claimed with others');
    assert.ok(others.every((c) => c.holder_deaths < 2));
    const alone = await store.write((trx) => claimSuspectTransmission(trx, { worker: 'other', now: at + SUSPECT_DELAY_MS, leaseMs: 300_000 }));
    assert.deepEqual(alone.map((c) => [c.id, c.holder_deaths]), [[work.transmissions[0], 2]], 'claimed alone');
  });
});

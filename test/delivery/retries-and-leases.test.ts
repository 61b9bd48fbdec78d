// The retry schedule and the lease, driven with a ManualClock and runOnce(): no sleeping.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ManualClock } from '../../src/domain/clock.ts';
import { decideRetry, parseRetrySchedule } from '../../src/domain/retry-policy.ts';
import { claimDueTransmissions, finishTransmission } from '../../src/storage/delivery-queue.ts';
import { StoreUnavailableError } from '../../src/storage/store.ts';
import { loseNextAnswer } from '../helpers/lost-answer.ts';
import { reply, startSmtpPeer, type SmtpPeer } from '../helpers/smtp-peers.ts';
import { simpleMessage, startDeliveryHarness, type DeliveryHarness } from './harness.ts';

const T0 = Date.UTC(2026, 4, 1, 8, 0, 0);
const MIN = 60_000;

describe('retry policy (pure)', () => {
  it('parses schedules and refuses nonsense', () => {
    assert.deepEqual(parseRetrySchedule('1m, 5m,1h,90s,250'), [60_000, 300_000, 3_600_000, 90_000, 250]);
    for (const bad of ['', '1m,,x', '5 minutes', '0', '-1m']) assert.equal(parseRetrySchedule(bad), null, bad);
  });

  it('waits the n-th delay after the n-th failure, repeats the last, and never passes the deadline', () => {
    const policy = { delaysMs: [MIN, 5 * MIN], maxRetryAgeMs: 12 * MIN };
    assert.deepEqual(decideRetry(policy, { createdAt: T0, now: T0, failedAttempts: 1 }), { kind: 'retry', nextAttemptAt: T0 + MIN });
    assert.deepEqual(decideRetry(policy, { createdAt: T0, now: T0 + MIN, failedAttempts: 2 }), { kind: 'retry', nextAttemptAt: T0 + 6 * MIN });
    assert.deepEqual(decideRetry(policy, { createdAt: T0, now: T0 + 6 * MIN, failedAttempts: 3 }), { kind: 'retry', nextAttemptAt: T0 + 11 * MIN });
    assert.deepEqual(decideRetry(policy, { createdAt: T0, now: T0 + 11 * MIN, failedAttempts: 4 }), { kind: 'retry', nextAttemptAt: T0 + 12 * MIN });
    const last = decideRetry(policy, { createdAt: T0, now: T0 + 12 * MIN, failedAttempts: 5 });
    assert.equal(last.kind, 'give_up');
    assert.match((last as { reason: string }).reason, /5 attempts over 12 min/);
  });
});

describe('retry schedule end to end (ManualClock)', () => {
  let h: DeliveryHarness;
  let peer: SmtpPeer;
  let answer = 451;
  const clock = new ManualClock(T0);
  before(async () => {
    peer = await startSmtpPeer({ rcpt: () => (answer === 250 ? null : reply(answer, `${answer === 451 ? '4.2.0' : '5.0.0'} not now`)) });
    h = await startDeliveryHarness({ clock, config: { transportMap: [peer.transportFor('*')], retrySchedule: '1m,5m', maxRetryAgeMs: 12 * MIN } });
  });
  after(async () => {
    await h?.close();
    await peer?.close();
  });

  it('retries on the schedule, then fails at the maximum age with the last reply', async () => {
    await h.send(simpleMessage('slow@example.test'));
    const seen: Array<[number, string, number]> = [];
    // Walk the clock through the schedule: each attempt happens exactly when it is due, not before.
    for (const at of [0, 1, 6, 11, 12]) {
      clock.set(T0 + at * MIN - 1);
      if (at > 0) assert.equal(await h.worker.runOnce(), 0, `nothing due just before minute ${at}`);
      clock.set(T0 + at * MIN);
      assert.equal(await h.worker.runOnce(), 1, `due at minute ${at}`);
      const t = await h.transmission('slow@example.test');
      seen.push([at, t.status, (t.next_attempt_at - T0) / MIN]);
    }
    assert.deepEqual(seen.slice(0, 4), [
      [0, 'retry', 1],
      [1, 'retry', 6],
      [6, 'retry', 11],
      [11, 'retry', 12],
    ]);
    const t = await h.transmission('slow@example.test');
    assert.equal(t.status, 'failed');
    assert.equal(t.result_code, 'SMTP_451');
    assert.match(t.result_message, /gave up after 5 attempts over 12 min; last: 4\.2\.0 not now/);
    assert.equal(t.failed_at, T0 + 12 * MIN);
    assert.equal(t.attempts, 5);
    const attempts = await h.attempts(t.id);
    assert.deepEqual(attempts.map((a) => (a.started_at - T0) / MIN), [0, 1, 6, 11, 12]);
    assert.ok(attempts.every((a) => a.outcome === 'deferred'));
    assert.deepEqual((await h.events()).filter((e) => e.payload.transmission_id === t.id).map((e) => e.type), ['retry', 'retry', 'retry', 'retry', 'failed']);
    clock.advance(60 * MIN);
    assert.equal(await h.worker.runOnce(), 0, 'a failed transmission is never claimed again');
  });

  it('a retry that meets a 250 completes', async () => {
    answer = 451;
    await h.send(simpleMessage('later@example.test'));
    assert.equal(await h.worker.runOnce(), 1);
    answer = 250;
    clock.advance(MIN);
    assert.equal(await h.worker.runOnce(), 1);
    const t = await h.transmission('later@example.test');
    assert.equal(t.status, 'completed');
    assert.equal(t.attempts, 2);
    assert.deepEqual((await h.attempts(t.id)).map((a) => a.outcome), ['deferred', 'sent']);
  });
});

describe('leases', () => {
  let h: DeliveryHarness;
  let peer: SmtpPeer;
  const clock = new ManualClock(T0);
  before(async () => {
    peer = await startSmtpPeer();
    h = await startDeliveryHarness({ clock, config: { transportMap: [peer.transportFor('*')], leaseMs: 5 * MIN } });
  });
  after(async () => {
    await h?.close();
    await peer?.close();
  });

  it('a row claimed by a worker that died is delivered once its lease expires, and the dead worker can no longer finish it', async () => {
    await h.send(simpleMessage('orphan@example.test'));
    const store = h.t.app.services.store;
    const dead = 'dead-worker';
    const claimed = await store.write((trx) => claimDueTransmissions(trx, { worker: dead, now: clock.now(), leaseMs: 5 * MIN, limit: 10 }));
    assert.equal(claimed.length, 1);

    assert.equal(await h.worker.runOnce(), 0, 'leased to another worker');
    clock.advance(5 * MIN - 1);
    assert.equal(await h.worker.runOnce(), 0, 'still leased');
    clock.advance(1);
    assert.equal(await h.worker.runOnce(), 1, 'lease expired: taken over');
    const t = await h.transmission('orphan@example.test');
    assert.equal(t.status, 'completed');
    assert.equal(peer.received.length, 1);

    // The dead worker wakes up and tries to finish: nothing is written.
    const lost = await store.write((trx) =>
      finishTransmission(trx, {
        id: t.id,
        worker: dead,
        now: clock.now(),
        state: { status: 'failed', at: clock.now() },
        resultCode: 'SMTP_550',
        resultMessage: 'stale',
        attempt: { startedAt: T0, durationMs: 1, mxHost: null, outcome: 'failed' },
      }),
    );
    assert.equal(lost, null);
    const after = await h.transmission('orphan@example.test');
    assert.equal(after.status, 'completed');
    assert.equal((await h.attempts(t.id)).length, 1, 'no attempt row for the lost lease');
  });

  it('a slow delivery renews its lease, so nobody else takes the row meanwhile', async () => {
    const slow = await startSmtpPeer({ dataDelayMs: 400 });
    const h2 = await startDeliveryHarness({ clock, config: { transportMap: [slow.transportFor('*')], leaseMs: 5 * MIN } });
    try {
      await h2.send(simpleMessage('patient@example.test'));
      const store = h2.t.app.services.store;
      const running = h2.worker.runOnce();
      const deadline = Date.now() + 10_000;
      while (slow.attempts.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      // The SMTP conversation is in progress; almost the whole lease passes.
      clock.advance(5 * MIN - 1000);
      assert.equal(await h2.worker.renewLeases(), 1);
      const row = await h2.transmission('patient@example.test');
      assert.equal(row.locked_until, clock.now() + 5 * MIN);
      clock.advance(2000); // past the original lease, within the renewed one
      const stolen = await store.write((trx) => claimDueTransmissions(trx, { worker: 'thief', now: clock.now(), leaseMs: 5 * MIN, limit: 10 }));
      assert.deepEqual(stolen, []);
      assert.equal(await running, 1);
      assert.equal((await h2.transmission('patient@example.test')).status, 'completed');
      assert.equal(await h2.worker.renewLeases(), 0, 'nothing left in flight');
    } finally {
      await h2.close();
      await slow.close();
    }
  });

  it('a claim written whose answer was lost (failed as unavailable) is given back by the next claim, not left to its lease', async () => {
    await h.send(simpleMessage('unanswered@example.test'));
    const store = h.t.app.services.store;
    // The claim is committed, and the worker told the database is unavailable.
    const lost = loseNextAnswer(store);
    try {
      await assert.rejects(h.worker.runOnce(), StoreUnavailableError);
    } finally {
      lost.restore();
    }
    const held = await h.transmission('unanswered@example.test');
    assert.equal(held.locked_by, h.worker.workerId, 'the claim was written');
    assert.equal(held.locked_until, clock.now() + 5 * MIN);
    assert.equal(peer.received.filter((m) => m.to.includes('unanswered@example.test')).length, 0);

    // The lease has not ended, yet the next claim takes the row: it was given back first.
    assert.equal(await h.worker.runOnce(), 1);
    const done = await h.transmission('unanswered@example.test');
    assert.equal(done.status, 'completed');
    assert.equal((await h.attempts(done.id)).length, 1);
  });

  it('a worker whose lease was taken over records nothing when its send finishes', async () => {
    await h.send(simpleMessage('slowpoke@example.test'));
    const store = h.t.app.services.store;
    const t = await h.transmission('slowpoke@example.test');
    // Simulate the takeover while our worker holds the row: claim with our worker, then hand the
    // row to someone else before the finish by rewriting locked_by (what a claim after expiry does).
    const claimed = await store.write((trx) => claimDueTransmissions(trx, { worker: h.worker.workerId, now: clock.now(), leaseMs: 5 * MIN, limit: 10 }));
    assert.equal(claimed.length, 1);
    await store.write((trx) => trx.updateTable('transmissions').set({ locked_by: 'usurper' }).where('id', '=', t.id).execute());
    const ok = await store.write((trx) =>
      finishTransmission(trx, {
        id: t.id,
        worker: h.worker.workerId,
        now: clock.now(),
        state: { status: 'completed', at: clock.now() },
        resultCode: 'SMTP_250',
        resultMessage: 'ok',
        attempt: { startedAt: clock.now(), durationMs: 1, mxHost: 'x', outcome: 'sent' },
      }),
    );
    assert.equal(ok, null);
    assert.equal((await h.transmission('slowpoke@example.test')).status, 'queued');
  });
});

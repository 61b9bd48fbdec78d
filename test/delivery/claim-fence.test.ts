// The fence before each send (workers/lease-runner.ts, docs/reliability.md "When a process is
// dead"): a claim taken from this process while its transmissions waited (its lease ran out, or a
// process on another host presumed it dead and released everything it held) is noticed before the
// next SMTP transaction, not only at the finish, so none of what was taken is sent by it. A real
// SMTP peer holds the first message's DATA open (one connection to it: the others wait for it),
// the claim is taken meanwhile, then the peer answers: only the message that was already in its
// transaction arrives from this process.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ManualClock } from '../../src/domain/clock.ts';
import { claimDueTransmissions } from '../../src/storage/delivery-queue.ts';
import { ProcessRegistry } from '../../src/workers/process-registry.ts';
import { startSmtpPeer, type SmtpPeer } from '../helpers/smtp-peers.ts';
import { until } from '../helpers/wait.ts';
import { simpleMessage, startDeliveryHarness, type DeliveryHarness } from './harness.ts';

const MIN = 60_000;
const RECIPIENTS = ['first@example.test', 'second@example.test', 'third@example.test', 'fourth@example.test'];

/** A peer that keeps the first message's DATA unanswered until `open()`. */
async function gatedPeer(): Promise<{ peer: SmtpPeer; open: () => void }> {
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  let first = true;
  const peer = await startSmtpPeer({
    hold: () => {
      if (!first) return null;
      first = false;
      return gate;
    },
  });
  return { peer, open };
}

function received(peer: SmtpPeer): string[] {
  return peer.received.flatMap((m) => m.to).sort();
}

describe('the fence before a send: a lease that ran out while waiting', () => {
  let h: DeliveryHarness;
  let gated: Awaited<ReturnType<typeof gatedPeer>>;
  const clock = new ManualClock(Date.UTC(2026, 4, 1, 8, 0, 0));
  before(async () => {
    gated = await gatedPeer();
    h = await startDeliveryHarness({ clock, config: { transportMap: [gated.peer.transportFor('*')], leaseMs: 5 * MIN, maxConnectionsPerDestination: 1, socketTimeoutMs: 60_000 } });
  });
  after(async () => {
    gated?.open();
    await h?.close();
    await gated?.peer.close();
  });

  it('sends none of the transmissions another worker claimed meanwhile; records nothing for them', async () => {
    await h.send(simpleMessage(RECIPIENTS));
    const running = h.worker.runOnce();
    // The first message is in its transaction; the three others wait for the one connection.
    await until('the first message at the peer', () => gated.peer.attempts.length === 1);
    clock.advance(5 * MIN);
    const store = h.t.app.services.store;
    const stolen = await store.write((trx) => claimDueTransmissions(trx, { worker: 'thief', now: clock.now(), leaseMs: 5 * MIN, limit: 10 }));
    assert.equal(stolen.length, RECIPIENTS.length, 'the leases ran out: another worker claims every row');
    gated.open();
    assert.equal(await running, RECIPIENTS.length);
    assert.deepEqual(received(gated.peer), ['first@example.test'], 'only the message already in its transaction was sent');
    const rows = await h.transmissions();
    assert.deepEqual(
      rows.map((r) => [r.locked_by, r.attempts, r.status]),
      RECIPIENTS.map(() => ['thief', 0, 'queued']),
      'nothing recorded by the worker that lost them',
    );
  });
});

describe('the fence before a send: presumed dead by a process on another host', () => {
  let h: DeliveryHarness;
  let gated: Awaited<ReturnType<typeof gatedPeer>>;
  let registry: ProcessRegistry;
  let elsewhere: ProcessRegistry;
  before(async () => {
    gated = await gatedPeer();
    h = await startDeliveryHarness({
      config: { transportMap: [gated.peer.transportFor('*')], maxConnectionsPerDestination: 1, socketTimeoutMs: 60_000 },
      delivery: (services) => {
        // This process beats only when asked (the hour between heartbeats stands for a stall).
        registry = new ProcessRegistry(services, { heartbeatMs: 3_600_000, deadAfterMs: 1000 });
        return { workerId: registry.id, liveness: registry };
      },
    });
    await registry.start();
    elsewhere = new ProcessRegistry(h.t.app.services, { host: 'another-host', heartbeatMs: 3_600_000, deadAfterMs: 1000 });
    await elsewhere.start();
  });
  after(async () => {
    gated?.open();
    await h?.close();
    await registry?.stop();
    await elsewhere?.stop();
    await gated?.peer.close();
  });

  it('sends none of what was released while it was silent; each is sent by its next claim only', async () => {
    await h.send(simpleMessage(RECIPIENTS));
    const running = h.worker.runOnce();
    await until('the first message at the peer', () => gated.peer.attempts.length === 1);
    // The other host watches this process's heartbeat stay the same past the limit and releases
    // everything it holds.
    await until('the other host to release this process\'s claims', async () => (await elsewhere.reap()).includes(registry.id), 10_000, 100);
    const store = h.t.app.services.store;
    const locked = await store.db.selectFrom('transmissions').select('id').where('locked_by', 'is not', null).execute();
    assert.deepEqual(locked, [], 'released');
    gated.open();
    assert.equal(await running, RECIPIENTS.length);
    const registered = await store.db.selectFrom('worker_processes').select('id').where('id', '=', registry.id).execute();
    assert.equal(registered.length, 1, 'the process registered again when its heartbeat found its row gone');
    // Released, they are claimed again (here by this same process, as soon as a slot frees up,
    // while the claims it lost are still at work) and each is sent once by that new claim: the
    // first, which was in its transaction when it was released, is the only repeat.
    await until('every transmission completed', async () => (await h.transmissions()).every((r) => r.status === 'completed'));
    assert.deepEqual(received(gated.peer), ['first@example.test', ...RECIPIENTS].sort());
    assert.ok((await h.transmissions()).every((r) => r.attempts === 1 && r.holder_deaths === 0));
  });
});

describe('the fence at a graceful stop: nothing new begins once the worker is stopping', () => {
  let h: DeliveryHarness;
  let gated: Awaited<ReturnType<typeof gatedPeer>>;
  before(async () => {
    gated = await gatedPeer();
    h = await startDeliveryHarness({ config: { transportMap: [gated.peer.transportFor('*')], maxConnectionsPerDestination: 1, socketTimeoutMs: 60_000 } });
  });
  after(async () => {
    gated?.open();
    await h?.close();
    await gated?.peer.close();
  });

  it('finishes the send under way, gives back the rest unsent and due at once, records nothing for them', async () => {
    await h.send(simpleMessage(RECIPIENTS));
    const running = h.worker.runOnce();
    // The first message is in its transaction; the three others wait for the one connection.
    await until('the first message at the peer', () => gated.peer.attempts.length === 1);
    const stopped = h.worker.stop();
    gated.open();
    await stopped;
    await running;
    assert.deepEqual(received(gated.peer), ['first@example.test'], 'only the message already in its transaction was sent');
    const rows = new Map((await h.transmissions()).map((r) => [r.recipient, r]));
    assert.equal(rows.get('first@example.test')?.status, 'completed');
    for (const to of RECIPIENTS.slice(1)) {
      const row = rows.get(to)!;
      assert.deepEqual([row.status, row.attempts, row.locked_by], ['queued', 0, null], `${to}: given back, no attempt recorded`);
      assert.ok(Number(row.next_attempt_at) <= Date.now(), `${to}: due again at once`);
    }
  });
});

// cancel_message against the real server and a real delivery worker sending to a local SMTP peer:
// waiting copies end failed with result CANCELLED (shown by get_message_transmissions and
// message_status) and a `cancelled` event; a cancelled copy is never sent; a copy a worker holds
// under a live lease, or one that has ended, is reported and left alone (docs/api/cancel-message.md).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ManualClock } from '../../src/domain/clock.ts';
import { claimDueTransmissions } from '../../src/storage/delivery-queue.ts';
import { simpleMessage, startDeliveryHarness, type DeliveryHarness } from '../delivery/harness.ts';
import { startSmtpPeer, type SmtpPeer } from '../helpers/smtp-peers.ts';

describe('cancel_message', () => {
  let peer: SmtpPeer;
  let h: DeliveryHarness;
  const clock = new ManualClock(Date.UTC(2026, 5, 1, 12));
  before(async () => {
    peer = await startSmtpPeer();
    h = await startDeliveryHarness({ clock, config: { transportMap: [peer.transportFor('*')], leaseMs: 60_000 } });
  });
  after(async () => {
    await h.close();
    await peer.close();
  });

  const cancel = (args: Record<string, unknown>, top: Record<string, unknown> = {}) => h.t.call('cancel_message', { api_key: h.seed.projectKey, arguments: args, ...top });

  it('cancels every waiting copy: failed, CANCELLED, an event each, and nothing is sent', async () => {
    const sent = await h.send(simpleMessage(['a@example.test', 'b@example.test'], { headers: { from: 'S <s@posthorn.test>', subject: 'Hi', cc: 'c@example.test' } }));
    const id = sent.data.message.id;
    const r = await cancel({ id });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.deepEqual(r.body.data.cancelled.sort(), ['a@example.test', 'b@example.test', 'c@example.test']);
    assert.deepEqual(r.body.data.not_cancelled, {});
    const uid = r.body.data.message.uid;

    // The worker finds nothing due for it: the peer receives nothing.
    assert.equal(await h.drain(), 0);
    assert.equal(peer.received.length, 0);

    const shown = await h.t.call('get_message_transmissions', { api_key: h.seed.projectKey, uid });
    assert.equal(shown.status, 200, JSON.stringify(shown.body));
    const transmissions = Object.values(shown.body.data.transmissions ?? shown.body.data) as any[];
    assert.ok(transmissions.length >= 3);
    for (const t of transmissions) {
      assert.equal(t.status, 'failed');
      assert.equal(t.result_code, 'CANCELLED');
    }
    const status = await h.t.call('message_status', { api_key: h.seed.projectKey, uid });
    assert.equal(status.body.data.message_status.failed, 3);

    const events = (await h.events('cancelled')).filter((e) => e.payload.message_id === id);
    assert.equal(events.length, 3);
    assert.equal(events[0].payload.result_code, 'CANCELLED');
    assert.equal(events[0].payload.message_uid, uid);

    // A second cancel changes nothing and says why.
    const again = await cancel({ uid });
    assert.deepEqual(again.body.data.cancelled, []);
    assert.equal(again.body.data.not_cancelled['a@example.test'], 'failed');
  });

  it('cancels only the recipients named (top-level uid accepted); unknown ones are reported', async () => {
    const sent = await h.send(simpleMessage(['keep@example.test', 'Stop@Example.test'], { headers: { from: 'S <s@posthorn.test>', subject: 'Hi' } }));
    const row = await h.transmission('keep@example.test');
    const message = await h.t.app.services.store.db.selectFrom('messages').select('uid').where('id', '=', sent.data.message.id).executeTakeFirstOrThrow();
    const r = await cancel({ recipients: ['stop@example.test', 'other@example.test'] }, { uid: message.uid });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.deepEqual(r.body.data.cancelled, ['Stop@example.test']);
    assert.deepEqual(r.body.data.not_cancelled, { 'other@example.test': 'not_a_recipient' });
    assert.equal(await h.drain(), 1);
    await peer.waitForReceived(1);
    assert.deepEqual(peer.received.map((m) => m.to[0]), ['keep@example.test']);
    assert.equal((await h.transmission('keep@example.test')).id, row.id);
    assert.equal((await h.transmission('keep@example.test')).status, 'completed');
    const after = await cancel({ uid: message.uid });
    assert.deepEqual(after.body.data.not_cancelled, { 'keep@example.test': 'completed', 'Stop@example.test': 'failed' });
  });

  it('leaves a copy a worker holds under a live lease (in flight); once the lease expires it can be cancelled', async () => {
    const sent = await h.send(simpleMessage('held@example.test', { headers: { from: 'S <s@posthorn.test>', subject: 'Hi' } }));
    const store = h.t.app.services.store;
    const claimed = await store.write((trx) => claimDueTransmissions(trx, { worker: 'other-worker', now: clock.now(), leaseMs: 60_000, limit: 10 }));
    assert.equal(claimed.length, 1);
    const r = await cancel({ id: sent.data.message.id });
    assert.deepEqual(r.body.data.cancelled, []);
    assert.deepEqual(r.body.data.not_cancelled, { 'held@example.test': 'in_flight' });
    assert.equal((await h.transmission('held@example.test')).status, 'queued');

    clock.advance(60_000);
    const later = await cancel({ id: sent.data.message.id });
    assert.deepEqual(later.body.data.cancelled, ['held@example.test']);
    const t = await h.transmission('held@example.test');
    assert.equal(t.status, 'failed');
    assert.equal(t.locked_by, null);
  });

  it('refuses a missing message (404), no uid or id (400), an account key (the method is a project key\'s)', async () => {
    assert.equal((await cancel({ uid: 'no-such-uid' })).status, 404);
    assert.equal((await cancel({})).status, 400);
    const other = await h.t.seed('other');
    const sent = await h.send(simpleMessage('x@example.test', { headers: { from: 'S <s@posthorn.test>', subject: 'Hi' } }));
    // Another project's key cannot see this project's message.
    assert.equal((await h.t.call('cancel_message', { api_key: other.projectKey, arguments: { id: sent.data.message.id } })).status, 404);
    const byAccount = await h.t.call('cancel_message', { api_key: h.seed.accountKey, arguments: { id: sent.data.message.id } });
    assert.notEqual(byAccount.status, 200);
    assert.equal((await cancel({ id: sent.data.message.id, recipients: 5 })).status, 406);
    // A bound is said in words, not with an infinity sign.
    const zero = await cancel({ id: 0 });
    assert.equal(zero.status, 406);
    assert.match(zero.body.response.message, /argument "id" must be at least 1, got 0/);
  });
});

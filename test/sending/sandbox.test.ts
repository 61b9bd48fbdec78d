// Sandbox projects (docs/sandbox.md): with the project's `sandbox` setting on, every copy goes
// through the normal delivery path with the sandbox adapter in place of SMTP. A real SMTP peer is
// the only route the configuration offers (transport map '*'), and it must receive nothing; the
// records are those of a real send: attempt rows, statuses, bounces and suppressions, events.
// Simulator addresses bounce, soft-bounce then succeed, complain, and delay.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ManualClock } from '../../src/domain/clock.ts';
import { simpleMessage, startDeliveryHarness, type DeliveryHarness } from '../delivery/harness.ts';
import { startSmtpPeer, type SmtpPeer } from '../helpers/smtp-peers.ts';

const SIM = 'simulator.posthorn.test';

describe('sandbox projects', () => {
  let peer: SmtpPeer;
  let h: DeliveryHarness;
  const clock = new ManualClock(Date.UTC(2026, 5, 1, 12));
  before(async () => {
    peer = await startSmtpPeer();
    h = await startDeliveryHarness({ clock, config: { transportMap: [peer.transportFor('*')], retrySchedule: '1m,5m' } });
    const on = await h.t.call('update_project', { api_key: h.seed.accountKey, arguments: { uid: h.seed.projectUid, settings: { sandbox: true } } });
    assert.equal(on.status, 200, JSON.stringify(on.body));
    assert.equal(on.body.data.project.settings.sandbox, true);
  });
  after(async () => {
    await h.close();
    await peer.close();
  });

  it('completes every copy with the records of a real send, and nothing leaves the machine', async () => {
    const recipients = ['ok@example.test', `bounce+1@${SIM}`, `soft-bounce+1@${SIM}`, `complaint+1@${SIM}`, `delay+1@${SIM}`];
    const sent = await h.send(simpleMessage(recipients, { variables: { name: 'Ann' }, content: { 'text/html': '<p>Hi {{name}}</p>' } }));
    const messageId = sent.data.message.id;
    assert.equal(await h.drain(), 5);

    const ok = await h.transmission('ok@example.test');
    assert.equal(ok.status, 'completed');
    assert.equal(ok.result_code, 'SMTP_250');
    const okAttempts = await h.attempts(ok.id);
    assert.equal(okAttempts.length, 1);
    assert.equal(okAttempts[0].mx_host, 'sandbox');
    assert.equal(okAttempts[0].outcome, 'sent');

    const bounced = await h.transmission(`bounce+1@${SIM}`);
    assert.equal(bounced.status, 'failed');
    assert.equal(bounced.result_code, 'SMTP_550');
    const suppressions = await h.t.app.services.store.db.selectFrom('suppressions').select(['address', 'status']).execute();
    assert.ok(suppressions.some((s) => s.address === `bounce+1@${SIM}` && s.status === 'rejected'), JSON.stringify(suppressions));

    const soft = await h.transmission(`soft-bounce+1@${SIM}`);
    assert.equal(soft.status, 'retry');
    assert.equal(soft.result_code, 'SMTP_452');
    assert.equal((await h.transmission(`delay+1@${SIM}`)).status, 'retry');
    const complaint = await h.transmission(`complaint+1@${SIM}`);
    assert.equal(complaint.status, 'completed');
    // The complaint, as a real one: recorded on the copy, counted by get_metrics, the address suppressed.
    assert.equal(Number(complaint.spammed_at), Number(complaint.completed_at));
    const complained = suppressions.find((s) => s.address === `complaint+1@${SIM}`);
    assert.equal(complained?.status, 'rejected', JSON.stringify(suppressions));
    const listed = await h.t.call('get_suppression_list', { api_key: h.seed.projectKey });
    assert.equal(listed.body.data[`complaint+1@${SIM}`]?.suppression_state, 'complaint', JSON.stringify(listed.body));
    const metrics = await h.t.call('get_metrics', { api_key: h.seed.projectKey });
    assert.equal(metrics.status, 200, JSON.stringify(metrics.body));
    assert.equal(metrics.body.data.metrics.date.spammed.current_value, 1, JSON.stringify(metrics.body.data.metrics.date));
    assert.equal(metrics.body.data.metrics.date.delivered.current_value, 2);

    const events = (await h.events()).filter((e) => e.payload.message_id === messageId);
    const kinds = (recipient: string) => events.filter((e) => e.payload.recipient === recipient).map((e) => e.type);
    assert.deepEqual(kinds('ok@example.test'), ['delivered']);
    assert.deepEqual(kinds(`bounce+1@${SIM}`), ['bounced']);
    assert.deepEqual(kinds(`soft-bounce+1@${SIM}`), ['retry']);
    assert.deepEqual(kinds(`complaint+1@${SIM}`), ['delivered', 'spammed']);
    assert.deepEqual(kinds(`delay+1@${SIM}`), ['retry']);

    // The retries come due: the soft bounce is delivered; the delay is deferred once more, then delivered.
    clock.advance(60_000);
    assert.equal(await h.drain(), 2);
    assert.equal((await h.transmission(`soft-bounce+1@${SIM}`)).status, 'completed');
    assert.equal((await h.transmission(`delay+1@${SIM}`)).status, 'retry');
    clock.advance(5 * 60_000);
    assert.equal(await h.drain(), 1);
    const delayed = await h.transmission(`delay+1@${SIM}`);
    assert.equal(delayed.status, 'completed');
    assert.equal((await h.attempts(delayed.id)).length, 3);

    // A hard-bounced address is suppressed for the next message, as for real mail.
    await h.send(simpleMessage(`bounce+1@${SIM}`, { headers: { from: 'S <s@posthorn.test>', subject: 'again' } }));
    await h.drain();
    assert.equal((await h.transmission(`bounce+1@${SIM}`)).result_code, 'SUPPRESSED');
    // So is an address that complained.
    await h.send(simpleMessage(`complaint+1@${SIM}`, { headers: { from: 'S <s@posthorn.test>', subject: 'again' } }));
    await h.drain();
    assert.equal((await h.transmission(`complaint+1@${SIM}`)).result_code, 'SUPPRESSED');

    assert.equal(peer.connectionCount, 0, 'the sandbox connected to the SMTP peer');
    assert.equal(peer.received.length, 0);
  });

  it('the same project with sandbox off sends for real', async () => {
    const off = await h.t.call('update_project', { api_key: h.seed.accountKey, arguments: { uid: h.seed.projectUid, settings: { sandbox: false } } });
    assert.equal(off.status, 200);
    await h.send(simpleMessage('real@example.test'));
    assert.equal(await h.drain(), 1);
    await peer.waitForReceived(1);
    assert.notEqual((await h.attempts((await h.transmission('real@example.test')).id))[0].mx_host, 'sandbox');
  });
});

// Tracking as delivery applies it: a project that opts in gets each copy's HTML rewritten for its
// own transmission (pixel and links signed with the deployment's tracking key); the text part and
// projects that did not opt in are sent as written.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { readTrackingToken, trackingSigningKey } from '../../src/domain/tracking-token.ts';
import { startSmtpPeer, type SmtpPeer } from '../helpers/smtp-peers.ts';
import { simpleMessage, startDeliveryHarness, type DeliveryHarness } from './harness.ts';

function htmlOf(raw: Buffer): string {
  // Undo quoted-printable soft breaks and =3D so the HTML can be searched.
  return raw.toString('utf8').replace(/=\r\n/g, '').replace(/=3D/g, '=');
}

describe('tracking in delivered mail', () => {
  let h: DeliveryHarness;
  let peer: SmtpPeer;
  before(async () => {
    peer = await startSmtpPeer();
    h = await startDeliveryHarness({ config: { transportMap: [peer.transportFor('*')], publicUrl: 'https://track.example' } });
  });
  after(async () => {
    await h?.close();
    await peer?.close();
  });

  const html = '<html><body><p>Your order</p><a href="https://shop.example/orders/7">see it</a></body></html>';

  it('leaves mail alone for a project that did not opt in', async () => {
    await h.send(simpleMessage('plain@example.test', { content: { 'text/html': html, 'text/plain': 'Your order' } }));
    await h.drain();
    const body = htmlOf(peer.received.at(-1)!.raw);
    assert.match(body, /href="https:\/\/shop\.example\/orders\/7"/);
    assert.doesNotMatch(body, /track\.example/);
  });

  it('rewrites each copy for its own transmission once the project opts in', async () => {
    const r = await h.t.call('update_project', { api_key: h.seed.accountKey, arguments: { uid: h.seed.projectUid, settings: { tracking: true } } });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    await h.send(simpleMessage(['t1@example.test', 't2@example.test'], { content: { 'text/html': html, 'text/plain': 'Your order' } }));
    assert.equal(await h.drain(), 2);
    const key = trackingSigningKey(h.t.app.services);
    for (const recipient of ['t1@example.test', 't2@example.test']) {
      const t = await h.transmission(recipient);
      const body = htmlOf(peer.received.find((m) => m.to[0] === recipient)!.raw);
      const pixel = /https:\/\/track\.example\/t\/o\/([\w-]+\.[\w-]+)\.gif/.exec(body);
      assert.ok(pixel, 'a tracking pixel');
      assert.deepEqual(readTrackingToken('open', pixel[1], key), { kind: 'open', transmissionId: t.id });
      const link = /href="https:\/\/track\.example\/t\/c\/([\w-]+\.[\w-]+)"/.exec(body);
      assert.ok(link, 'a rewritten link');
      assert.deepEqual(readTrackingToken('click', link[1], key), { kind: 'click', transmissionId: t.id, url: 'https://shop.example/orders/7' });
      assert.match(body, /Content-Type: text\/plain[\s\S]*Your order/);
    }
  });
});

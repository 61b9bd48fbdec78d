// Templates that balloon (loops within loops, layouts full of {{*}} under layouts full of {{*}}) are
// stopped at the limits of docs/templates.md ("Limits"), through the real API and a real delivery:
// refused at acceptance where the merge shows it (412), reported by preview_template as the part's
// error (never a 500), and at delivery the copy fails at once with RENDER_FAILED while the next
// message is delivered as usual.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startSmtpPeer, type SmtpPeer } from '../helpers/smtp-peers.ts';
import { startDeliveryHarness, type DeliveryHarness } from './harness.ts';

/** The request of the report: three loops over 300 items, 27,000,000 turns and 27 MB of output unbounded. */
const NESTED_LOOPS = '{{#each a}}{{#each ../a}}{{#each ../../a}}x{{/each}}{{/each}}{{/each}}';
const A = Array.from({ length: 300 }, (_, i) => i);
const STEPS = /it takes more than 1,000,000 steps to render \(loops within loops\?\), the most one part may take \(docs\/templates\.md, "Limits"\)/;

describe('render limits, through the API and delivery', () => {
  let peer: SmtpPeer;
  let h: DeliveryHarness;

  before(async () => {
    peer = await startSmtpPeer();
    h = await startDeliveryHarness({ config: { transportMap: [peer.transportFor('*')] } });
    // Three layouts of 100 slots each, each inside the next (the report's lay_a, lay_b, lay_c).
    for (const [slug, parent] of [['lay_a', null], ['lay_b', 'lay_a'], ['lay_c', 'lay_b']] as const) {
      const r = await h.t.call('create_template', { api_key: h.seed.projectKey, arguments: { slug, text: '{{*}}'.repeat(100), ...(parent ? { parent } : {}) } });
      assert.equal(r.status, 200, JSON.stringify(r.body));
    }
  });
  after(async () => {
    await h?.close();
    await peer?.close();
  });

  const call = (method: string, args: Record<string, unknown>) => h.t.call(method, { api_key: h.seed.projectKey, arguments: args });

  it('preview_template of loops within loops answers the text part\'s error, not 27 MB', async () => {
    const r = await call('preview_template', { content: { 'text/plain': NESTED_LOOPS }, variables: { a: A } });
    assert.equal(r.status, 200, JSON.stringify(r.body).slice(0, 500));
    const p = r.body.data.preview;
    assert.equal(p.text, null);
    assert.match(p.errors.text, /^cannot be rendered with these variables: /);
    assert.match(p.errors.text, STEPS);
    assert.ok(JSON.stringify(r.body).length < 2000);
  });

  it('send_message into layouts that would multiply the content past the bound is 412, whatever the content\'s size', async () => {
    for (const chars of [100, 200, 1000]) {
      const r = await call('send_message', {
        recipients: ['someone@limits.test'],
        headers: { from: 'shop@posthorn.test', subject: 'Layouts' },
        template: 'lay_c',
        content: { 'text/plain': 'x'.repeat(chars) },
      });
      assert.equal(r.status, 412, `${chars} characters: ${JSON.stringify(r.body).slice(0, 300)}`);
      assert.equal(r.body.response.status, 'precondition_failed');
      const into = chars === 1000 ? 'lay_b' : 'lay_a';
      const size = (chars * (chars === 1000 ? 10_000 : 1_000_000)).toLocaleString('en-US');
      assert.equal(
        r.body.response.message,
        `The text part cannot be merged into template "${into}": it would be ${size} characters, more than the 5,242,880 characters (5 MiB) one part may be (docs/templates.md, "Limits").`,
      );
    }
    // Nothing was stored.
    assert.equal((await h.transmissions()).filter((t) => t.recipient === 'someone@limits.test').length, 0);
  });

  it('preview_template of the same layouts names the text part, not a 500', async () => {
    for (const chars of [100, 1000]) {
      const r = await call('preview_template', { template: 'lay_c', content: { 'text/plain': 'x'.repeat(chars) } });
      assert.equal(r.status, 200, JSON.stringify(r.body).slice(0, 300));
      assert.equal(r.body.data.preview.text, null);
      assert.match(r.body.data.preview.errors.text, /^The text part cannot be merged into template "lay_[ab]": it would be [\d,]+ characters, more than the 5,242,880 characters \(5 MiB\)/);
    }
  });

  it('at delivery, a copy whose render passes the limits fails at once with RENDER_FAILED; the next message is delivered', async () => {
    const accepted = await h.t.call('send_message', {
      api_key: h.seed.projectKey,
      uid: 'loops-1',
      arguments: { recipients: ['loops@limits.test'], headers: { from: 'Shop <shop@posthorn.test>', subject: 'Loops' }, content: { 'text/plain': NESTED_LOOPS }, variables: { a: A } },
    });
    assert.equal(accepted.status, 200, JSON.stringify(accepted.body));
    await h.drain();

    const bad = await h.transmission('loops@limits.test');
    assert.equal(bad.status, 'failed');
    assert.equal(bad.attempts, 1, 'failed on its first attempt, never retried');
    assert.equal((await h.attempts(bad.id)).length, 1);
    const events = (await h.events()).filter((e) => e.payload.transmission_id === bad.id);
    assert.deepEqual(events.map((e) => [e.type, e.payload.result_code]), [['failed', 'RENDER_FAILED']]);
    assert.match(events[0].payload.result_message, /^The text part could not be rendered with the recipient's variables: it takes more than 1,000,000 steps/);
    assert.ok(peer.attempts.every((m) => !m.to.includes('loops@limits.test')), 'nothing reached the server');

    // That copy's content, asked for, is a clear 412, not a 500.
    for (const method of ['get_message_content', 'get_message_source']) {
      const shown = await call(method, { uid: 'loops-1' });
      assert.equal(shown.status, 412, `${method}: ${JSON.stringify(shown.body).slice(0, 300)}`);
      assert.match(shown.body.response.message, /^Message loops-1 cannot be shown as composed for loops@limits\.test: The text part could not be rendered with the recipient's variables: it takes more than 1,000,000 steps/);
    }

    await h.send({ recipients: ['after@limits.test'], headers: { from: 'Shop <shop@posthorn.test>', subject: 'After' }, content: { 'text/plain': 'Still {{word}}.' }, variables: { word: 'delivered' } });
    await h.drain();
    assert.equal((await h.transmission('after@limits.test')).status, 'completed');
    const mail = peer.received.find((m) => m.to.includes('after@limits.test'));
    assert.ok(mail, 'the next message reached the server');
    assert.match(mail.raw.toString('utf8'), /Still delivered\./);
  });
});

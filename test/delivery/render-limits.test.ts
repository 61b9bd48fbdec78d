// Templates that balloon (loops within loops, layouts full of {{*}} under layouts full of {{*}}) are
// stopped at the limits of docs/templates.md ("Limits"), through the real API and a real delivery:
// refused at acceptance where the merge shows it (412), reported by preview_template as the part's
// error (never a 500), and at delivery the copy fails at once with RENDER_FAILED while the next
// message is delivered as usual.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { metricsOf } from '../../src/observability/metrics.ts';
import { startSmtpPeer, type SmtpPeer } from '../helpers/smtp-peers.ts';
import { until } from '../helpers/wait.ts';
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

// A render that fails does so the same way for every copy with the same content and variables
// (delivery/message-contexts.ts): it is done once per variant and its failure reused, never once
// per copy (a million steps each). Counted by posthorn_compositions_total.
describe('a render past the bound, for many recipients: rendered once per variant', () => {
  let peer: SmtpPeer;
  let h: DeliveryHarness;
  const RECIPIENTS = 40;

  before(async () => {
    peer = await startSmtpPeer();
    h = await startDeliveryHarness({ config: { transportMap: [peer.transportFor('*')], publicUrl: 'https://track.example' } });
  });
  after(async () => {
    await h?.close();
    await peer?.close();
  });

  const compositions = async (result: 'composed' | 'failed') =>
    (await metricsOf(h.t.app.services).compositions.get()).values.find((v) => v.labels.result === result)?.value ?? 0;

  async function sendAndCount(prefix: string, args: Record<string, unknown>): Promise<{ failedRenders: number; copies: any[] }> {
    const before = await compositions('failed');
    await h.send(args);
    await finishAll();
    const copies = (await h.transmissions()).filter((t) => t.recipient.startsWith(prefix));
    return { failedRenders: (await compositions('failed')) - before, copies };
  }

  /** Works the queue until nothing is due or held (the runner also claims on its own as finishes are written). */
  async function finishAll(): Promise<void> {
    await until('every copy finished', async () => {
      await h.drain();
      await h.worker.idle();
      return (await h.transmissions()).every((t) => t.status !== 'queued' && t.status !== 'retry');
    });
  }

  function assertAllRenderFailed(copies: any[], n: number): void {
    assert.equal(copies.length, n);
    for (const c of copies) {
      assert.deepEqual([c.status, c.result_code, c.attempts], ['failed', 'RENDER_FAILED', 1], c.recipient);
      assert.match(c.result_message, STEPS);
    }
  }

  it('shared content: one render for the message, every copy failed RENDER_FAILED', async () => {
    const recipients = Array.from({ length: RECIPIENTS }, (_, i) => `shared-${i}@limits.test`);
    const { failedRenders, copies } = await sendAndCount('shared-', {
      recipients,
      headers: { from: 'shop@posthorn.test', subject: 'Loops' },
      content: { 'text/plain': NESTED_LOOPS },
      variables: { a: A },
    });
    assert.equal(failedRenders, 1, 'rendered once');
    assertAllRenderFailed(copies, RECIPIENTS);
    assert.equal(peer.attempts.length, 0, 'nothing reached the server');
  });

  it('recipient variables: one render per distinct set of variables', async () => {
    const recipients: Record<string, Record<string, string>> = {};
    for (let i = 0; i < RECIPIENTS; i++) recipients[`own-${i}@limits.test`] = { tier: i % 2 === 0 ? 'gold' : 'silver' };
    const { failedRenders, copies } = await sendAndCount('own-', {
      recipients,
      headers: { from: 'shop@posthorn.test', subject: 'Loops for {{tier}}' },
      content: { 'text/plain': `{{tier}} ${NESTED_LOOPS}` },
      variables: { a: A },
    });
    assert.equal(failedRenders, 2, 'rendered once for gold, once for silver');
    assertAllRenderFailed(copies, RECIPIENTS);
  });

  it('with tracking (each copy builds its own HTML): one render, reused by every copy', async () => {
    const r = await h.t.call('update_project', { api_key: h.seed.accountKey, arguments: { uid: h.seed.projectUid, settings: { tracking: true } } });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    const recipients = Array.from({ length: RECIPIENTS }, (_, i) => `tracked-${i}@limits.test`);
    const { failedRenders, copies } = await sendAndCount('tracked-', {
      recipients,
      headers: { from: 'shop@posthorn.test', subject: 'Loops' },
      content: { 'text/html': `<p>${NESTED_LOOPS}</p>`, 'text/plain': 'Loops' },
      variables: { a: A },
    });
    assert.equal(failedRenders, 1, 'rendered once');
    assert.equal(copies.length, RECIPIENTS);
    for (const c of copies) assert.deepEqual([c.status, c.result_code], ['failed', 'RENDER_FAILED'], c.recipient);

    // Content that renders is still composed per copy under tracking, each with its own pixel.
    const composedBefore = await compositions('composed');
    await h.send({ recipients: ['ok-1@limits.test', 'ok-2@limits.test'], headers: { from: 'shop@posthorn.test', subject: 'Fine' }, content: { 'text/html': '<p>Fine</p>', 'text/plain': 'Fine' } });
    await finishAll();
    assert.equal((await compositions('composed')) - composedBefore, 2);
    assert.equal((await h.transmission('ok-1@limits.test')).status, 'completed');
    assert.equal((await h.transmission('ok-2@limits.test')).status, 'completed');
  });
});

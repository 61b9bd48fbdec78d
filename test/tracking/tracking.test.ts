// Open and click tracking: the HTML rewrite, and the endpoints on the real HTTP listener: a good
// link redirects (302) and records clicked_at once, a token made up or altered is 404 (no open
// redirect), the pixel records opened_at; opened/clicked events reach a webhook.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { applyTracking } from '../../src/delivery/tracking.ts';
import { makeTrackingToken, trackingSigningKey } from '../../src/domain/tracking-token.ts';
import type { OutboundDispatcher } from '../../src/webhooks/index.ts';
import { startTestApp, type Seed, type TestApp } from '../helpers/app.ts';
import { startHttpSink, verifyWebhookSignature, type HttpSink } from '../helpers/http-sink.ts';

const KEY = 'test-tracking-key';

describe('applyTracking', () => {
  it('rewrites absolute http(s) links, leaves others, and adds the pixel before </body>', () => {
    const html =
      '<html><body><p><a href="https://example.com/a?x=1&amp;y=2">A</a> <a class="b" href=\'http://example.org/b\'>B</a>' +
      ' <a href="mailto:someone@example.com">M</a> <a href="/relative">R</a> <a name="anchor">N</a> <a href="#top">T</a></p></body></html>';
    const out = applyTracking(html, { transmissionId: 42, publicUrl: 'https://track.example/' }, KEY);
    const links = [...out.matchAll(/href="([^"]*)"/g)].map((m) => m[1]);
    assert.equal(links[0], `https://track.example/t/c/${makeTrackingToken({ kind: 'click', transmissionId: 42, url: 'https://example.com/a?x=1&y=2' }, KEY)}`);
    assert.equal(links[1], `https://track.example/t/c/${makeTrackingToken({ kind: 'click', transmissionId: 42, url: 'http://example.org/b' }, KEY)}`);
    assert.deepEqual(links.slice(2), ['mailto:someone@example.com', '/relative', '#top']);
    assert.match(out, /class="b" href="https:\/\/track\.example\/t\/c\//);
    const pixel = `https://track.example/t/o/${makeTrackingToken({ kind: 'open', transmissionId: 42 }, KEY)}.gif`;
    assert.ok(out.includes(`<img src="${pixel}"`));
    assert.ok(out.indexOf(pixel) < out.indexOf('</body>'));
    assert.ok(!out.includes('example.com/a'), 'the target is inside the signed token only');
    // No </body>: the pixel goes at the end.
    assert.match(applyTracking('<p>hi</p>', { transmissionId: 1, publicUrl: 'http://t' }, KEY), /^<p>hi<\/p><img src="http:\/\/t\/t\/o\/[\w-]+\.[\w-]+\.gif"/);
  });
});

describe('tracking endpoints', () => {
  let t: TestApp;
  let seed: Seed;
  let sink: HttpSink;
  let transmissionId: number;
  let secret: string;

  before(async () => {
    sink = await startHttpSink();
    t = await startTestApp({ config: { allowPrivateWebhooks: true } });
    seed = await t.seed();
    const hook = await t.call('create_webhook', { api_key: seed.accountKey, arguments: { url: sink.url + '/events', events: ['opened', 'clicked'] } });
    secret = hook.body.data.webhook.secret;
    const sent = await t.call('send_message', {
      api_key: seed.projectKey,
      uid: 'tracked-1',
      arguments: { recipients: { 'ann@example.com': { name: 'Ann' } }, headers: { from: 'a@example.com', subject: 'Hi' }, content: { 'text/html': '<a href="https://example.com/x">x</a>' }, deliver: false },
    });
    assert.equal(sent.status, 200, JSON.stringify(sent.body));
    const row = await t.app.services.store.db.selectFrom('transmissions').select('id').where('project_id', '=', seed.projectId).executeTakeFirstOrThrow();
    transmissionId = Number(row.id);
  });
  after(async () => {
    await t.close();
    await sink.close();
  });

  function links(target = 'https://example.com/landing?q=1') {
    const html = applyTracking(`<body><a href="${target}">go</a></body>`, { transmissionId, publicUrl: t.url }, trackingSigningKey(t.app.services));
    const click = /href="([^"]+)"/.exec(html)![1];
    const open = /src="([^"]+)"/.exec(html)![1];
    return { click, open };
  }

  async function stamps() {
    const row = await t.app.services.store.db.selectFrom('transmissions').select(['opened_at', 'clicked_at']).where('id', '=', transmissionId).executeTakeFirstOrThrow();
    return row;
  }

  async function events(type: string) {
    return t.app.services.store.db.selectFrom('events').selectAll().where('type', '=', type).where('project_id', '=', seed.projectId).execute();
  }

  it('refuses made-up and altered tokens with 404, recording nothing', async () => {
    const { click, open } = links();
    const token = click.split('/t/c/')[1];
    const [payload, sig] = token.split('.');
    const evil = Buffer.from(`${transmissionId}|https://evil.example/`).toString('base64url');
    const otherId = Buffer.from(`${transmissionId + 1}|https://example.com/landing?q=1`).toString('base64url');
    const flipped = sig.slice(0, -2) + (sig.endsWith('AA') ? 'BB' : 'AA');
    const bad = [
      `/t/c/${evil}.${sig}`,
      `/t/c/${otherId}.${sig}`,
      `/t/c/${payload}.${flipped}`,
      `/t/c/${payload}`,
      `/t/c/${makeTrackingToken({ kind: 'click', transmissionId, url: 'https://evil.example/' }, 'another-key')}`,
      `/t/c/${open.split('/t/o/')[1].replace('.gif', '')}`,
      `/t/o/${token}.gif`,
      '/t/c/',
      '/t/c/%00.%00',
      `/t/c/${'A'.repeat(5000)}.${sig}`,
    ];
    for (const p of bad) {
      const r = await fetch(t.url + p, { redirect: 'manual' });
      assert.equal(r.status, 404, p);
      assert.equal(r.headers.get('location'), null, p);
    }
    const s = await stamps();
    assert.equal(s.opened_at, null);
    assert.equal(s.clicked_at, null);
  });

  it('redirects a good link with 302 and records clicked_at (and opened_at) the first time only', async () => {
    const { click } = links();
    assert.ok(click.startsWith(t.url + '/t/c/'));
    const r = await fetch(click, { redirect: 'manual', headers: { 'user-agent': 'TestMail/1.0' } });
    assert.equal(r.status, 302);
    assert.equal(r.headers.get('location'), 'https://example.com/landing?q=1');
    const first = await stamps();
    assert.equal(typeof Number(first.clicked_at), 'number');
    assert.ok(first.clicked_at !== null && first.opened_at !== null);
    const again = await fetch(links('https://example.com/other').click, { redirect: 'manual' });
    assert.equal(again.status, 302);
    assert.equal(again.headers.get('location'), 'https://example.com/other');
    assert.deepEqual(await stamps(), first);
    assert.equal((await events('clicked')).length, 1);
    assert.equal((await events('opened')).length, 1);
  });

  it('serves the open pixel and posts opened/clicked webhooks', async () => {
    const { open } = links();
    const r = await fetch(open);
    assert.equal(r.status, 200);
    assert.equal(r.headers.get('content-type'), 'image/gif');
    assert.match(r.headers.get('cache-control') ?? '', /no-store/);
    assert.equal(Buffer.from(await r.arrayBuffer()).subarray(0, 6).toString(), 'GIF89a');
    assert.equal((await events('opened')).length, 1, 'already opened by the click');

    await (t.app.background.find((s) => s.name === 'webhooks') as OutboundDispatcher).drain();
    const bodies = sink.requests.map((req) => {
      assert.ok(verifyWebhookSignature(secret, req));
      return JSON.parse(req.body);
    });
    const clicked = bodies.find((b) => b.event === 'clicked');
    assert.ok(clicked, JSON.stringify(bodies));
    assert.equal(clicked.url, 'https://example.com/landing?q=1');
    assert.equal(clicked.transmission_id, transmissionId);
    assert.equal(clicked.recipient, 'ann@example.com');
    assert.equal(clicked.message_uid, 'tracked-1');
    assert.equal(clicked.project_uid, seed.projectUid);
    assert.equal(clicked.user_agent, 'TestMail/1.0');
    assert.ok(bodies.some((b) => b.event === 'opened' && b.transmission_id === transmissionId));
  });
});

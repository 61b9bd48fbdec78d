// Tracked links whose target is out of the ordinary, through the real HTTP listener
// (docs/tracking.md): a URL with non-ASCII or control characters redirects to its WHATWG
// serialisation (a valid Location, the same URL in the `clicked` event), and a signed URL that
// cannot be made a Location is answered 400 and records nothing.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { applyTracking } from '../../src/delivery/tracking.ts';
import { makeTrackingToken, trackingSigningKey } from '../../src/domain/tracking-token.ts';
import { startTestApp, type Seed, type TestApp } from '../helpers/app.ts';

describe('tracked links', () => {
  let t: TestApp;
  let seed: Seed;
  let sent = 0;

  before(async () => {
    t = await startTestApp();
    seed = await t.seed();
  });
  after(async () => {
    await t.close();
  });

  /** A new transmission, nothing recorded for it yet. */
  async function transmission(): Promise<number> {
    sent++;
    const reply = await t.call('send_message', {
      api_key: seed.projectKey,
      uid: `links-${sent}`,
      arguments: { recipients: ['ann@example.com'], headers: { from: 'a@example.com', subject: 'Hi' }, content: { 'text/html': '<p>hi</p>' }, deliver: false },
    });
    assert.equal(reply.status, 200, JSON.stringify(reply.body));
    const row = await t.app.services.store.db.selectFrom('transmissions').select((eb) => eb.fn.max('id').as('id')).where('project_id', '=', seed.projectId).executeTakeFirstOrThrow();
    return Number(row.id);
  }

  /** The HTML's links as delivery rewrites them for the transmission. */
  function rewrite(id: number, html: string): string {
    return applyTracking(html, { transmissionId: id, publicUrl: t.url }, trackingSigningKey(t.app.services));
  }

  function clickUrlIn(html: string): string {
    const href = /<a href="([^"]*)"/.exec(html)![1];
    assert.ok(href.startsWith(t.url + '/t/c/'), href);
    return href;
  }

  async function recorded(id: number) {
    const row = await t.app.services.store.db.selectFrom('transmissions').select(['opened_at', 'clicked_at']).where('id', '=', id).executeTakeFirstOrThrow();
    const events = await t.app.services.store.db.selectFrom('events').select(['type', 'payload']).where('project_id', '=', seed.projectId).where('type', 'in', ['opened', 'clicked']).execute();
    const mine = events.map((e) => ({ type: e.type, ...JSON.parse(e.payload) })).filter((e) => e.transmission_id === id);
    return { openedAt: row.opened_at, clickedAt: row.clicked_at, events: mine };
  }

  describe('a target with characters a Location header cannot hold', () => {
    it('redirects a non-ASCII link to its percent-encoded URL, which the clicked event names', async () => {
      const id = await transmission();
      const click = clickUrlIn(rewrite(id, '<a href="https://uni.example/café/例?q=ü">go</a>'));
      const r = await fetch(click, { redirect: 'manual' });
      assert.equal(r.status, 302, await r.text());
      const location = 'https://uni.example/caf%C3%A9/%E4%BE%8B?q=%C3%BC';
      assert.equal(r.headers.get('location'), location);
      const seen = await recorded(id);
      assert.notEqual(seen.clickedAt, null);
      assert.deepEqual(seen.events.filter((e) => e.type === 'clicked').map((e) => e.url), [location]);
    });

    it('percent-encodes a Latin-1-only link instead of sending 8-bit bytes', async () => {
      const id = await transmission();
      const r = await fetch(clickUrlIn(rewrite(id, '<a href="https://uni.example/ü?ä=ö">go</a>')), { redirect: 'manual' });
      assert.equal(r.status, 302);
      assert.equal(r.headers.get('location'), 'https://uni.example/%C3%BC?%C3%A4=%C3%B6');
    });

    it('redirects a token signed with a raw URL (control characters, a line break) to its serialisation', async () => {
      // Links in mail sent before delivery serialised them carry the URL as written.
      const id = await transmission();
      const token = makeTrackingToken({ kind: 'click', transmissionId: id, url: 'https://uni.example/a\r\nSet-Cookie: x=1\u0001/é' }, trackingSigningKey(t.app.services));
      const r = await fetch(`${t.url}/t/c/${token}`, { redirect: 'manual' });
      assert.equal(r.status, 302, await r.text());
      assert.equal(r.headers.get('location'), 'https://uni.example/aSet-Cookie:%20x=1%01/%C3%A9');
      assert.equal(r.headers.get('set-cookie'), null);
      const seen = await recorded(id);
      assert.deepEqual(seen.events.filter((e) => e.type === 'clicked').map((e) => e.url), ['https://uni.example/aSet-Cookie:%20x=1%01/%C3%A9']);
    });

    it('answers 400 to a signed URL that does not parse, recording nothing; delivery leaves such a link untracked', async () => {
      const id = await transmission();
      const token = makeTrackingToken({ kind: 'click', transmissionId: id, url: 'https://exa mple.com/' }, trackingSigningKey(t.app.services));
      const r = await fetch(`${t.url}/t/c/${token}`, { redirect: 'manual' });
      assert.equal(r.status, 400);
      assert.equal(r.headers.get('location'), null);
      assert.match(await r.text(), /not a valid URL/);
      // The answer comes after anything it records; a click that was recorded is in the database now.
      assert.deepEqual(await recorded(id), { openedAt: null, clickedAt: null, events: [] });

      const html = rewrite(id, '<a href="https://exa mple.com/">x</a>');
      assert.match(html, /^<a href="https:\/\/exa mple\.com\/">x<\/a><img /);
    });
  });

  describe('a link too long for a token', () => {
    it('is left as it is, untracked, while the longest link tracked redirects', async () => {
      const id = await transmission();
      const linkOf = (chars: number) => `https://long.example/${'p'.repeat(chars - 'https://long.example/'.length)}`;
      const tracked = (chars: number) => !rewrite(id, `<a href="${linkOf(chars)}">x</a>`).includes('long.example');

      const html = `<a href="${linkOf(3200)}">x</a>`;
      assert.ok(rewrite(id, html).startsWith(html + '<img '), 'a 3,200-character link stays as written');

      // The longest link that is tracked, and the next one up, which is not.
      let lo = 100;
      let hi = 3200;
      assert.ok(tracked(lo));
      while (hi - lo > 1) {
        const mid = (lo + hi) >> 1;
        if (tracked(mid)) lo = mid;
        else hi = mid;
      }
      assert.ok(lo > 2900, `links of ${lo} characters are tracked`);
      const click = clickUrlIn(rewrite(id, `<a href="${linkOf(lo)}">x</a>`));
      const r = await fetch(click, { redirect: 'manual' });
      assert.equal(r.status, 302);
      assert.equal(r.headers.get('location'), linkOf(lo));
    });
  });

  describe('HEAD', () => {
    it('answers like GET on the click and open URLs but records nothing', async () => {
      const id = await transmission();
      const html = rewrite(id, '<a href="https://example.com/landing">go</a>');
      const click = clickUrlIn(html);
      const open = /<img src="([^"]*)"/.exec(html)![1];

      const headClick = await fetch(click, { method: 'HEAD', redirect: 'manual', headers: { 'user-agent': 'LinkScanner/1.0' } });
      assert.equal(headClick.status, 302);
      assert.equal(headClick.headers.get('location'), 'https://example.com/landing');
      assert.equal(headClick.headers.get('referrer-policy'), 'no-referrer');
      assert.equal((await headClick.arrayBuffer()).byteLength, 0);
      const headOpen = await fetch(open, { method: 'HEAD', headers: { 'user-agent': 'LinkScanner/1.0' } });
      assert.equal(headOpen.status, 200);
      assert.equal(headOpen.headers.get('content-type'), 'image/gif');
      assert.equal((await headOpen.arrayBuffer()).byteLength, 0);
      // Recording is done before the answer: what HEAD recorded would be there now.
      assert.deepEqual(await recorded(id), { openedAt: null, clickedAt: null, events: [] });

      // And the reader's GET that follows is the first click and open, carrying its own user agent.
      const get = await fetch(click, { redirect: 'manual', headers: { 'user-agent': 'Reader/1.0' } });
      assert.equal(get.status, 302);
      const seen = await recorded(id);
      assert.notEqual(seen.clickedAt, null);
      assert.deepEqual(seen.events.map((e) => [e.type, e.user_agent]).sort(), [['clicked', 'Reader/1.0'], ['opened', 'Reader/1.0']]);
    });
  });

  describe('character references in a link', () => {
    it('are decoded as an HTML parser does, numeric and named, before the redirect is made', async () => {
      const id = await transmission();
      const href = 'https://example.com/p?a=1&#38;b=2&#x26;c=3&#X26;d&#128;&#0;&#10;e&amp=f&lt;g&AMP;h&#x27;i';
      const r = await fetch(clickUrlIn(rewrite(id, `<a href="${href}">go</a>`)), { redirect: 'manual' });
      assert.equal(r.status, 302);
      // &#128; is windows-1252's euro sign, &#0; U+FFFD, &#10; a line break the URL parser drops;
      // `&amp=` is not a reference in an attribute (a query parameter named amp).
      assert.equal(r.headers.get('location'), 'https://example.com/p?a=1&b=2&c=3&d%E2%82%AC%EF%BF%BDe&amp=f%3Cg&h%27i');
    });

    it('are decoded by the whole of HTML\'s table: every named reference, the legacy ones also without ";"', async () => {
      const id = await transmission();
      // &copy before `&` is a reference, &copy2 (a digit follows) and &bogus; are not.
      const href = 'https://example.com/a&nbsp;b/caf&eacute;?c=&copy&d=&copy2&e=&reg;&f=&frac12&g=&notin;&h=&bogus;&i=&Eacute';
      const r = await fetch(clickUrlIn(rewrite(id, `<a href="${href}">go</a>`)), { redirect: 'manual' });
      assert.equal(r.status, 302);
      assert.equal(r.headers.get('location'), 'https://example.com/a%C2%A0b/caf%C3%A9?c=%C2%A9&d=&copy2&e=%C2%AE&f=%C2%BD&g=%E2%88%89&h=&bogus;&i=%C3%89');
      const seen = await recorded(id);
      assert.deepEqual(seen.events.filter((e) => e.type === 'clicked').map((e) => e.url), [r.headers.get('location')]);
    });

    it('leave the ends of a link as a URL parser does: spaces and controls dropped, a no-break space kept', async () => {
      const id = await transmission();
      const location = async (href: string) => (await fetch(clickUrlIn(rewrite(id, `<a href="${href}">go</a>`)), { redirect: 'manual' })).headers.get('location');
      assert.equal(await location('&#32;\thttps://example.com/lead&#9;&#10; '), 'https://example.com/lead');
      assert.equal(await location('https://example.com/end\u00a0'), 'https://example.com/end%C2%A0');
      assert.equal(await location('https://example.com/end&nbsp;'), 'https://example.com/end%C2%A0');
      // A link that starts with a no-break space is relative (no scheme): left as written.
      assert.match(rewrite(id, '<a href="&nbsp;https://example.com/">x</a>'), /^<a href="&nbsp;https:\/\/example\.com\/">x<\/a><img /);
    });

    it('that decode to a line break never put one into a header', async () => {
      const id = await transmission();
      const r = await fetch(clickUrlIn(rewrite(id, '<a href="https://example.com/&#13;&#10;Set-Cookie:&#32;x=1">go</a>')), { redirect: 'manual' });
      assert.equal(r.status, 302);
      assert.equal(r.headers.get('location'), 'https://example.com/Set-Cookie:%20x=1');
      assert.equal(r.headers.get('set-cookie'), null);
    });
  });
});

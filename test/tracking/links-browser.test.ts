// A tracked link goes where the reader's browser would have gone (docs/tracking.md, "What changes in
// the HTML"): for links full of character references, named (HTML's whole table, the legacy names
// without ";", before "=" or a letter or digit), numeric, and spaces or controls at either end,
// the Location the real redirector answers is the URL Debian's chromium (driven by playwright-core)
// reads from the same <a href>. A link the browser reads as no http(s) URL is left as written.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { chromium, type Browser } from 'playwright-core';
import { applyTracking } from '../../src/delivery/tracking.ts';
import { trackingSigningKey } from '../../src/domain/tracking-token.ts';
import { startTestApp, type Seed, type TestApp } from '../helpers/app.ts';

const CHROMIUM = '/usr/bin/chromium';
const inCi = /^(1|true|yes)$/i.test(process.env.CI ?? '');
const missing = !fs.existsSync(CHROMIUM);
if (missing && inCi) throw new Error(`${CHROMIUM} is missing: .ci/run installs Debian's chromium`);

/** References in every position a link may hold them (each in a query value, then at both ends). */
const REFERENCES = [
  '&nbsp;', '&nbsp', '&nbspx', '&nbsp=', '&eacute;', '&eacute', '&Eacute', '&eacutex', '&copy', '&copy;', '&copy2', '&copy=', '&reg.', '&REG',
  '&not', '&notin;', '&noti', '&frac12', '&frac12;', '&frac123', '&sup1', '&sup2;', '&sup23', '&times', '&timesb;', '&szlig', '&yuml;', '&euro;',
  '&hellip;', '&ThickSpace;', '&NotEqualTilde;', '&acE;', '&bogus;', '&;', '& ', '&&amp;', '&amp;amp;', '&amp', '&ampx', '&amp=', '&AMP', '&AMP;',
  '&lt', '&LT;', '&lt=', '&gt-', '&quot', '&apos', '&apos;', '&#38', '&#x26', '&#X26;', '&#', '&#x', '&#;', '&#xZ', '&#128;', '&#x81;', '&#x9F',
  '&#0', '&#xD800;', '&#x110000;', '&#99999999999;', '&#x1F600;', '&#65a', '&#x41g', '&#x000000041;', '&#9;', '&#13;&#10;', '&#x7F;',
];

function links(): string[] {
  const out: string[] = [];
  for (const ref of REFERENCES) {
    out.push(`https://example.com/p?a=${ref}&b=1`, `https://example.com/${ref}x/${ref}`);
  }
  out.push('&#32;https://example.com/lead', ' \thttps://example.com/spaces\t ', 'https://example.com/end&#9;&#10;&#32;', 'https://example.com/nbsp\u00a0', 'https://example.com/nbsp&nbsp;');
  out.push('&nbsp;https://example.com/', 'https&colon;//example.com/colon', 'https:&sol;&sol;example.com/solidus', 'javascript&colon;alert(1)', 'HTTPS://EXAMPLE.COM/Upper');
  return out;
}

describe('tracked links, as a browser reads them', { skip: missing ? `${CHROMIUM} is not installed` : false }, () => {
  let t: TestApp;
  let seed: Seed;
  let browser: Browser;

  before(async () => {
    t = await startTestApp();
    seed = await t.seed();
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking'] });
  });
  after(async () => {
    await browser?.close();
    await t?.close();
  });

  it('redirects each link to the URL the browser follows, and leaves the ones it does not read as http(s) untracked', async () => {
    const reply = await t.call('send_message', {
      api_key: seed.projectKey,
      uid: 'links-browser',
      arguments: { recipients: ['ann@example.com'], headers: { from: 'a@example.com', subject: 'Hi' }, content: { 'text/html': '<p>hi</p>' }, deliver: false },
    });
    assert.equal(reply.status, 200, JSON.stringify(reply.body));
    const row = await t.app.services.store.db.selectFrom('transmissions').select('id').where('project_id', '=', seed.projectId).executeTakeFirstOrThrow();
    const target = { transmissionId: Number(row.id), publicUrl: t.url };
    const hrefs = links();

    // What the browser makes of each link: the URL it would open (http or https), else null.
    const page = await browser.newPage();
    const opened = await page.evaluate((list) => {
      return list.map((href) => {
        const holder = document.createElement('div');
        holder.innerHTML = `<a href="${href}">x</a>`;
        const a = holder.firstElementChild as HTMLAnchorElement;
        return a.protocol === 'http:' || a.protocol === 'https:' ? a.href : null;
      });
    }, hrefs);
    await page.close();

    const key = trackingSigningKey(t.app.services);
    let tracked = 0;
    for (let i = 0; i < hrefs.length; i++) {
      const html = `<a href="${hrefs[i]}">x</a>`;
      const rewritten = applyTracking(html, target, key);
      const expected = opened[i];
      if (expected === null) {
        assert.ok(rewritten.startsWith(`${html}<img `), `${JSON.stringify(hrefs[i])} is no http(s) link to the browser: left as written`);
        continue;
      }
      const click = /^<a href="([^"]*)"/.exec(rewritten)![1];
      assert.ok(click.startsWith(`${t.url}/t/c/`), `${JSON.stringify(hrefs[i])} is tracked (the browser opens ${expected})`);
      const r = await fetch(click, { redirect: 'manual' });
      assert.equal(r.status, 302);
      assert.equal(r.headers.get('location'), expected, `the link ${JSON.stringify(hrefs[i])}`);
      tracked++;
    }
    assert.ok(tracked > hrefs.length - 10, `${tracked} of ${hrefs.length} links tracked`);
  });
});

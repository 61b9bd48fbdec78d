// The dashboard in a real browser (Debian's chromium driven by playwright-core) with hostile and
// awkward text everywhere a sender or a user can put some: bidirectional controls (an unterminated
// RIGHT-TO-LEFT OVERRIDE in a subject, a display name, a filename, a template name, a suppression
// note, a mailbox label) stay inside their own text; very long unbroken text (a subject, an
// address, an SMTP reply, a note, a URL, a domain) wraps inside its card or table; every page fits
// a phone's width; the template editor says where its sample variables are not a JSON object.
// docs/dashboard.md, "Hostile text" and "How it is built".
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { chromium, type Browser, type Page } from 'playwright-core';
import { createUser } from '../../src/operations/users.ts';
import { startTestApp, type Seed, type TestApp } from '../helpers/app.ts';
import { reply, startSmtpPeer, type SmtpPeer } from '../helpers/smtp-peers.ts';

const CHROMIUM = '/usr/bin/chromium';
const inCi = /^(1|true|yes)$/i.test(process.env.CI ?? '');
const missing = !fs.existsSync(CHROMIUM);
if (missing && inCi) throw new Error(`${CHROMIUM} is missing: .ci/run installs Debian's chromium`);

const RLO = '\u202E';
const FILENAME = `invoice${RLO}fdp.exe`;
/** No space, no hyphen: nothing a line may break at. */
const LONG = (c: string, n: number) => c.repeat(n);
const LONG_SUBJECT = LONG('S', 300);
const LONG_ADDRESS = `${LONG('a', 64)}@${LONG('b', 55)}.${LONG('c', 55)}.${LONG('d', 55)}.example`;
const LONG_REPLY = `5.1.1 ${LONG('R', 400)}`;
const LONG_DOMAIN = `${LONG('m', 60)}.${LONG('n', 60)}.${LONG('o', 60)}.example`;
const LONG_EMAIL = `${LONG('u', 60)}@${LONG('v', 60)}.${LONG('w', 60)}.example`;
/** A header value of 900 characters in words: it must wrap beside its name, not squeeze it. */
const LONG_HEADER_VALUE = 'note '.repeat(180).trim();

/**
 * Static text of the page (not inside an element of user text) laid out against the order it is
 * written in: characters on one line that go right to left. A bidirectional control that escapes
 * its value turns the text after it around.
 */
function reorderedText(): string[] {
  const found: string[] = [];
  const main = document.querySelector('main')!;
  const walker = document.createTreeWalker(main, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode() as Text | null; n; n = walker.nextNode() as Text | null) {
    if (n.parentElement?.closest('bdi, textarea, select, option')) continue;
    // the hostile text itself: its own order is its author's business
    if (/[\u0590-\u08ff\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/.test(n.data)) continue;
    let prev: DOMRect | null = null;
    for (let i = 0; i < n.data.length; i++) {
      if (/\s/.test(n.data[i])) continue;
      const range = document.createRange();
      range.setStart(n, i);
      range.setEnd(n, i + 1);
      const rect = range.getBoundingClientRect();
      if (rect.width === 0) continue;
      if (prev && Math.abs(prev.top - rect.top) < 2 && rect.left < prev.left - 0.5) {
        found.push(n.data.trim().slice(0, 80));
        break;
      }
      prev = rect;
    }
  }
  return found;
}

/** Elements whose content reaches past their own box, or past main's, outside a box that scrolls on purpose. */
function overflowing(): string[] {
  // (no inner functions: the page runs this as written, without the test runner's helpers)
  const found: string[] = [];
  const main = document.querySelector('main')!;
  const limit = main.getBoundingClientRect().right - parseFloat(getComputedStyle(main).paddingRight) + 1;
  for (const el of main.querySelectorAll('*')) {
    // a field scrolls its own text
    if (el.closest('iframe, input, select, textarea, .visually-hidden')) continue;
    let inScrollBox = false;
    for (let box = el.parentElement; box && box !== main; box = box.parentElement) {
      if (/auto|scroll/.test(getComputedStyle(box).overflowX)) inScrollBox = true;
    }
    if (inScrollBox) continue;
    const rect = el.getBoundingClientRect();
    const name = `${el.tagName.toLowerCase()}${el.className ? `.${String(el.className).split(' ')[0]}` : ''}: ${(el.textContent ?? '').trim().slice(0, 40)}`;
    if (rect.width > 0 && rect.right > limit) found.push(`${name} ends at ${Math.round(rect.right)} > ${Math.round(limit)}`);
    else if (!/auto|scroll/.test(getComputedStyle(el).overflowX) && el.clientWidth > 0 && el.scrollWidth > el.clientWidth + 1) {
      found.push(`${name} holds ${el.scrollWidth} > ${el.clientWidth}`);
    }
  }
  return found;
}

describe('dashboard with hostile and long text, in a browser', { skip: missing ? `${CHROMIUM} is not installed` : false }, () => {
  let t: TestApp;
  let peer: SmtpPeer;
  let seed: Seed;
  let browser: Browser;
  let page: Page;
  let hostileId: number;
  let longId: number;
  const pages: string[] = [];

  before(async () => {
    peer = await startSmtpPeer({
      starttls: false,
      rcpt: (to) => (to.startsWith('a') && to.length > 200 ? reply(550, LONG_REPLY) : null),
      acceptText: (n) => `2.0.0 Ok ${LONG('Q', 300)} queued as ${n}`,
    });
    t = await startTestApp({ config: { workers: 2, transportMap: [peer.transportFor('*')], allowPrivateWebhooks: true } });
    seed = await t.seed('Acme');
    const email = 'ops@acme.example';
    const { password } = await createUser(t.app.services, { accountUid: seed.accountUid, email });
    await createUser(t.app.services, { accountUid: seed.accountUid, email: LONG_EMAIL });

    const ok = (r: { status: number; body: unknown }) => {
      assert.equal(r.status, 200, JSON.stringify(r.body).slice(0, 500));
      return r.body as { data: Record<string, { id: number }> };
    };
    const account = (method: string, args: Record<string, unknown>) => t.call(method, { api_key: seed.accountKey, arguments: args }).then(ok);
    const project = (method: string, args: Record<string, unknown>) => t.call(method, { api_key: seed.projectKey, arguments: args }).then(ok);
    const hookUid = ((await account('create_webhook', { url: `http://127.0.0.1:9/${LONG('p', 300)}` })).data.webhook as unknown as { uid: string }).uid;
    await account('create_domain', { name: LONG_DOMAIN });
    await account('create_mailbox', { label: `Support ${RLO}xoni ${LONG('L', 150)}`, host: '127.0.0.1', port: 9, tls: false, username: LONG_EMAIL, password: 'x', postback_url: `http://127.0.0.1:9/${LONG('q', 300)}` });
    await project('create_template', { slug: 'receipt', name: `Receipt ${RLO}tpiecer ${LONG('T', 150)}`, subject: LONG_SUBJECT });
    await project('add_to_suppression_list', { addresses: [LONG_ADDRESS.replace(/^a/, 'z')], message: `Asked ${RLO}ton od ${LONG('N', 400)}` });
    hostileId = (
      await project('send_message', {
        recipients: [`"Eve ${RLO}evE" <eve@customer.example>`, 'bob@customer.example'],
        headers: { subject: `Your ${RLO}eciovni is ready`, from: `"Billing ${RLO}gnilliB" <billing@acme.example>` },
        content: { 'text/plain': `Hello ${RLO}olleh` },
        attachments: { [FILENAME]: { content_type: 'application/pdf', content: Buffer.from('%PDF-1.4').toString('base64') } },
      })
    ).data.message.id;
    longId = (
      await project('send_message', {
        recipients: [LONG_ADDRESS, `${LONG('k', 64)}@customer.example`],
        headers: { subject: LONG_SUBJECT, from: 'billing@acme.example', 'X-Long': LONG('H', 300), 'X-Report-Note': LONG_HEADER_VALUE },
        content: { 'text/plain': LONG('t', 500) },
        attachments: { [`${LONG('f', 250)}.pdf`]: { content_type: 'application/pdf', content: Buffer.from('%PDF-1.4').toString('base64') } },
      })
    ).data.message.id;
    await peer.waitForReceived(3, 20_000);

    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking'] });
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    page = await context.newPage();
    await page.goto(`${t.url}/login`);
    await page.getByLabel('Email').fill(email);
    await page.getByLabel('Password').fill(password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(`${t.url}/`);
    pages.push(
      '/',
      `/projects/${seed.projectUid}`,
      '/messages',
      `/messages/${hostileId}`,
      `/messages/${longId}`,
      '/domains',
      `/projects/${seed.projectUid}/keys`,
      '/suppressions',
      '/templates',
      '/templates/receipt',
      '/webhooks',
      `/webhooks/${encodeURIComponent(hookUid)}/remove`,
      `/webhooks/${encodeURIComponent(hookUid)}/rotate`,
      `/domains/${LONG_DOMAIN}/delete`,
      '/templates/receipt/delete',
      `/suppressions/remove?address=${encodeURIComponent(LONG_ADDRESS.replace(/^a/, 'z'))}`,
      `/projects/${seed.projectUid}/keys/rotate`,
      `/projects/${seed.projectUid}/settings`,
      '/mailboxes',
      '/users',
    );
  });

  after(async () => {
    await browser?.close();
    await t?.close();
    await peer?.close();
  });

  const visit = async (path: string) => {
    const response = await page.goto(`${t.url}${path}`);
    assert.equal(response?.status(), 200, path);
    await page.waitForLoadState('load');
  };

  it('keeps text with bidirectional controls inside itself on every page', async () => {
    // the attempts are on the page before it is read
    await visit(`/messages/${longId}`);
    await page.locator('li.attempt.failed').waitFor();
    for (const path of pages) {
      await visit(path);
      assert.deepEqual(await page.evaluate(reorderedText), [], `${path}: text after a value turned around`);
    }
    await visit(`/messages/${hostileId}`);
    assert.equal(await page.locator('.filename').innerText(), 'invoice[U+202E]fdp.exe', 'the override in a filename is shown, not obeyed');
    assert.ok((await page.title()).startsWith('\u2068Message '), 'the title isolates the message UID');
  });

  it('shows the From address in its own order whatever its display name holds', async () => {
    await visit(`/messages/${hostileId}`);
    const address = await page.evaluate(() => {
      const dt = [...document.querySelectorAll('dl.summary dt')].find((d) => d.textContent === 'From')!;
      const dd = dt.nextElementSibling!;
      const walker = document.createTreeWalker(dd, NodeFilter.SHOW_TEXT);
      for (let n = walker.nextNode() as Text | null; n; n = walker.nextNode() as Text | null) {
        const at = n.data.indexOf('billing@acme.example');
        if (at === -1) continue;
        // each character of the address laid out right of the one before it
        let prev = -Infinity;
        for (let i = at; i < at + 'billing@acme.example'.length; i++) {
          const range = document.createRange();
          range.setStart(n, i);
          range.setEnd(n, i + 1);
          const left = range.getBoundingClientRect().left;
          if (left < prev) return `reversed at "${n.data[i]}" (${n.data.length} characters in its text)`;
          prev = left;
        }
        return 'in order';
      }
      return 'not found';
    });
    assert.equal(address, 'in order', 'a RIGHT-TO-LEFT OVERRIDE in the display name turns the address around');
  });

  it('keeps each header name on one line beside a 900-character value', async () => {
    await visit(`/messages/${longId}`);
    const names = await page.evaluate(() =>
      [...document.querySelectorAll('.headers th, .headers dt')].map((dt) => {
        const range = document.createRange();
        range.selectNodeContents(dt);
        return { name: dt.textContent, lines: new Set([...range.getClientRects()].map((r) => Math.round(r.top))).size };
      }),
    );
    assert.ok(names.some((n) => n.name === 'X-Report-Note'), JSON.stringify(names));
    for (const n of names) assert.equal(n.lines, 1, `header ${n.name} is broken over ${n.lines} lines`);
  });

  it('wraps long unbroken text inside its card or table', async () => {
    for (const path of pages) {
      await visit(path);
      assert.deepEqual(await page.evaluate(overflowing), [], `${path}: text overflows its box`);
      assert.ok(await page.evaluate(() => document.scrollingElement!.scrollWidth <= window.innerWidth), `${path} scrolls sideways`);
    }
  });

  it('fits every page at phone width: only a table may scroll, inside its own box', async () => {
    await page.setViewportSize({ width: 375, height: 740 });
    try {
      for (const path of [...pages, '/templates/~new']) {
        await visit(path);
        assert.deepEqual(await page.evaluate(overflowing), [], `${path}: text overflows its box`);
        const widths = await page.evaluate(() => ({ page: document.scrollingElement!.scrollWidth, window: window.innerWidth }));
        assert.ok(widths.page <= widths.window, `${path}: the page is ${widths.page} px wide in a ${widths.window} px window`);
      }
    } finally {
      await page.setViewportSize({ width: 1280, height: 900 });
    }
  });

  it('says beside the sample variables when they are not a JSON object', async () => {
    await visit('/templates/receipt');
    const variables = page.getByLabel('Sample variables (JSON object, preview only)');
    assert.equal(await variables.getAttribute('aria-describedby'), 'err-variables');
    await variables.fill('{"name": ');
    await page.locator('#err-variables', { hasText: /not a JSON object/ }).waitFor({ timeout: 5_000 });
    await variables.fill('["Ada"]');
    await page.locator('#err-variables', { hasText: /not a JSON object/ }).waitFor({ timeout: 5_000 });
    await variables.fill('{"name": "Grace"}');
    await page.locator('#err-variables:empty').waitFor({ state: 'attached', timeout: 5_000 });
  });
});

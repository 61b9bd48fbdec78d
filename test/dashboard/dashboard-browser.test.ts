// The dashboard in a real browser (Debian's chromium driven by playwright-core), against a real
// Posthorn delivering to a local SMTP server: sign in, find a message sent through the API, open
// it and see the attempt the SMTP server answered, edit a template and watch the preview change,
// add a suppression, rotate a key. Markup and script in the subject, body, filename and recipient
// name never run (no dialog, no console line from them); a post without the CSRF token is refused;
// another account's message URL is not found. A reload of a page a form post answered (a new key,
// webhook secret or password) runs the form once (docs/dashboard.md, "Forms"); a webhook endpoint
// is removed after a confirmation, and so are a template, a suppression (with the keyboard alone), a
// domain and a message's waiting copies (without JavaScript); a project's settings are saved, and
// its sandbox mode shown.
//
// POSTHORN_DASHBOARD_SCREENSHOTS=docs/images also saves the screenshots docs/dashboard.md shows.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { chromium, type Browser, type Page } from 'playwright-core';
import { createUser } from '../../src/operations/users.ts';
import { startTestApp, type Seed, type TestApp } from '../helpers/app.ts';
import { startHttpSink } from '../helpers/http-sink.ts';
import { startSmtpPeer, type SmtpPeer } from '../helpers/smtp-peers.ts';

const CHROMIUM = '/usr/bin/chromium';
const SHOTS = process.env.POSTHORN_DASHBOARD_SCREENSHOTS ?? null;
const inCi = /^(1|true|yes)$/i.test(process.env.CI ?? '');
const missing = !fs.existsSync(CHROMIUM);
if (missing && inCi) throw new Error(`${CHROMIUM} is missing: .ci/run installs Debian's chromium`);

/** Every payload, if it ever ran, would open a dialog AND print this marker. */
const MARK = 'XSS-EXECUTED';
const js = (n: number) => `alert(${n});console.log('${MARK}-${n}')`;
const SUBJECT = `Invoice <script>${js(1)}</script><img src=x onerror="${js(2)}">`;
const HTML = `<h1>Your invoice</h1><p>Thanks!</p><script>${js(3)}</script><img src="x" onerror="${js(4)}"><img src="https://remote.example/track.gif" alt="remote">`;
const TEXT = `Plain part <script>${js(5)}</script>`;
const FILENAME = `<img src=x onerror="${js(6)}">.pdf`;
const NAME = `Eve' autofocus onfocus='${js(7).replace(/'/g, '')}`;

describe('dashboard in a browser', { skip: missing ? `${CHROMIUM} is not installed` : false }, () => {
  let t: TestApp;
  let peer: SmtpPeer;
  let seed: Seed;
  let other: Seed;
  let browser: Browser;
  let page: Page;
  let email: string;
  let password: string;
  const dialogs: string[] = [];
  const consoleLines: string[] = [];
  const requested: string[] = [];

  before(async () => {
    peer = await startSmtpPeer({ starttls: false });
    t = await startTestApp({ config: { workers: 2, transportMap: [peer.transportFor('*')], allowPrivateWebhooks: true } });
    seed = await t.seed('Acme');
    other = await t.seed('Other');
    email = 'ops@acme.example';
    ({ password } = await createUser(t.app.services, { accountUid: seed.accountUid, email }));
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking'] });
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    page = await context.newPage();
    page.on('dialog', (d) => {
      dialogs.push(d.message());
      void d.dismiss();
    });
    page.on('console', (m) => consoleLines.push(m.text()));
    page.on('request', (r) => requested.push(new URL(r.url()).pathname));
    page.on('pageerror', (e) => consoleLines.push(`pageerror: ${e.message}`));
  });

  after(async () => {
    await browser?.close();
    await t?.close();
    await peer?.close();
  });

  const shot = async (name: string, dark = false) => {
    if (!SHOTS) return;
    fs.mkdirSync(SHOTS, { recursive: true });
    // Charts pick their colours when drawn: a dark screenshot reloads the page in the dark scheme.
    if (dark) {
      await page.emulateMedia({ colorScheme: 'dark' });
      await page.reload();
      await page.waitForLoadState('load');
    }
    await page.screenshot({ path: path.join(SHOTS, `dashboard-${name}${dark ? '-dark' : ''}.png`), fullPage: false });
    if (dark) await page.emulateMedia({ colorScheme: 'light' });
  };

  const assertNothingRan = () => {
    assert.deepEqual(dialogs, [], 'no dialog opened');
    assert.deepEqual(consoleLines.filter((l) => l.includes(MARK)), [], 'no injected script ran');
  };

  it('signs in through the form', async () => {
    await page.goto(`${t.url}/messages`);
    assert.match(page.url(), /\/login\?next=%2Fmessages$/);
    await page.getByLabel('Email').fill(email);
    await page.getByLabel('Password').fill(password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(`${t.url}/messages`);
    assert.ok(await page.getByRole('heading', { name: 'Messages' }).isVisible());
    // The icon is in the page: no request for /favicon.ico, no failed load in the console.
    assert.ok(!requested.includes('/favicon.ico'), requested.join(' '));
    assert.deepEqual(consoleLines.filter((l) => /Failed to load resource/.test(l)), []);
  });

  it('finds a message sent through the API and shows the attempt the SMTP server answered', async () => {
    const sent = await t.call('send_message', {
      api_key: seed.projectKey,
      uid: 'invoice-42',
      arguments: {
        recipients: [`"${NAME}" <eve@customer.example>`],
        headers: { subject: SUBJECT, from: 'billing@acme.example' },
        content: { 'text/html': HTML, 'text/plain': TEXT },
        attachments: { [FILENAME]: { content_type: 'application/pdf', content: Buffer.from('%PDF-1.4').toString('base64') } },
      },
    });
    assert.equal(sent.status, 200, JSON.stringify(sent.body));
    await peer.waitForReceived(1, 20_000);
    for (let i = 0; i < 4; i++) {
      await t.call('send_message', {
        api_key: seed.projectKey,
        uid: `welcome-${i}`,
        arguments: { recipients: [`user${i}@customer.example`], headers: { subject: `Welcome aboard #${i}`, from: 'hello@acme.example' }, content: { 'text/plain': 'Hi' } },
      });
    }
    await peer.waitForReceived(5, 20_000);

    await page.goto(`${t.url}/messages`);
    await page.getByLabel('Recipient').fill('eve@customer');
    await page.getByRole('button', { name: 'Search' }).click();
    await page.waitForURL(/recipient=eve/);
    const link = page.getByRole('link', { name: /^Invoice/ });
    assert.equal(await link.count(), 1);
    await link.click();
    await page.waitForURL(new RegExp(`/messages/${sent.body.data.message.id}$`));
    assert.equal(page.url(), `${t.url}/messages/${sent.body.data.message.id}`.replace('http://127.0.0.1:0', t.url));
    const attempt = page.locator('li.attempt.sent');
    await attempt.waitFor();
    const text = await attempt.innerText();
    assert.match(text, /attempt: sent/);
    assert.match(text, /127\.0\.0\.1/);
    assert.match(text, /250/);
    assert.match(text, /\d+ ms/);
    // The subject, filename and recipient name are shown as text.
    assert.equal(await page.locator('dd.subject').innerText(), SUBJECT);
    assert.equal(await page.locator('.filename').innerText(), FILENAME);
    assert.ok((await page.locator('section.recipient h3').innerText()).includes(NAME));
    // The HTML part renders in its frame, scripts and remote images blocked.
    const frame = page.frameLocator('iframe.message-html');
    await frame.getByRole('heading', { name: 'Your invoice' }).waitFor();
    const remoteLoaded = await frame.locator('img[alt=remote]').evaluate((img: HTMLImageElement) => img.complete && img.naturalWidth > 0).catch(() => false);
    assert.equal(remoteLoaded, false);
    await page.locator('pre.text-part').waitFor();
    // Focus moves through the page without running the name's handler.
    for (let i = 0; i < 15; i++) await page.keyboard.press('Tab');
    assertNothingRan();
  });

  // The screenshots show an account of its own with ordinary mail (the hostile text above is for
  // the checks, not for the docs): delivered, scheduled and suppressed copies, a template, a
  // webhook endpoint answering, so the message page shows its timelines and webhook deliveries.
  it('takes the screenshots of docs/dashboard.md', { skip: SHOTS ? false : 'POSTHORN_DASHBOARD_SCREENSHOTS is not set' }, async () => {
    const shop = await t.seed('Northwind Outfitters');
    const sink = await startHttpSink();
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const main = page;
    const sentBefore = peer.received.length;
    try {
      const call = (method: string, args: Record<string, unknown>, key = shop.projectKey, uid?: string) =>
        t.call(method, { api_key: key, ...(uid ? { uid } : {}), arguments: args }).then((r) => {
          assert.equal(r.status, 200, `${method}: ${JSON.stringify(r.body).slice(0, 300)}`);
          return r.body.data;
        });
      await call('create_webhook', { url: `${sink.url}/hooks/posthorn`, events: ['delivered', 'failed', 'opened'] }, shop.accountKey);
      await call('create_template', { slug: 'order_shipped', name: 'Order shipped', subject: 'Your order {{order}} is on its way', from: 'Northwind Outfitters <orders@northwind.example>', html: '<h1>Good news, {{name}}!</h1><p>Order {{order}} left our warehouse today.</p>', text: 'Good news, {{name}}! Order {{order}} left our warehouse today.' });
      await call('add_to_suppression_list', { addresses: ['old.address@customer.example'], message: 'mailbox closed' });
      const people = ['Ann Lee <ann.lee@customer.example>', 'Bob Stone <bob.stone@customer.example>', 'Carla Diaz <carla@customer.example>'];
      let order = 1040;
      for (const person of people) {
        await call('send_message', { recipients: { [person]: { name: person.split(' ')[0], order: `#${++order}` } }, template: 'order_shipped' }, shop.projectKey, `order-${order}`);
      }
      await call('send_message', { recipients: ['old.address@customer.example'], headers: { subject: 'Your invoice for March', from: 'billing@northwind.example' }, content: { 'text/plain': 'Your invoice is attached.' } }, shop.projectKey, 'invoice-2026-03');
      await call('send_message', { recipients: ['ann.lee@customer.example', 'bob.stone@customer.example'], send_at: new Date(Date.now() + 86_400_000).toISOString(), headers: { subject: 'Spring sale starts tomorrow', from: 'news@northwind.example' }, content: { 'text/plain': 'Everything 20% off.' } }, shop.projectKey, 'spring-sale');
      const team = await call('send_message', {
        recipients: { 'Dana Fox <dana@partner.example>': { name: 'Dana' }, 'Eli Park <eli@partner.example>': { name: 'Eli' }, 'Fay Moss <fay@partner.example>': { name: 'Fay' } },
        headers: { subject: 'Quarterly stock report for {{name}}', from: 'Northwind Outfitters <reports@northwind.example>', 'Reply-To': 'buyers@northwind.example' },
        content: { 'text/html': '<h1>Stock report</h1><p>Hello {{name}}, the quarter in numbers is attached.</p>', 'text/plain': 'Hello {{name}}, the quarter in numbers is attached.' },
        attachments: { 'stock-report-q1.pdf': { content_type: 'application/pdf', content: Buffer.from('%PDF-1.4 report').toString('base64') } },
      }, shop.projectKey, 'stock-report-q1');
      // 3 orders and 3 reports reach the SMTP server; a delivered event each, and the suppressed
      // invoice's failed one, reach the endpoint.
      await peer.waitForReceived(sentBefore + 6, 20_000);
      await sink.waitFor(7, 30_000);

      const { password } = await createUser(t.app.services, { accountUid: shop.accountUid, email: 'ops@northwind.example' });
      page = await context.newPage();
      await page.goto(`${t.url}/login`);
      await page.getByLabel('Email').fill('ops@northwind.example');
      await page.getByLabel('Password').fill(password);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.waitForURL(`${t.url}/`);

      await page.goto(`${t.url}/messages/${team.message.id}`);
      await page.locator('li.attempt.sent').first().waitFor();
      await page.locator('#webhook-deliveries').waitFor();
      await shot('message');
      await shot('message', true);
      await page.setViewportSize({ width: 390, height: 844 });
      await shot('message-phone');
      await page.setViewportSize({ width: 1280, height: 900 });
      await page.goto(`${t.url}/messages`);
      await shot('messages');
      await shot('messages', true);
      await page.goto(`${t.url}/`);
      await page.locator('.chart canvas').first().waitFor();
      await shot('overview');
      await shot('overview', true);
      await page.goto(`${t.url}/suppressions/remove?project=${shop.projectUid}&address=old.address%40customer.example`);
      await page.getByRole('heading', { name: 'Remove a suppression' }).waitFor();
      await shot('confirm');
    } finally {
      page = main;
      await context.close();
      await sink.close();
    }
  });

  it('previews a template as it is edited, and saves it', async () => {
    await page.goto(`${t.url}/templates`);
    await page.getByRole('link', { name: 'New template' }).click();
    await page.getByLabel('Slug', { exact: true }).fill('receipt');
    await page.getByLabel('Subject', { exact: true }).fill('Receipt for {{name}}');
    await page.getByLabel('HTML part').fill('<h2>Hello {{name}}</h2><script>alert(9)</script>');
    const frame = page.frameLocator('#preview-frame');
    await frame.getByRole('heading', { name: 'Hello Ada' }).waitFor();
    await page.locator('#preview-subject', { hasText: 'Receipt for Ada' }).waitFor();
    await page.getByLabel('HTML part').fill('<h2>Thank you for your order, {{name}}</h2>');
    await frame.getByRole('heading', { name: 'Thank you for your order, Ada' }).waitFor();
    await page.getByLabel('Layout (parent template slug)').fill('no-such-layout');
    await page.locator('#err-parent', { hasText: 'no layout' }).waitFor();
    await page.getByLabel('Layout (parent template slug)').fill('');
    await page.locator('#err-parent:empty').waitFor({ state: 'attached' });
    await shot('template-editor');
    await page.getByRole('button', { name: 'Save' }).click();
    await page.waitForURL(/\/templates\?project=[^&]+$/);
    await page.getByRole('status').filter({ hasText: 'Template receipt saved.' }).waitFor();
    const api = await t.call('get_template', { api_key: seed.projectKey, arguments: { slug: 'receipt' } });
    assert.equal(api.status, 200, JSON.stringify(api.body));
    assert.ok(JSON.stringify(api.body.data).includes('Thank you for your order, {{name}}'));
    assertNothingRan();
  });

  it('adds a suppression', async () => {
    await page.goto(`${t.url}/suppressions`);
    await page.getByLabel('Add addresses (one a line)').fill('bounced@customer.example');
    await page.getByRole('button', { name: 'Add to the suppression list' }).click();
    await page.getByRole('cell', { name: 'bounced@customer.example', exact: true }).waitFor();
    const api = await t.call('get_suppression_list', { api_key: seed.projectKey });
    assert.ok('bounced@customer.example' in api.body.data);
  });

  it('rotates the project key; the new key works, the old one does not', async () => {
    await page.goto(`${t.url}/keys`);
    await page.getByRole('link', { name: 'Rotate the key…' }).click();
    await page.getByRole('heading', { name: 'Rotate the project key' }).waitFor();
    assert.equal((await t.call('get_project_info', { api_key: seed.projectKey })).status, 200, 'asking rotates nothing');
    await page.getByRole('button', { name: 'Rotate the key' }).click();
    const key = await page.getByLabel('New API key').inputValue();
    assert.ok(key.length > 20);
    assert.equal((await t.call('get_project_info', { api_key: seed.projectKey })).status, 401);
    assert.equal((await t.call('get_project_info', { api_key: key })).status, 200);
    seed.projectKey = key;
  });

  it('refuses a post without the CSRF token, and another account\'s message', async () => {
    const status = await page.evaluate(async (project) => {
      const res = await fetch('/suppressions/add', {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ project, addresses: 'forged@customer.example' }),
      });
      return res.status;
    }, seed.projectUid);
    assert.equal(status, 403);
    const theirs = await t.call('send_message', {
      api_key: other.projectKey,
      uid: 'private-1',
      arguments: { recipients: ['x@other.example'], headers: { subject: 'Private matter', from: 'a@other.example' }, content: { 'text/plain': 'x' } },
    });
    const response = await page.goto(`${t.url}/messages/${theirs.body.data.message.id}`);
    assert.equal(response?.status(), 404);
    assert.equal(await page.getByText('Private matter').count(), 0);
    assertNothingRan();
  });

  const alreadySubmitted = () => page.getByRole('alert').filter({ hasText: 'This form was already submitted' }).waitFor();

  it('a reload of the page showing a new key rotates nothing: the key shown keeps working', async () => {
    await page.goto(`${t.url}/projects/${seed.projectUid}/keys/rotate`);
    await page.getByRole('button', { name: 'Rotate the key' }).click();
    const key = await page.getByLabel('New API key').inputValue();
    await page.reload();
    await page.waitForURL(`${t.url}/projects/${seed.projectUid}/keys`);
    await alreadySubmitted();
    assert.equal(await page.getByLabel('New API key').count(), 0, 'no key is shown again');
    assert.equal((await t.call('get_project_info', { api_key: key })).status, 200, 'the key shown still works');
    seed.projectKey = key;
  });

  it('a reload after adding a webhook or a user adds nothing more', async () => {
    const url = 'http://127.0.0.1:9/hooks/reloaded';
    await page.goto(`${t.url}/webhooks`);
    await page.getByLabel('Endpoint URL').fill(url);
    await page.getByRole('button', { name: 'Add webhook' }).click();
    const secret = await page.getByLabel('Secret').inputValue();
    await page.reload();
    await page.waitForURL(`${t.url}/webhooks`);
    await alreadySubmitted();
    const hooks = (await t.call('list_webhooks', { api_key: seed.accountKey })).body.data.webhooks.filter((h: { url: string }) => h.url === url);
    assert.equal(hooks.length, 1, 'one endpoint: every event would otherwise be posted twice');
    const row = await t.app.services.store.db.selectFrom('webhooks').select('secret').where('uid', '=', hooks[0].uid).executeTakeFirstOrThrow();
    assert.equal(t.app.services.secrets.open(row.secret), secret);

    await page.goto(`${t.url}/users`);
    await page.getByLabel('Add a user: email').fill('reloaded@acme.example');
    await page.getByRole('button', { name: 'Add user' }).click();
    const password = await page.getByLabel('Password').inputValue();
    await page.reload();
    await page.waitForURL(`${t.url}/users`);
    await alreadySubmitted();
    const users = await t.app.services.store.db.selectFrom('dashboard_users').select('email').where('email', '=', 'reloaded@acme.example').execute();
    assert.equal(users.length, 1);
    const { signIn } = await import('../../src/operations/users.ts');
    await signIn(t.app.services, { email: 'reloaded@acme.example', password, clientAddress: '127.0.0.1' });
  });

  it('a reload after a form that redirects sends nothing again', async () => {
    await page.goto(`${t.url}/suppressions`);
    await page.getByLabel('Add addresses (one a line)').fill('reload@customer.example');
    await page.getByRole('button', { name: 'Add to the suppression list' }).click();
    await page.getByRole('status').filter({ hasText: 'Added: reload@customer.example' }).waitFor();
    // Taken off the list since: a submission sent again would put it back.
    await t.call('remove_from_suppression_list', { api_key: seed.projectKey, arguments: { addresses: ['reload@customer.example'] } });
    const methods: string[] = [];
    const seen = (r: { method(): string; url(): string }) => methods.push(`${r.method()} ${new URL(r.url()).pathname}`);
    page.on('request', seen);
    await page.reload();
    await page.waitForLoadState('load');
    page.off('request', seen);
    assert.ok(!methods.some((m) => m.startsWith('POST')), methods.join(', '));
    assert.ok(!('reload@customer.example' in ((await t.call('get_suppression_list', { api_key: seed.projectKey })).body.data ?? {})));
  });

  it('removes a webhook endpoint after a confirmation', async () => {
    const url = 'http://127.0.0.1:9/hooks/to-remove';
    await t.call('create_webhook', { api_key: seed.accountKey, arguments: { url } });
    await page.goto(`${t.url}/webhooks`);
    await page.getByRole('link', { name: `Remove ${url}` }).click();
    await page.getByRole('heading', { name: 'Remove a webhook' }).waitFor();
    const listed = async () => (await t.call('list_webhooks', { api_key: seed.accountKey })).body.data.webhooks.some((h: { url: string }) => h.url === url);
    assert.equal(await listed(), true, 'the confirmation page removes nothing');
    await page.getByRole('button', { name: 'Remove the endpoint' }).click();
    await page.waitForURL(`${t.url}/webhooks`);
    await page.getByRole('status').filter({ hasText: `Removed: ${url}` }).waitFor();
    assert.equal(await listed(), false);
    assert.equal(await page.getByRole('cell', { name: url, exact: true }).count(), 0);
  });

  /** Tabs from the top of the page to the element named so, as a keyboard user does (at most 60 stops). */
  const tabTo = async (name: string) => {
    await page.locator('body').focus();
    for (let i = 0; i < 60; i++) {
      await page.keyboard.press('Tab');
      const focused = await page.evaluate(() => (document.activeElement?.textContent ?? '').trim());
      if (focused === name) return;
    }
    assert.fail(`${name} is not reached with the Tab key`);
  };

  it('asks before deleting a template or removing a suppression, with the keyboard alone', async () => {
    await page.goto(`${t.url}/templates/receipt?project=${seed.projectUid}`);
    await tabTo('Delete template receipt…');
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'Delete a template' }).waitFor();
    assert.match(await page.locator('section.confirm').innerText(), /Delete the template receipt .*This cannot be undone/s);
    assert.equal((await t.call('get_template', { api_key: seed.projectKey, arguments: { slug: 'receipt' } })).status, 200, 'asking deletes nothing');
    await tabTo('Delete the template');
    await page.keyboard.press('Enter');
    await page.waitForURL(`${t.url}/templates?project=${seed.projectUid}`);
    await page.getByRole('status').filter({ hasText: 'Template receipt deleted.' }).waitFor();
    assert.equal((await t.call('get_template', { api_key: seed.projectKey, arguments: { slug: 'receipt' } })).status, 404);

    // Cancel keeps what was asked about.
    await page.goto(`${t.url}/suppressions`);
    await tabTo('Remove…');
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'Remove a suppression' }).waitFor();
    await tabTo('Cancel');
    await page.keyboard.press('Enter');
    await page.waitForURL(`${t.url}/suppressions?project=${seed.projectUid}`);
    assert.ok('bounced@customer.example' in (await t.call('get_suppression_list', { api_key: seed.projectKey })).body.data);
    assertNothingRan();
  });

  it('asks before removing a domain or cancelling a message in a browser without JavaScript', async () => {
    await t.call('create_domain', { api_key: seed.accountKey, arguments: { name: 'mail.acme.example' } });
    const scheduled = await t.call('send_message', {
      api_key: seed.projectKey,
      uid: 'newsletter-later',
      arguments: { recipients: ['ann@customer.example', 'bob@customer.example'], send_at: new Date(Date.now() + 86_400_000).toISOString(), headers: { subject: 'Our spring newsletter', from: 'news@acme.example' }, content: { 'text/plain': 'Spring!' } },
    });
    assert.equal(scheduled.status, 200, JSON.stringify(scheduled.body));
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, javaScriptEnabled: false });
    await context.addCookies(await page.context().cookies());
    const plain = await context.newPage();
    try {
      await plain.goto(`${t.url}/domains`);
      await plain.getByRole('link', { name: 'Remove mail.acme.example' }).click();
      await plain.getByRole('heading', { name: 'Remove a sending domain' }).waitFor();
      const domains = async () => (await t.call('list_domains', { api_key: seed.accountKey })).body.data.domains.map((d: { name: string }) => d.name);
      assert.deepEqual(await domains(), ['mail.acme.example'], 'asking removes nothing');
      await plain.getByRole('button', { name: 'Remove the domain' }).click();
      await plain.waitForURL(`${t.url}/domains`);
      await plain.getByRole('status').filter({ hasText: 'Removed mail.acme.example.' }).waitFor();
      assert.deepEqual(await domains(), []);

      await plain.goto(`${t.url}/messages/${scheduled.body.data.message.id}`);
      await plain.getByRole('link', { name: 'Cancel the 2 copies not sent yet…' }).click();
      await plain.getByRole('heading', { name: 'Cancel a message' }).waitFor();
      await plain.getByRole('button', { name: 'Cancel the 2 copies' }).click();
      await plain.getByRole('status').filter({ hasText: 'Cancelled 2 copies' }).waitFor();
      const report = await t.call('get_message_transmissions', { api_key: seed.projectKey, arguments: { uid: 'newsletter-later' } });
      assert.deepEqual(Object.values(report.body.data.transmissions).map((c) => (c as { result_code: string }).result_code), ['CANCELLED', 'CANCELLED']);
    } finally {
      await context.close();
    }
  });

  it('turns sandbox mode on in the project settings, the refusal beside its field first; the overview then says so', async () => {
    await page.goto(`${t.url}/`);
    assert.equal(await page.locator('.badge.sandbox').count(), 0);
    await page.getByRole('link', { name: 'Settings' }).first().click();
    await page.getByLabel('Sandbox').check();
    await page.getByLabel('Default From').fill('not an address');
    await page.getByRole('button', { name: 'Save settings' }).click();
    await page.locator('#err-default_from', { hasText: 'must be one address' }).waitFor();
    assert.equal(await page.getByLabel('Sandbox').isChecked(), true, 'what was ticked is kept');
    assert.equal((await t.call('get_project', { api_key: seed.accountKey, arguments: { uid: seed.projectUid } })).body.data.project.settings.sandbox, false);
    await page.getByLabel('Default From').fill('Acme <hello@acme.example>');
    await page.getByRole('button', { name: 'Save settings' }).click();
    await page.getByRole('status').filter({ hasText: 'The project is in sandbox mode' }).waitFor();
    const settings = (await t.call('get_project', { api_key: seed.accountKey, arguments: { uid: seed.projectUid } })).body.data.project.settings;
    assert.equal(settings.sandbox, true);
    assert.equal(settings.default_from, 'Acme <hello@acme.example>');
    await page.goto(`${t.url}/`);
    assert.ok(await page.locator('.badge.sandbox').first().isVisible());
    assert.match(await page.locator('.notice.sandbox').first().innerText(), /Sandbox mode/);
    await page.goto(`${t.url}/messages`);
    assert.ok(await page.locator('.notice.sandbox').isVisible());
    assertNothingRan();
  });
});

// The dashboard in a real browser (Debian's chromium driven by playwright-core), against a real
// Posthorn delivering to a local SMTP server: sign in, find a message sent through the API, open
// it and see the attempt the SMTP server answered, edit a template and watch the preview change,
// add a suppression, rotate a key. Markup and script in the subject, body, filename and recipient
// name never run (no dialog, no console line from them); a post without the CSRF token is refused;
// another account's message URL is not found. A reload of a page a form post answered (a new key,
// webhook secret or password) runs the form once (docs/dashboard.md, "Forms"); a webhook endpoint
// is removed after a confirmation; a project's settings are saved, and its sandbox mode shown.
//
// POSTHORN_DASHBOARD_SCREENSHOTS=docs/images also saves the screenshots docs/dashboard.md shows.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { chromium, type Browser, type Page } from 'playwright-core';
import { createUser } from '../../src/operations/users.ts';
import { startTestApp, type Seed, type TestApp } from '../helpers/app.ts';
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
    await shot('message');
    await shot('message', true);
    if (SHOTS) {
      await page.setViewportSize({ width: 390, height: 844 });
      await shot('message-phone');
      await page.setViewportSize({ width: 1280, height: 900 });
    }
    await page.goto(`${t.url}/messages`);
    await shot('messages');
    await shot('messages', true);
    await page.goto(`${t.url}/`);
    await page.locator('.chart canvas').first().waitFor();
    await shot('overview');
    await shot('overview', true);
    assertNothingRan();
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
    await page.getByLabel('HTML part').fill('<h2>Goodbye {{name}}</h2>');
    await frame.getByRole('heading', { name: 'Goodbye Ada' }).waitFor();
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
    assert.ok(JSON.stringify(api.body.data).includes('Goodbye {{name}}'));
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
    await page.goto(`${t.url}/keys`);
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

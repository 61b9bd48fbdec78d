// In chromium (playwright-core, Debian's /usr/bin/chromium): the message list's live refresh keeps
// keyboard focus on the same row when new rows arrive, and every time shown is labelled UTC, the
// overview's charts drawn in UTC whatever the browser's own zone (docs/dashboard.md, "Times").
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { chromium, type Browser, type Page } from 'playwright-core';
import { createUser } from '../../src/operations/users.ts';
import { startTestApp, type Seed, type TestApp } from '../helpers/app.ts';

const CHROMIUM = '/usr/bin/chromium';
const missing = !fs.existsSync(CHROMIUM);

describe('the message list and the overview in a browser', { skip: missing ? `${CHROMIUM} is not installed` : false }, () => {
  let t: TestApp;
  let seed: Seed;
  let browser: Browser;
  let page: Page;
  const errors: string[] = [];

  const send = async (uid: string) => {
    const r = await t.call('send_message', { api_key: seed.projectKey, uid, arguments: { recipients: [`${uid}@example.test`], headers: { subject: `Subject ${uid}`, from: 'a@acme.example' }, content: { 'text/plain': 'Hi' } } });
    assert.equal(r.status, 200, JSON.stringify(r.body));
  };

  before(async () => {
    t = await startTestApp();
    seed = await t.seed('Live');
    const email = 'live@acme.example';
    const { password } = await createUser(t.app.services, { accountUid: seed.accountUid, email });
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking'] });
    // A browser far from UTC: what it shows must not follow its own zone.
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, timezoneId: 'Asia/Kathmandu' });
    page = await context.newPage();
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(`${t.url}/login`);
    await page.getByLabel('Email').fill(email);
    await page.getByLabel('Password').fill(password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(`${t.url}/`);
  });
  after(async () => {
    await browser?.close();
    await t?.close();
  });

  it('keeps keyboard focus on the same row when the refresh brings new rows', async () => {
    for (const uid of ['first', 'second', 'third']) await send(uid);
    await page.goto(`${t.url}/messages?project=${seed.projectUid}`);
    const link = page.getByRole('link', { name: 'Subject second' });
    await link.focus();
    const key = await page.evaluate(() => document.activeElement?.closest('tr')?.getAttribute('data-key'));
    assert.ok(key, 'the focused link is in a keyed row');
    await send('fourth');
    // The next refresh brings the new row (an event awaited, bounded by playwright's timeout).
    await page.waitForResponse((r) => r.url().includes('/messages/rows'), { timeout: 20_000 });
    await page.getByRole('link', { name: 'Subject fourth' }).waitFor({ timeout: 20_000 });
    const focused = await page.evaluate(() => ({ tag: document.activeElement?.tagName, text: document.activeElement?.textContent, key: document.activeElement?.closest('tr')?.getAttribute('data-key') }));
    assert.deepEqual(focused, { tag: 'A', text: 'Subject second', key }, 'the same row\'s link keeps the focus');
    await page.keyboard.press('Shift+Tab');
    const before = await page.evaluate(() => document.activeElement?.closest('tr')?.getAttribute('data-key'));
    assert.notEqual(before, await page.evaluate(() => document.querySelector('tbody[data-live] tr')?.getAttribute('data-key')), 'Shift+Tab moves from that row, not from the top');
    assert.deepEqual(errors, []);
  });

  it('labels every time UTC: the table, the day filters, the overview and its charts', async () => {
    await page.goto(`${t.url}/messages?project=${seed.projectUid}`);
    const accepted = await page.locator('tbody[data-live] tr').first().locator('td').first().innerText();
    assert.match(accepted, /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC$/);
    assert.ok(await page.getByLabel('From day (UTC)').isVisible());
    assert.ok(await page.getByLabel('Until day (UTC)').isVisible());
    await page.goto(`${t.url}/`);
    await page.locator('.chart .u-axis').first().waitFor();
    assert.match(await page.locator('.project-overview').first().innerText(), /Hours and days in UTC\. Delivered counts, as get_metrics does, .*deliver: false \(NOT_SENT\)/s);
    assert.equal(await page.locator('.chart .u-legend .u-label').first().innerText(), 'Time (UTC)', 'the legend says the zone');
    // The legend names the bucket under the pointer: a whole UTC hour (Kathmandu is UTC+05:45, so
    // its own clock would end in :45).
    const over = page.locator('.chart .u-over').first();
    const box = (await over.boundingBox())!;
    await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
    const shown = await page.locator('.chart .u-legend .u-series').first().locator('.u-value').innerText();
    assert.match(shown, /:00/, `the legend's time ${shown} is UTC`);
    assert.deepEqual(errors, []);
  });
});

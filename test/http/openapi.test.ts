// The generated OpenAPI document (GET /openapi.json) and its offline reference page (GET /docs),
// against the real server; the page is rendered by Debian's chromium with every request outside
// the server refused.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { Validator } from '@seriousme/openapi-schema-validator';
import { chromium } from 'playwright-core';
import { API_STATUSES } from '../../src/domain/errors.ts';
import { EVENT_KINDS, EVENT_SCHEMAS } from '../../src/domain/events.ts';
import { ALL_METHODS } from '../../src/http/api/methods/index.ts';
import { checkMethodData } from '../helpers/method-data.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';

const CHROMIUM = '/usr/bin/chromium';
const inCi = /^(1|true|yes)$/i.test(process.env.CI ?? '');
if (!fs.existsSync(CHROMIUM) && inCi) throw new Error(`${CHROMIUM} is missing: .ci/run installs Debian's chromium`);

describe('OpenAPI document and reference page', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp();
  });
  after(() => t.close());

  it('serves a document that validates as OpenAPI 3.1', async () => {
    const res = await fetch(`${t.url}/openapi.json`);
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^application\/json/);
    const doc = await res.json();
    assert.equal(doc.openapi, '3.1.0');
    const result = await new Validator().validate(doc);
    assert.equal(result.valid, true, JSON.stringify(result.errors, null, 1)?.slice(0, 2000));
  });

  it('has every method as POST /v.1.1/<name> with its arguments, data and every error status', async () => {
    const doc = await (await fetch(`${t.url}/openapi.json`)).json();
    assert.deepEqual(Object.keys(doc.paths).sort(), ALL_METHODS.map((m) => `/v.1.1/${m.name}`).sort());
    const codes = [...new Set(Object.values(API_STATUSES).filter((c) => c !== 200))].map(String).sort();
    for (const m of ALL_METHODS) {
      const op = doc.paths[`/v.1.1/${m.name}`].post;
      assert.equal(op.operationId, m.name);
      const body = op.requestBody.content['application/json'].schema;
      assert.deepEqual(body.properties.arguments, JSON.parse(JSON.stringify(m.args)), m.name);
      assert.deepEqual(op.responses['200'].content['application/json'].schema.properties.data, JSON.parse(JSON.stringify(m.data)), m.name);
      assert.deepEqual(Object.keys(op.responses).filter((c) => c !== '200').sort(), codes, m.name);
    }
    assert.ok(doc.paths['/v.1.1/send_message'].post.responses['429'].headers['Retry-After']);
    assert.match(doc.paths['/v.1.1/send_message'].post.responses['503'].description, /service_unavailable/);
  });

  it('describes every webhook event kind', async () => {
    const doc = await (await fetch(`${t.url}/openapi.json`)).json();
    assert.deepEqual(Object.keys(doc.webhooks).sort(), [...EVENT_KINDS].sort());
    for (const event of EVENT_KINDS) {
      const schema = doc.webhooks[event].post.requestBody.content['application/json'].schema;
      assert.deepEqual(schema, JSON.parse(JSON.stringify(EVENT_SCHEMAS[event])), event);
    }
  });

  it('the test helper refuses an ok answer whose data does not match the method schema', () => {
    const ok = (data: unknown) => ({ response: { status: 'ok', uid: null }, data });
    assert.doesNotThrow(() => checkMethodData('/v.1.1/get_method_list', 200, ok({ methods: 'a, b' })));
    assert.throws(() => checkMethodData('/v.1.1/get_method_list', 200, ok({ methods: 3 })), /get_method_list.*\/methods/);
    assert.throws(() => checkMethodData('/v.1.1/send_message.json', 200, ok({ message: { id: '1', url: 'x' } })), /send_message/);
    // Errors are not data: they are not checked against it.
    assert.doesNotThrow(() => checkMethodData('/v.1.1/send_message', 406, { response: { status: 'call_error' } }));
  });

  it('/docs is a page of our own scripts under a strict Content-Security-Policy', async () => {
    const res = await fetch(`${t.url}/docs`);
    assert.equal(res.status, 200);
    const csp = res.headers.get('content-security-policy') ?? '';
    assert.match(csp, /default-src 'none'/);
    assert.match(csp, /script-src 'self'(;|$)/);
    const html = await res.text();
    const scripts = [...html.matchAll(/<script([^>]*)>([\s\S]*?)<\/script>/g)];
    assert.ok(scripts.length >= 2);
    for (const [, attrs, body] of scripts) {
      assert.equal(body.trim(), '', 'no inline script');
      const src = /src="([^"]+)"/.exec(attrs)?.[1] ?? '';
      assert.match(src, /^\/docs\//, 'scripts come from this server');
      const asset = await fetch(t.url + src);
      assert.equal(asset.status, 200, src);
      assert.match(asset.headers.get('content-type') ?? '', /javascript/);
    }
    assert.equal((await fetch(`${t.url}/docs/swagger-ui-bundle.js.map`)).status, 404);
  });

  it('renders the reference offline in chromium, with no CSP violation and no request elsewhere', { skip: !fs.existsSync(CHROMIUM) && 'no /usr/bin/chromium' }, async () => {
    const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking'] });
    try {
      const page = await browser.newPage();
      const outside: string[] = [];
      const problems: string[] = [];
      await page.route('**/*', (route) => {
        const url = route.request().url();
        if (url.startsWith(t.url)) return route.continue();
        outside.push(url);
        return route.abort();
      });
      page.on('console', (msg) => {
        if (msg.type() === 'error') problems.push(msg.text());
      });
      page.on('pageerror', (error) => problems.push(String(error)));
      // Every CSP violation, reported by the page itself (injected through the browser, not the page).
      const violations: string[] = [];
      await page.exposeFunction('reportViolation', (text: string) => violations.push(text));
      await page.addInitScript(() => {
        document.addEventListener('securitypolicyviolation', (e) => (window as unknown as { reportViolation(t: string): void }).reportViolation(`${e.violatedDirective} ${e.blockedURI}`));
      });
      await page.goto(`${t.url}/docs`);
      await page.locator('.opblock-summary-path', { hasText: '/v.1.1/send_message' }).first().waitFor({ timeout: 30_000 });
      // One block per method and one per webhook event.
      await page.locator('.opblock-summary-path', { hasText: 'clicked' }).first().waitFor({ timeout: 10_000 });
      const shown = new Set((await page.locator('.opblock-summary-path').allTextContents()).map((text) => text.replace(/\u200b/g, '').trim()));
      assert.deepEqual([...shown].filter((p) => p.startsWith('/v.1.1/')).sort(), ALL_METHODS.map((m) => `/v.1.1/${m.name}`).sort());
      for (const event of EVENT_KINDS) assert.ok(shown.has(event), `${event} in ${[...shown].filter((p) => !p.startsWith('/')).join(',')}`);
      // Opening an operation renders its request schema and example (more of Swagger UI's styles).
      await page.locator('.opblock-summary', { hasText: '/v.1.1/send_message' }).first().click();
      await page.locator('.opblock-body').first().waitFor({ timeout: 10_000 });
      await page.locator('.opblock-body', { hasText: 'recipients' }).first().waitFor({ timeout: 10_000 });
      assert.deepEqual(outside, []);
      assert.deepEqual(violations, []);
      assert.deepEqual(problems.filter((p) => /Content Security Policy|Refused/i.test(p)), []);
    } finally {
      await browser.close();
    }
  });
});

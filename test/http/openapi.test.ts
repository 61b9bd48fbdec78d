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
import { API_TIME_PATTERN, ISO_TIME_PATTERN } from '../../src/http/api/data-schemas.ts';
import { ALL_METHODS, METHODS } from '../../src/http/api/methods/index.ts';
import { checkMethodData } from '../helpers/method-data.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';

const CHROMIUM = '/usr/bin/chromium';
const inCi = /^(1|true|yes)$/i.test(process.env.CI ?? '');
if (!fs.existsSync(CHROMIUM) && inCi) throw new Error(`${CHROMIUM} is missing: .ci/run installs Debian's chromium`);

type Schema = { [key: string]: any };

/** The format each time pattern stands for, as the descriptions write it. */
const TIME_FORMATS = new Map([
  [ISO_TIME_PATTERN, 'YYYY-MM-DDTHH:MM:SSZ'],
  [API_TIME_PATTERN, 'YYYY-MM-DD HH:MM:SS'],
]);

/** Every field of a schema named like a time (created_at, blocked_until), with the path to it. */
function timeFieldsOf(schema: Schema, at = ''): Array<{ path: string; schema: Schema }> {
  const found: Array<{ path: string; schema: Schema }> = [];
  for (const [name, s] of Object.entries((schema.properties ?? {}) as Record<string, Schema>)) {
    if (/_at$|_until$/.test(name)) found.push({ path: `${at}/${name}`, schema: s });
    else found.push(...timeFieldsOf(s, `${at}/${name}`));
  }
  for (const s of Object.values((schema.patternProperties ?? {}) as Record<string, Schema>)) found.push(...timeFieldsOf(s, `${at}/*`));
  if (schema.items) found.push(...timeFieldsOf(schema.items, `${at}/*`));
  for (const s of (schema.anyOf ?? schema.allOf ?? []) as Schema[]) found.push(...timeFieldsOf(s, at));
  return found;
}

/** The string member of a time field (they are all a string or null). */
const stringOf = (s: Schema): Schema => (s.anyOf ? (s.anyOf as Schema[]).find((m) => m.type === 'string') ?? {} : s);

/** Every time value of an answer, with the pattern its schema declares for it. */
function timeValuesOf(schema: Schema, value: unknown, at = ''): Array<{ path: string; value: unknown; pattern: string | undefined }> {
  if (value === null || typeof value !== 'object') return [];
  const found: Array<{ path: string; value: unknown; pattern: string | undefined }> = [];
  const members = (schema.anyOf ?? [schema]) as Schema[];
  for (const [key, v] of Object.entries(value)) {
    for (const m of members) {
      const field = m.properties?.[key] ?? (m.patternProperties ? Object.values(m.patternProperties)[0] : undefined) ?? (Array.isArray(value) ? m.items : undefined);
      if (!field) continue;
      if (/_at$|_until$/.test(key)) found.push({ path: `${at}/${key}`, value: v, pattern: stringOf(field).pattern });
      else found.push(...timeValuesOf(field, v, `${at}/${key}`));
      break;
    }
  }
  return found;
}

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
      // test_error always fails: it declares no success answer.
      if (m.name === 'test_error') {
        assert.equal(op.responses['200'], undefined);
        assert.ok(op.responses['500']);
        continue;
      }
      const ok = op.responses['200'].content['application/json'].schema;
      assert.deepEqual(ok.properties.data, JSON.parse(JSON.stringify(m.data)), m.name);
      // The envelope's response: status, uid and the method's own fields (message_delivery_status's delivery_status).
      assert.deepEqual(Object.keys(ok.properties.response.properties), ['status', 'uid', ...Object.keys(m.response?.properties ?? {})], m.name);
      assert.deepEqual(Object.keys(op.responses).filter((c) => c !== '200').sort(), codes, m.name);
    }
    assert.ok(doc.paths['/v.1.1/send_message'].post.responses['429'].headers['Retry-After']);
    assert.match(doc.paths['/v.1.1/send_message'].post.responses['503'].description, /service_unavailable/);
    assert.deepEqual(doc.paths['/v.1.1/message_delivery_status'].post.responses['200'].content['application/json'].schema.properties.response.required, ['status', 'uid', 'delivery_status']);
    // Ranges are said in words ("at least 1", "1 to 65,535"), never with an infinity sign.
    assert.doesNotMatch(JSON.stringify(doc), /∞/);
  });

  it('every time field declares the format it is answered in, and its description says that format', () => {
    const wrong: string[] = [];
    for (const m of ALL_METHODS) {
      for (const { path, schema } of timeFieldsOf(JSON.parse(JSON.stringify(m.data)))) {
        const string = stringOf(schema);
        const format = TIME_FORMATS.get(string.pattern);
        if (!format) wrong.push(`${m.name} ${path}: no time pattern (${JSON.stringify(string.pattern)})`);
        else if (!String(string.description ?? '').includes(format) || String(string.description).includes(format === 'YYYY-MM-DD HH:MM:SS' ? 'ISO' : 'YYYY-MM-DD HH')) wrong.push(`${m.name} ${path}: "${string.description}" does not say ${format}`);
      }
    }
    assert.deepEqual(wrong, []);
  });

  it('the report methods answer each time in the format their schema declares', async () => {
    const seed = await t.seed('Times');
    const call = async (method: string, args: Record<string, unknown> = {}) => {
      const r = await t.call(method, { api_key: seed.projectKey, arguments: args });
      assert.equal(r.status, 200, `${method}: ${JSON.stringify(r.body)}`);
      return r.body.data;
    };
    const soon = new Date(Date.now() + 3_600_000).toISOString().slice(0, 19) + 'Z';
    await call('send_message', { recipients: ['a@null.postageapp.com', 'b@example.test'], content: 'x', send_at: soon });
    await t.call('send_message', { api_key: seed.projectKey, uid: 'times-2', arguments: { recipients: 'c@null.postageapp.com', content: 'x' } });
    const checked = new Set<string>();
    for (const [method, args] of [
      ['get_messages', {}],
      ['get_message_transmissions', { uid: 'times-2' }],
      ['messages_history', {}],
      ['messages_history_detailed', {}],
    ] as const) {
      const data = await call(method, args);
      const times = timeValuesOf(JSON.parse(JSON.stringify(METHODS.get(method)!.data)), data);
      for (const { path, value, pattern } of times) {
        if (value === null) continue;
        assert.ok(pattern, `${method} ${path}: no declared format`);
        assert.match(String(value), new RegExp(pattern), `${method} ${path}`);
        checked.add(`${method} ${path.replace(/^\/[^/]+/, '/*')}`);
      }
    }
    // Each method answered at least one time (get_messages its created_at, will_purge_at and send_at).
    for (const method of ['get_messages', 'get_message_transmissions', 'messages_history', 'messages_history_detailed']) {
      assert.ok([...checked].some((c) => c.startsWith(`${method} `)), `${method}: no time checked in ${[...checked].join(', ')}`);
    }
    for (const field of ['created_at', 'will_purge_at', 'send_at']) assert.ok(checked.has(`get_messages /*/${field}`), `get_messages ${field}: ${[...checked].join(', ')}`);
  });

  it('has an example request per method, valid against its schema, and names the top-level fields each reads', async () => {
    const doc = await (await fetch(`${t.url}/openapi.json`)).json();
    for (const m of ALL_METHODS) {
      const media = doc.paths[`/v.1.1/${m.name}`].post.requestBody.content['application/json'];
      assert.ok(media.example, `${m.name}: no example`);
      assert.equal(typeof media.example.api_key, 'string', m.name);
      assert.doesNotThrow(() => METHODS.get(m.name)!.checkArgs(media.example.arguments ?? {}), m.name);
    }
    const send = doc.paths['/v.1.1/send_message'].post.requestBody.content['application/json'].schema.properties;
    assert.deepEqual(Object.keys(send), ['api_key', 'uid', 'recipient_override', 'arguments']);
    assert.match(send.uid.description, /names the message/);
    assert.match(doc.paths['/v.1.1/get_message_transmissions'].post.requestBody.content['application/json'].schema.properties.uid.description, /looked up/);
    assert.ok(doc.paths['/v.1.1/messages_history'].post.requestBody.content['application/json'].schema.properties.from);
  });

  it('serves the reference page at /docs/ too, with "Try it out" enabled for POST', async () => {
    const res = await fetch(`${t.url}/docs/`);
    assert.equal(res.status, 200);
    assert.match(await res.text(), /swagger-ui-bundle\.js/);
    const init = await (await fetch(`${t.url}/docs/init.js`)).text();
    assert.match(init, /supportedSubmitMethods: \['post'\]/);
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
    // The envelope's own fields beside status and uid are declared too (message_delivery_status's).
    const status = (data: unknown, response: Record<string, unknown>) => ({ response: { status: 'ok', uid: null, ...response }, data });
    assert.doesNotThrow(() => checkMethodData('/v.1.1/message_delivery_status', 200, status({ delivery_status: [] }, { delivery_status: 'queued' })));
    assert.throws(() => checkMethodData('/v.1.1/message_delivery_status', 200, status({ delivery_status: [] }, { delivery_status: 'lost' })), /response fields/);
    assert.throws(() => checkMethodData('/v.1.1/get_method_list', 200, status({ methods: 'a' }, { extra: 1 })), /does not declare: extra/);
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
      // "Try it out" sends the edited example to this server and shows its live answer.
      const seed = await t.seed('Try it out');
      const block = page.locator('.opblock', { hasText: '/v.1.1/get_method_list' }).first();
      await block.locator('.opblock-summary').click();
      await block.locator('button.try-out__btn').click();
      await block.locator('textarea.body-param__text').fill(JSON.stringify({ api_key: seed.projectKey }));
      await block.locator('button.execute').click();
      const live = block.locator('.live-responses-table .response');
      await live.first().waitFor({ timeout: 20_000 });
      assert.equal((await live.locator('.response-col_status').first().textContent())?.trim(), '200');
      const answer = JSON.parse((await live.locator('.highlight-code pre, pre.microlight').first().textContent()) ?? '');
      assert.equal(answer.response.status, 'ok');
      assert.match(answer.data.methods, /send_message/);
      assert.deepEqual(outside, []);
      assert.deepEqual(violations, []);
      assert.deepEqual(problems.filter((p) => /Content Security Policy|Refused/i.test(p)), []);
    } finally {
      await browser.close();
    }
  });
});

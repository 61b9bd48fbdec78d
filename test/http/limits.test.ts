// The rules every method's arguments follow (docs/api/README.md, "Limits on every argument"), the
// per-key rate limit (429 with Retry-After) and the 503 of an unavailable database, against the
// real server on the configured database.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { StoreUnavailableError } from '../../src/domain/errors.ts';
import { MAX_ARGUMENT_DEPTH, MAX_ARRAY_ITEMS } from '../../src/http/api/argument-policy.ts';
import { apiErrorOf } from '../../src/http/api/envelope.ts';
import { ALL_METHODS } from '../../src/http/api/methods/index.ts';
import { parseRateLimit } from '../../src/domain/rate-limit.ts';
import { shareKeyTokens, takeKeyTokensTakenElsewhere } from '../../src/operations/rate-limits.ts';
import { startTestApp, type Seed, type TestApp } from '../helpers/app.ts';

const NUL = '\u0000';

function nested(levels: number): unknown {
  let value: unknown = 'x';
  for (let i = 0; i < levels; i++) value = { a: value };
  return value;
}

describe('one argument policy for every method', () => {
  let t: TestApp;
  let seed: Seed;
  before(async () => {
    t = await startTestApp();
    seed = await t.seed();
  });
  after(() => t.close());

  const keyFor = (m: (typeof ALL_METHODS)[number]) => (m.key === 'account' ? seed.accountKey : seed.projectKey);

  it('refuses a NUL character in any string argument of any method, 406 naming its path, and stores nothing', async () => {
    for (const m of ALL_METHODS) {
      const props = Object.keys(m.args.properties);
      const field = props[0] ?? 'anything';
      const r = await t.call(m.name, { api_key: keyFor(m), arguments: { [field]: `a${NUL}b` } });
      assert.equal(r.status, 406, `${m.name}.${field}: ${JSON.stringify(r.body)}`);
      assert.equal(r.body.response.status, 'call_error');
      assert.match(r.body.response.message, new RegExp(`"arguments\\.${field.replace('/', '\\/')}" must not contain the NUL character`), m.name);
    }
    // Deep inside, in keys, and at the top level (the uid) as well.
    const deep = await t.call('send_message', { api_key: seed.projectKey, arguments: { recipients: ['a@example.com', `b${NUL}@example.com`], content: 'x' } });
    assert.equal(deep.status, 406);
    assert.match(deep.body.response.message, /"arguments\.recipients\[1\]"/);
    const key = await t.call('send_message', { api_key: seed.projectKey, arguments: { recipients: 'a@example.com', content: 'x', variables: { [`n${NUL}`]: 1 } } });
    assert.equal(key.status, 406);
    assert.match(key.body.response.message, /key of "arguments\.variables"/);
    const uid = await t.call('send_message', { api_key: seed.projectKey, uid: `u${NUL}`, arguments: { recipients: 'a@example.com', content: 'x' } });
    assert.equal(uid.status, 406);
    assert.match(uid.body.response.message, /"uid"/);
    const project = await t.call('create_project', { api_key: seed.accountKey, arguments: { name: `P${NUL}` } });
    assert.equal(project.status, 406);
    const list = await t.call('list_projects', { api_key: seed.accountKey });
    assert.equal(list.body.data.projects.length, 1, 'nothing was created');
  });

  it(`refuses arguments nested deeper than ${MAX_ARGUMENT_DEPTH} levels (even 5,000) with 406 naming the path, in every method`, async () => {
    // Written by hand: JSON.stringify itself overflows the stack on such a value.
    const deep = `${'{"a":'.repeat(5000)}"x"${'}'.repeat(5000)}`;
    for (const m of ALL_METHODS) {
      const body = `{"api_key":${JSON.stringify(keyFor(m))},"arguments":{"settings":${deep}}}`;
      const r = await t.post(`/v.1.1/${m.name}`, body, { 'content-type': 'application/json' });
      assert.equal(r.status, 406, m.name);
      assert.match(r.body.response.message, /"arguments\.settings(\.a)*" is nested deeper than 32 levels/, m.name);
    }
    // A top-level uid too deep to be echoed back is refused, and the reply echoes none.
    const deepUid = await t.post('/v.1.1/get_method_list', `{"api_key":${JSON.stringify(seed.projectKey)},"uid":${deep}}`, { 'content-type': 'application/json' });
    assert.equal(deepUid.status, 406);
    assert.equal(deepUid.body.response.uid, null);
    assert.match(deepUid.body.response.message, /"uid(\.a)*" is nested deeper/);
    // Just under the limit is the method's business, not the policy's.
    const ok = await t.call('update_account', { api_key: seed.accountKey, arguments: { settings: { deep: nested(MAX_ARGUMENT_DEPTH - 4) } } });
    assert.equal(ok.status, 200, JSON.stringify(ok.body));
  });

  it(`refuses an array of more than ${MAX_ARRAY_ITEMS} items, 406 naming it`, async () => {
    const r = await t.call('send_message', { api_key: seed.projectKey, arguments: { recipients: new Array(MAX_ARRAY_ITEMS + 1).fill('a@example.com'), content: 'x' } });
    assert.equal(r.status, 406);
    assert.match(r.body.response.message, /"arguments\.recipients" holds 10001 items/);
  });

  it('names the argument path of a wrong type found by the schema, nested', async () => {
    const r = await t.call('send_message', { api_key: seed.projectKey, arguments: { recipients: 'a@example.com', content: { 'text/plain': ['x'] } } });
    assert.equal(r.status, 406);
    assert.match(r.body.response.message, /argument "content\.text\/plain" must be a string, got an array/);
  });

  it('says what was given in plain words: an object, the number or boolean itself', async () => {
    const asObject = await t.call('send_message', { api_key: seed.projectKey, arguments: { recipients: 'a@example.com', content: { 'text/plain': { a: 1 } } } });
    assert.equal(asObject.status, 406);
    assert.match(asObject.body.response.message, /must be a string, got an object\.?$/);
    const fraction = await t.call('messages_history', { api_key: seed.projectKey, arguments: { page: 1.5 } });
    assert.equal(fraction.status, 406, JSON.stringify(fraction.body));
    assert.match(fraction.body.response.message, /argument "page" must be a whole number, got 1\.5/);
    const flag = await t.call('send_message', { api_key: seed.projectKey, arguments: { recipients: 'a@example.com', content: { 'text/plain': true } } });
    assert.match(flag.body.response.message, /must be a string, got true\.?$/);
  });
});

describe('per-key rate limit', () => {
  let t: TestApp;
  let seed: Seed;
  before(async () => {
    t = await startTestApp({ config: { rateLimitPerKey: '3/1h' } });
    seed = await t.seed();
  });
  after(() => t.close());

  it('answers 429 too_many_requests with Retry-After once a key has used its budget; other keys keep theirs', async () => {
    for (let i = 0; i < 3; i++) assert.equal((await t.call('get_method_list', { api_key: seed.projectKey, uid: i })).status, 200);
    const over = await t.call('get_method_list', { api_key: seed.projectKey, uid: 'over' });
    assert.equal(over.status, 429);
    assert.equal(over.body.response.status, 'too_many_requests');
    assert.equal(over.body.response.uid, 'over');
    assert.match(over.body.response.message, /--rate-limit-per-key 3\/1h/);
    const retryAfter = Number(over.headers.get('retry-after'));
    assert.ok(retryAfter >= 1 && retryAfter <= 1200, String(retryAfter));
    // Its sends are refused too, and nothing is stored.
    assert.equal((await t.call('send_message', { api_key: seed.projectKey, arguments: { recipients: 'a@example.com', content: 'x' } })).status, 429);
    assert.equal((await t.call('get_method_list', { api_key: seed.accountKey })).status, 200);
  });

  it('is shared: what another process took is taken here, and what is taken here is sent to the others', async () => {
    // The API key's bucket name as the API takes it is the plugin's: learn it from what is sent.
    const sent: Array<Array<[string, number]>> = [];
    let sentOne: () => void = () => {};
    const stop = shareKeyTokens(t.app.services, (taken) => {
      sent.push(taken);
      sentOne();
    });
    try {
      const firstSend = new Promise<void>((resolve) => (sentOne = resolve));
      assert.equal((await t.call('get_method_list', { api_key: seed.accountKey })).status, 200);
      // Sent within SHARE_EVERY_MS (operations/rate-limits.ts); a bounded wait for it.
      await Promise.race([firstSend, new Promise((_, reject) => setTimeout(() => reject(new Error('nothing shared within 5 s')), 5000).unref())]);
      assert.equal(sent.length, 1);
      const [[keyId, count]] = sent[0];
      assert.equal(count, 1);
      // Two more taken elsewhere (the key of 3 an hour was used once before this test): spent here too.
      takeKeyTokensTakenElsewhere(t.app.services, [[keyId, 2]]);
      const over = await t.call('get_method_list', { api_key: seed.accountKey });
      assert.equal(over.status, 429);
      // A token is back after a third of the hour; what was taken elsewhere counts in the wait.
      takeKeyTokensTakenElsewhere(t.app.services, [[keyId, 3]]);
      assert.ok(Number((await t.call('get_method_list', { api_key: seed.accountKey })).headers.get('retry-after')) > 1200);
      // Nonsense from a peer changes nothing and throws nothing.
      takeKeyTokensTakenElsewhere(t.app.services, [[keyId, -5], [keyId, Number.NaN], [42 as unknown as string, 1]]);
    } finally {
      stop();
    }
  });

  it('is off by default, and its option is read as N/window', async () => {
    assert.equal(parseRateLimit(null), null);
    assert.equal(parseRateLimit('off'), null);
    assert.deepEqual(parseRateLimit('600/1m'), { requests: 600, windowMs: 60_000 });
    assert.deepEqual(parseRateLimit('20/s'), { requests: 20, windowMs: 1000 });
    assert.throws(() => parseRateLimit('fast'), /--rate-limit-per-key must be "N\/window"/);
    assert.throws(() => parseRateLimit('0/1s'), /at least 1 request/);
  });
});

describe('an unavailable database', () => {
  it('is answered 503 service_unavailable naming the kind of the cause (not its file), with Retry-After; never a 500', () => {
    const error = apiErrorOf(new Error('write failed', { cause: new StoreUnavailableError('disk full: /var/lib/posthorn/posthorn.db', { reason: 'disk full' }) }));
    assert.equal(error.httpCode, 503);
    assert.equal(error.status, 'service_unavailable');
    assert.match(error.message, /^The database is unavailable \(disk full\)/);
    assert.doesNotMatch(error.message, /\/var\/lib/);
    assert.match(error.message, /nothing of this call was stored/);
    assert.equal((error as unknown as { retryAfterSeconds: number }).retryAfterSeconds > 0, true);
    assert.equal(apiErrorOf(new Error('secret internals')).httpCode, 500);
    assert.doesNotMatch(apiErrorOf(new Error('secret internals')).message, /secret internals/);
  });
});

describe('operations check their typed input whatever the edge', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp();
  });
  after(() => t.close());

  it('createAccount and createProject refuse a 10,000-character or blank name, as the API does (posthorn init reaches them directly)', async () => {
    const { createAccount } = await import('../../src/operations/accounts.ts');
    const { createProject } = await import('../../src/operations/projects.ts');
    const services = t.app.services;
    await assert.rejects(createAccount(services, { name: 'x'.repeat(10_000) }), (e: Error & { status?: string }) => e.status === 'call_error' && /"name" must be at most 200 characters/.test(e.message));
    const { account } = await createAccount(services, { name: 'Fine' });
    await assert.rejects(createProject(services, account, { name: 'x'.repeat(10_000) }), (e: Error & { status?: string }) => e.status === 'call_error' && /"name" must be at most 200/.test(e.message));
    await assert.rejects(createProject(services, account, { name: '  ' }), (e: Error & { status?: string }) => e.status === 'call_error' && /"name" must not be empty/.test(e.message));
    await assert.rejects(createProject(services, account, { name: 'ok', uid: `u${NUL}` }), (e: Error & { status?: string }) => e.status === 'call_error' && /"uid"/.test(e.message));
  });
});

describe('length limits answer with the limit', () => {
  let t: TestApp;
  let seed: Seed;
  before(async () => {
    t = await startTestApp();
    seed = await t.seed();
  });
  after(() => t.close());

  it('a project name over 200 characters is 406 saying so, on create and update', async () => {
    for (const [method, args] of [
      ['create_project', { name: 'x'.repeat(201) }],
      ['update_project', { uid: seed.projectUid, name: 'x'.repeat(201) }],
    ] as const) {
      const r = await t.call(method, { api_key: seed.accountKey, arguments: args });
      assert.equal(r.status, 406, method);
      assert.match(r.body.response.message, /"name" must be at most 200 characters long/, method);
    }
  });
});

describe('a uid chosen at creation (docs/api/README.md, "Uids")', () => {
  let t: TestApp;
  let seed: Seed;
  before(async () => {
    // No background work: the mailbox is never connected to, the webhook never posted to.
    t = await startTestApp({ background: false, config: { allowPrivateWebhooks: true } });
    seed = await t.seed();
  });
  after(() => t.close());

  const creates = [
    ['create_project', { name: 'P' }],
    ['create_webhook', { url: 'http://127.0.0.1:9/hook' }],
    ['create_mailbox', { host: '127.0.0.1', username: 'u', password: 'p', postback_url: 'http://127.0.0.1:9/in' }],
  ] as const;

  const counts = async () => ({
    projects: (await t.call('list_projects', { api_key: seed.accountKey })).body.data.projects.length,
    webhooks: (await t.call('list_webhooks', { api_key: seed.accountKey })).body.data.webhooks.length,
    mailboxes: (await t.call('list_mailboxes', { api_key: seed.accountKey })).body.data.mailboxes.length,
  });

  it('a blank uid is refused by every create method that takes one, 406 naming it, and nothing is stored', async () => {
    const before = await counts();
    for (const [method, args] of creates) {
      for (const blank of ['   ', ' \t\n ']) {
        const r = await t.call(method, { api_key: seed.accountKey, arguments: { ...args, uid: blank } });
        assert.equal(r.status, 406, `${method} ${JSON.stringify(blank)}: ${JSON.stringify(r.body)}`);
        assert.equal(r.body.response.status, 'call_error');
        assert.match(r.body.response.message, /argument "uid" must not be blank/, method);
      }
    }
    assert.deepEqual(await counts(), before);
    // "" still means absent: one is generated.
    const generated = await t.call('create_webhook', { api_key: seed.accountKey, arguments: { url: 'http://127.0.0.1:9/hook', uid: '' } });
    assert.equal(generated.status, 200);
    assert.match(generated.body.data.webhook.uid, /^[0-9a-f-]{36}$/);
    assert.equal((await t.call('delete_webhook', { api_key: seed.accountKey, arguments: { uid: generated.body.data.webhook.uid } })).status, 200);
  });

  it('a uid is kept as given, spaces and all, and every method names it the same way', async () => {
    const uid = ' spaced uid ';
    for (const [method, args] of creates) {
      const r = await t.call(method, { api_key: seed.accountKey, arguments: { ...args, uid } });
      assert.equal(r.status, 200, `${method}: ${JSON.stringify(r.body)}`);
    }
    const byUid = { api_key: seed.accountKey, arguments: { uid } };
    for (const method of ['get_project', 'rotate_project_key', 'update_webhook', 'rotate_webhook_secret', 'delete_webhook', 'get_mailbox', 'rotate_mailbox_secret', 'delete_mailbox']) {
      const r = await t.call(method, byUid);
      assert.equal(r.status, 200, `${method}: ${JSON.stringify(r.body)}`);
    }
    assert.deepEqual(await counts(), { projects: 2, webhooks: 0, mailboxes: 0 });
    // The trimmed spelling is another uid.
    assert.equal((await t.call('get_project', { api_key: seed.accountKey, arguments: { uid: uid.trim() } })).status, 404);
  });

  it('a row stored with a blank uid before creation refused one still answers to it: read, changed, removed', async () => {
    const blank = '   ';
    // Rows as an earlier release stored them: created, then given the blank uid it accepted.
    const made = new Map<string, string>();
    for (const [method, args] of creates) {
      const r = await t.call(method, { api_key: seed.accountKey, arguments: { ...args, uid: `was blank ${method}` } });
      assert.equal(r.status, 200, `${method}: ${JSON.stringify(r.body)}`);
      made.set(method, `was blank ${method}`);
    }
    const db = t.app.services.store.db;
    await t.app.services.store.write(async (trx) => {
      await trx.updateTable('projects').set({ uid: blank }).where('uid', '=', made.get('create_project')!).execute();
      await trx.updateTable('webhooks').set({ uid: blank }).where('uid', '=', made.get('create_webhook')!).execute();
      await trx.updateTable('mailboxes').set({ uid: blank }).where('uid', '=', made.get('create_mailbox')!).execute();
    });
    const listed = await t.call('list_webhooks', { api_key: seed.accountKey });
    assert.ok(listed.body.data.webhooks.some((w: { uid: string }) => w.uid === blank), 'listed with its uid as stored');

    const call = (method: string, args: Record<string, unknown> = {}) => t.call(method, { api_key: seed.accountKey, arguments: { uid: blank, ...args } });
    for (const [method, args] of [
      ['get_project', {}],
      ['update_project', { name: 'Renamed' }],
      ['disable_project', {}],
      ['enable_project', {}],
      ['rotate_project_key', {}],
      ['update_webhook', { url: 'http://127.0.0.1:9/moved' }],
      ['rotate_webhook_secret', {}],
      ['get_mailbox', {}],
      ['update_mailbox', { label: 'found again' }],
      ['rotate_mailbox_secret', {}],
    ] as const) {
      const r = await call(method, args);
      assert.equal(r.status, 200, `${method}: ${JSON.stringify(r.body)}`);
    }
    // Another blank spelling names nothing; "" is still missing.
    assert.equal((await call('get_mailbox', { uid: '  ' })).status, 404);
    assert.equal((await call('delete_webhook', { uid: ' \t ' })).status, 404);
    const empty = await call('get_mailbox', { uid: '' });
    assert.equal(empty.status, 400);
    assert.match(empty.body.response.message, /Missing required argument "uid"/);

    assert.equal((await call('delete_webhook')).status, 200);
    assert.equal((await call('delete_mailbox')).status, 200);
    assert.equal(await db.selectFrom('webhooks').select('id').where('uid', '=', blank).executeTakeFirst(), undefined);
    assert.equal(await db.selectFrom('mailboxes').select('id').where('uid', '=', blank).executeTakeFirst(), undefined);
    // Still refused at creation.
    assert.equal((await t.call('create_webhook', { api_key: seed.accountKey, arguments: { url: 'http://127.0.0.1:9/hook', uid: blank } })).status, 406);
  });
});

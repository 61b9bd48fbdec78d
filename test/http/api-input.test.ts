// Bad input to the JSON API gets a clear error in the envelope, never a crash, a hang, a silently
// changed value or a 500 (docs/api/README.md, "Limits on every argument", "Numbers", "Errors"),
// against the real server on the configured database; malformed HTTP over raw sockets.
import assert from 'node:assert/strict';
import net from 'node:net';
import zlib from 'node:zlib';
import { after, before, describe, it } from 'node:test';
import { MAX_ARGUMENT_DEPTH } from '../../src/http/api/argument-policy.ts';
import { startTestApp, type Seed, type TestApp } from '../helpers/app.ts';

/** Sends raw bytes on a new connection and reads until the server closes it. */
function rawExchange(url: string, chunks: Array<string | Buffer>): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname);
    const received: Buffer[] = [];
    socket.on('connect', () => {
      for (const chunk of chunks) socket.write(chunk);
    });
    socket.on('data', (data) => received.push(data));
    socket.on('error', reject);
    socket.on('close', () => resolve(Buffer.concat(received).toString('utf8')));
  });
}

/** The status code and parsed JSON body of a raw HTTP/1.1 response. */
function parseRaw(text: string): { code: number; headers: string; body: any } {
  const split = text.indexOf('\r\n\r\n');
  assert.notEqual(split, -1, `a whole HTTP response, got ${JSON.stringify(text.slice(0, 200))}`);
  const head = text.slice(0, split);
  const code = Number(/^HTTP\/1\.1 (\d{3}) /.exec(head)?.[1]);
  return { code, headers: head, body: JSON.parse(text.slice(split + 4)) };
}

describe('bad input to the JSON API', () => {
  let t: TestApp;
  let seed: Seed;
  before(async () => {
    t = await startTestApp({ config: { httpHeadersTimeoutMs: 300, httpRequestTimeoutMs: 300 } });
    seed = await t.seed();
  });
  after(() => t.close());

  const raw = (method: string, text: string, headers: Record<string, string> = {}) =>
    t.post(`/v.1.1/${method}`, text, { 'content-type': 'application/json', ...headers });
  const key = () => JSON.stringify(seed.projectKey);
  const transmissionsOf = async (messageId: number) =>
    t.app.services.store.db.selectFrom('transmissions').select(['recipient']).where('message_id', '=', messageId).execute();

  describe('integers beyond 2^53', () => {
    it('keeps a free-form number as the digits sent: variables render every digit, account settings store them', async () => {
      const big = '12345678901234567890';
      const sent = await raw('send_message', `{"api_key":${key()},"arguments":{"recipients":"a@null.postageapp.com","content":"n={{n}} m={{m}}","subject":"S {{n}}","variables":{"n":${big},"m":-${big}}}}`);
      assert.equal(sent.status, 200, JSON.stringify(sent.body));
      const content = await t.call('get_message_content', { api_key: seed.projectKey, arguments: { uid: (await t.app.services.store.db.selectFrom('messages').select('uid').where('id', '=', sent.body.data.message.id).executeTakeFirstOrThrow()).uid } });
      assert.equal(content.status, 200, JSON.stringify(content.body));
      assert.equal(content.body.data.message.text, `n=${big} m=-${big}`);
      assert.equal(content.body.data.message.subject, `S ${big}`);

      const settings = await t.post('/v.1.1/update_account', `{"api_key":${JSON.stringify(seed.accountKey)},"arguments":{"settings":{"big":${big},"list":[1,${big}]}}}`, { 'content-type': 'application/json' });
      assert.equal(settings.status, 200, JSON.stringify(settings.body));
      const text = JSON.stringify(settings.body.data.account.settings);
      assert.ok(text.includes(big), text);
      assert.ok(!text.includes('12345678901234567000'), text);
    });

    it('echoes a top-level uid beyond 2^53 as the number sent, every digit, and looks it up by those digits', async () => {
      const big = '98765432109876543210';
      const reply = await fetch(`${t.url}/v.1.1/get_method_list`, { method: 'POST', body: `{"api_key":${key()},"uid":${big}}`, headers: { 'content-type': 'application/json' } });
      const text = await reply.text();
      assert.equal(reply.status, 200);
      assert.ok(text.includes(`"uid":${big}`), text);
      const sent = await raw('send_message', `{"api_key":${key()},"uid":${big},"arguments":{"recipients":"a@null.postageapp.com","content":"x"}}`);
      assert.equal(sent.status, 200, JSON.stringify(sent.body));
      const receipt = await t.call('get_message_receipt', { api_key: seed.projectKey, arguments: { uid: big } });
      assert.equal(receipt.status, 200, JSON.stringify(receipt.body));
      assert.equal(receipt.body.data.message.id, sent.body.data.message.id);
    });

    it('refuses a whole-number argument beyond 2^53, or written 1e3 or 1.0, with 406 naming it, never rounded', async () => {
      for (const [method, args, field] of [
        ['messages_history', '{"page":12345678901234567890}', 'page'],
        ['get_messages', '{"per_page":1e2}', 'per_page'],
        ['cancel_message', '{"id":9007199254740993}', 'id'],
        ['cancel_message', '{"id":1e3}', 'id'],
        ['cancel_message', '{"id":2.0}', 'id'],
      ] as const) {
        const r = await raw(method, `{"api_key":${key()},"arguments":${args}}`);
        assert.equal(r.status, 406, `${method} ${args}: ${JSON.stringify(r.body)}`);
        assert.equal(r.body.response.status, 'call_error');
        assert.match(r.body.response.message, new RegExp(`argument "${field}" must be a whole number`), args);
        assert.doesNotMatch(r.body.response.message, /12345678901234567000|9007199254740992\b/, args);
      }
      const ids = await t.post('/v.1.1/retry_webhook_deliveries', `{"api_key":${JSON.stringify(seed.accountKey)},"arguments":{"ids":[1,18446744073709551617]}}`, { 'content-type': 'application/json' });
      assert.equal(ids.status, 406, JSON.stringify(ids.body));
      assert.match(ids.body.response.message, /argument "ids\[1\]" must be a whole number between -9007199254740991 and 9007199254740991, got 18446744073709551617/);
      // A number too large for a double is refused where it is, never read as Infinity (null).
      const huge = await raw('send_message', `{"api_key":${key()},"arguments":{"recipients":"a@null.postageapp.com","content":"x","variables":{"v":1e400}}}`);
      assert.equal(huge.status, 406);
      assert.match(huge.body.response.message, /"arguments\.variables\.v" holds the number 1e400/);
    });
  });

  it(`refuses a body nested 100,000 levels deep at once, naming where it passes ${MAX_ARGUMENT_DEPTH} levels`, async () => {
    const deep = `{"api_key":${key()},"arguments":{"recipients":${'['.repeat(100_000)}${']'.repeat(100_000)}}}`;
    const started = Date.now();
    const r = await raw('send_message', deep);
    assert.equal(r.status, 406);
    assert.equal(r.body.response.status, 'call_error');
    assert.match(r.body.response.message, /"arguments\.recipients(\[0\])*" is nested deeper than 32 levels/);
    assert.ok(Date.now() - started < 5000, `answered in ${Date.now() - started} ms`);
    // Unclosed, it is refused the same way (the scan needs no closing bracket).
    const open = await raw('send_message', `{"api_key":${key()},"arguments":${'{"a":'.repeat(50_000)}`);
    assert.equal(open.status, 406);
    assert.match(open.body.response.message, /nested deeper than 32 levels/);
  });

  it('refuses a lone UTF-16 surrogate in any string or key, 406 naming the field, and stores nothing', async () => {
    for (const [args, path] of [
      ['{"recipients":"a@null.postageapp.com","content":"x","variables":{"name":"\\ud800"}}', /"arguments\.variables\.name" contains a lone UTF-16 surrogate/],
      ['{"recipients":"a@null.postageapp.com","content":{"text/plain":"ok \\udc00 then"}}', /"arguments\.content\.text\/plain" contains a lone/],
      ['{"recipients":"a@null.postageapp.com","content":"x","headers":{"X-\\ud83d":"v"}}', /a key of "arguments\.headers" contains a lone/],
      ['{"recipients":["a@null.postageapp.com","b\\udfff@null.postageapp.com"],"content":"x"}', /"arguments\.recipients\[1\]" contains a lone/],
    ] as const) {
      const r = await raw('send_message', `{"api_key":${key()},"arguments":${args}}`);
      assert.equal(r.status, 406, `${args}: ${JSON.stringify(r.body)}`);
      assert.equal(r.body.response.status, 'call_error');
      assert.match(r.body.response.message, path);
    }
    // A pair written as two escapes is one character, and is accepted.
    const pair = await raw('send_message', `{"api_key":${key()},"arguments":{"recipients":"a@null.postageapp.com","content":"smile \\ud83d\\ude00","subject":"pair"}}`);
    assert.equal(pair.status, 200, JSON.stringify(pair.body));
    const messages = await t.app.services.store.db.selectFrom('messages').select('id').where('project_id', '=', seed.projectId).execute();
    assert.ok(messages.every((m) => Number(m.id) <= pair.body.data.message.id));
  });

  describe('malformed HTTP, headers too large, requests too slow', () => {
    it('answers a request line Node cannot parse with 400 in the envelope, then closes', async () => {
      const r = parseRaw(await rawExchange(t.url, ['GARBAGE\r\n\r\n']));
      assert.equal(r.code, 400);
      assert.match(r.headers, /content-type: application\/json/i);
      assert.deepEqual(Object.keys(r.body.response).sort(), ['message', 'status', 'uid']);
      assert.equal(r.body.response.status, 'bad_request');
      assert.equal(r.body.response.uid, null);
      assert.match(r.body.response.message, /Malformed HTTP request/);
      const header = parseRaw(await rawExchange(t.url, ['POST /v.1.1/get_method_list HTTP/1.1\r\nHost: x\r\nBad Header: y\r\n\r\n']));
      assert.equal(header.code, 400);
      assert.equal(header.body.response.status, 'bad_request');
    });

    it('answers headers larger than the limit with 431 in the envelope', async () => {
      const r = parseRaw(await rawExchange(t.url, [`POST /v.1.1/get_method_list HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`]));
      assert.equal(r.code, 431);
      assert.equal(r.body.response.status, 'request_header_fields_too_large');
      assert.equal(r.body.response.uid, null);
    });

    it('answers a path that is not valid percent-encoding with 400 in the envelope', async () => {
      const r = await fetch(`${t.url}/v.1.1/%E0%A4%A`, { method: 'POST', body: '{}' });
      assert.equal(r.status, 400);
      const body = await r.json();
      assert.equal(body.response.status, 'bad_request');
      assert.match(body.response.message, /Malformed request/);
    });

    it('answers 408 in the envelope when the headers, or the body, do not arrive in time', async () => {
      const headers = parseRaw(await rawExchange(t.url, ['POST /v.1.1/get_method_list HTTP/1.1\r\nHost: x\r\n']));
      assert.equal(headers.code, 408);
      assert.equal(headers.body.response.status, 'request_timeout');
      assert.match(headers.body.response.message, /did not arrive in time/);
      const body = parseRaw(await rawExchange(t.url, ['POST /v.1.1/get_method_list HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"api_key":']));
      assert.equal(body.code, 408);
      assert.equal(body.body.response.status, 'request_timeout');
    });
  });

  it('refuses a compressed body (any Content-Encoding) with 415, never reading it as JSON', async () => {
    const json = JSON.stringify({ api_key: seed.projectKey });
    for (const [encoding, bytes] of [
      ['gzip', zlib.gzipSync(json)],
      ['br', zlib.brotliCompressSync(json)],
      ['deflate', zlib.deflateSync(json)],
      ['x-custom', Buffer.from(json)],
      ['identity, gzip', zlib.gzipSync(json)],
    ] as const) {
      const r = await t.post('/v.1.1/get_method_list', bytes, { 'content-type': 'application/json', 'content-encoding': encoding });
      assert.equal(r.status, 415, encoding);
      assert.equal(r.body.response.status, 'unsupported_media_type');
      assert.match(r.body.response.message, /send the request body uncompressed/);
    }
    // Plain, or identity, is read as always.
    assert.equal((await t.post('/v.1.1/get_method_list', json, { 'content-type': 'application/json', 'content-encoding': 'identity' })).status, 200);
  });

  it('counts the length limits in characters (code points), as their messages say', async () => {
    const emoji = '\u{1F600}';
    // 200 emoji are 200 characters (400 UTF-16 units): within the 200-character name.
    const ok = await t.call('create_project', { api_key: seed.accountKey, arguments: { name: emoji.repeat(200), uid: emoji.repeat(200) } });
    assert.equal(ok.status, 200, JSON.stringify(ok.body));
    assert.equal(ok.body.data.project.name, emoji.repeat(200));
    const over = await t.call('create_project', { api_key: seed.accountKey, arguments: { name: emoji.repeat(201) } });
    assert.equal(over.status, 406);
    assert.match(over.body.response.message, /"name" must be at most 200 characters long/);
    const slug = await t.call('create_template', { api_key: seed.projectKey, arguments: { slug: 'ok', name: emoji.repeat(200) } });
    assert.equal(slug.status, 200, JSON.stringify(slug.body));
    const uid = await t.call('send_message', { api_key: seed.projectKey, uid: emoji.repeat(200), arguments: { recipients: 'a@null.postageapp.com', content: 'x' } });
    assert.equal(uid.status, 200, JSON.stringify(uid.body));
  });

  it('bounds the recipients of one send_message (--max-recipients), refusing a list of millions at once, in the envelope', async () => {
    const many = 'a@null.postageapp.com,'.repeat(600_000);
    const started = Date.now();
    const r = await t.call('send_message', { api_key: seed.projectKey, arguments: { recipients: many, content: 'x' } });
    assert.equal(r.status, 412, JSON.stringify(r.body).slice(0, 300));
    assert.equal(r.body.response.status, 'precondition_failed');
    assert.match(r.body.response.message, /Too many recipients: "arguments\.recipients" gives more than 10000 addresses/);
    const bcc = await t.call('send_message', { api_key: seed.projectKey, arguments: { recipients: 'a@null.postageapp.com', content: 'x', headers: { bcc: many } } });
    assert.equal(bcc.status, 412);
    assert.match(bcc.body.response.message, /"arguments\.headers\.bcc" gives more than 10000/);
    assert.ok(Date.now() - started < 5000, `answered in ${Date.now() - started} ms`);
    // 1001 distinct addresses pass the list's bound and meet the message's.
    const distinct = Array.from({ length: 1001 }, (_, i) => `r${i}@null.postageapp.com`);
    const over = await t.call('send_message', { api_key: seed.projectKey, arguments: { recipients: distinct, content: 'x' } });
    assert.equal(over.status, 412);
    assert.match(over.body.response.message, /at most 1000 per message/);
  });

  describe('smaller ones', () => {
    it('skips null items of recipients and of bcc/cc lists (null is absent everywhere), refuses other non-strings naming the field and position', async () => {
      const nullRecipient = await t.call('send_message', { api_key: seed.projectKey, uid: 'null-items', arguments: { recipients: ['a@null.postageapp.com', null, [null, 'b@null.postageapp.com']], content: 'x', headers: { bcc: [null, 'c@null.postageapp.com'], cc: [null] } } });
      assert.equal(nullRecipient.status, 200, JSON.stringify(nullRecipient.body));
      const copies = await t.call('get_message_transmissions', { api_key: seed.projectKey, arguments: { uid: 'null-items' } });
      assert.equal(copies.status, 200, JSON.stringify(copies.body));
      assert.deepEqual(Object.keys(copies.body.data.transmissions).sort(), ['a@null.postageapp.com', 'b@null.postageapp.com', 'c@null.postageapp.com']);
      const numberRecipient = await t.call('send_message', { api_key: seed.projectKey, arguments: { recipients: ['a@null.postageapp.com', 7], content: 'x' } });
      assert.equal(numberRecipient.status, 406, JSON.stringify(numberRecipient.body));
      assert.match(numberRecipient.body.response.message, /argument "arguments\.recipients\[1\]" must be an address, a list of addresses or an object keyed by address, got 7/);
      const cc = await t.call('send_message', { api_key: seed.projectKey, arguments: { recipients: 'a@null.postageapp.com', content: 'x', headers: { cc: ['b@null.postageapp.com', 7] } } });
      assert.equal(cc.status, 406);
      assert.match(cc.body.response.message, /header "cc"\[1\] must be an address \(a string\), got 7/);
    });

    it('refuses cancel_message given a uid and an id of different messages, and cancels nothing', async () => {
      const first = await t.call('send_message', { api_key: seed.projectKey, uid: 'cancel-first', arguments: { recipients: 'a@example.com', content: 'x', send_at: new Date(Date.now() + 86_400_000).toISOString() } });
      const second = await t.call('send_message', { api_key: seed.projectKey, uid: 'cancel-second', arguments: { recipients: 'b@example.com', content: 'x', send_at: new Date(Date.now() + 86_400_000).toISOString() } });
      assert.equal(first.status, 200, JSON.stringify(first.body));
      assert.equal(second.status, 200);
      const r = await t.call('cancel_message', { api_key: seed.projectKey, arguments: { uid: 'cancel-first', id: second.body.data.message.id } });
      assert.equal(r.status, 406, JSON.stringify(r.body));
      assert.match(r.body.response.message, /"uid" \("cancel-first"\) and "id" \(\d+\) name different messages/);
      for (const uid of ['cancel-first', 'cancel-second']) {
        const status = await t.call('message_status', { api_key: seed.projectKey, arguments: { uid } });
        assert.equal(status.body.data.message_status.queued, 1, uid);
        assert.equal(status.body.data.message_status.failed, 0, uid);
      }
      // Both naming the same message, or the id beside a top-level uid (a client's own reference): cancelled.
      const same = await t.call('cancel_message', { api_key: seed.projectKey, arguments: { uid: 'cancel-first', id: first.body.data.message.id } });
      assert.equal(same.status, 200, JSON.stringify(same.body));
      const byId = await t.call('cancel_message', { api_key: seed.projectKey, uid: 'a-random-reference', arguments: { id: second.body.data.message.id } });
      assert.equal(byId.status, 200, JSON.stringify(byId.body));
      assert.deepEqual(byId.body.data.cancelled, ['b@example.com']);
    });

    it('a key named __proto__ is refused, naming it; constructor and toString are keys like any other', async () => {
      for (const [method, args] of [
        ['update_account', `{"settings":{"__proto__":{"x":1},"kept":1}}`],
        ['send_message', `{"recipients":"a@null.postageapp.com","content":"x","variables":{"__proto__":{"name":"p"}}}`],
        ['send_message', `{"recipients":"a@null.postageapp.com","content":"x","headers":{"__proto__":"v"}}`],
      ] as const) {
        const apiKey = method === 'update_account' ? seed.accountKey : seed.projectKey;
        const r = await t.post(`/v.1.1/${method}`, `{"api_key":${JSON.stringify(apiKey)},"arguments":${args}}`, { 'content-type': 'application/json' });
        assert.equal(r.status, 406, `${method}: ${JSON.stringify(r.body)}`);
        assert.match(r.body.response.message, /has a key named "__proto__", which is not accepted/);
      }
      const settings = await t.call('update_account', { api_key: seed.accountKey, arguments: { settings: { constructor: 'c', toString: 's' } } });
      assert.equal(settings.status, 200, JSON.stringify(settings.body));
      assert.equal(settings.body.data.account.settings.constructor, 'c');
      assert.equal(settings.body.data.account.settings.toString, 's');
      const sent = await t.call('send_message', {
        api_key: seed.projectKey,
        arguments: { recipients: 'a@null.postageapp.com', content: '{{constructor}}|{{a.b}}', subject: 'proto', headers: { constructor: 'c', toString: 't' }, variables: { constructor: 'C', 'a.__proto__.polluted': 'yes', 'a.b': 'B' } },
      });
      assert.equal(sent.status, 200, JSON.stringify(sent.body));
      assert.equal(({} as Record<string, unknown>).polluted, undefined, 'no object of the process was changed');
      const uid = (await t.app.services.store.db.selectFrom('messages').select('uid').where('id', '=', sent.body.data.message.id).executeTakeFirstOrThrow()).uid;
      const content = await t.call('get_message_content', { api_key: seed.projectKey, arguments: { uid } });
      assert.equal(content.body.data.message.text, 'C|B');
      assert.equal(content.body.data.message.headers.constructor, 'c');
      assert.equal(content.body.data.message.headers.toString, 't');
    });

    it('echoes an invalid send_at cut to its first characters, never the whole text', async () => {
      const long = `not a time ${'x'.repeat(100_000)}`;
      const r = await t.call('send_message', { api_key: seed.projectKey, arguments: { recipients: 'a@null.postageapp.com', content: 'x', send_at: long } });
      assert.equal(r.status, 406);
      assert.match(r.body.response.message, /argument "send_at" \("not a time x+\.\.\. \(100011 characters\)"\) is not a time/);
      assert.ok(r.body.response.message.length < 400, `${r.body.response.message.length} characters`);
      const date = await t.call('messages_history', { api_key: seed.projectKey, arguments: { from: 'y'.repeat(50_000) } });
      assert.equal(date.status, 406);
      assert.ok(date.body.response.message.length < 400);
    });
  });

  it('get_messages keeps its newest-first order whatever the uids look like ("10", "2", "__proto__")', async () => {
    const s = await t.seed('order');
    const uids = ['10', 'b', '2', '__proto__', '1'];
    for (const uid of uids) {
      const r = await t.call('send_message', { api_key: s.projectKey, uid, arguments: { recipients: 'a@null.postageapp.com', content: uid } });
      assert.equal(r.status, 200, JSON.stringify(r.body));
    }
    const reply = await fetch(`${t.url}/v.1.1/get_messages`, { method: 'POST', body: JSON.stringify({ api_key: s.projectKey }), headers: { 'content-type': 'application/json' } });
    const text = await reply.text();
    // Read the keys as written (JSON.parse would reorder them again).
    const keys = [...text.matchAll(/"((?:[^"\\]|\\.)*)":\{"project_id"/g)].map((m) => m[1]);
    assert.deepEqual(keys, [...uids].reverse());
  });
});

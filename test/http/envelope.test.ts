// The transport and envelope rules of api-spec.md and compatibility.md, against the real server.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setAccountStatus } from '../../src/operations/accounts.ts';
import { startTestApp, type Seed, type TestApp } from '../helpers/app.ts';

describe('HTTP transport and envelope', () => {
  let t: TestApp;
  let seed: Seed;
  before(async () => {
    t = await startTestApp({ config: { maxBodyBytes: 64 * 1024 } });
    seed = await t.seed();
  });
  after(() => t.close());

  it('accepts every path form and answers JSON', async () => {
    for (const p of ['/v.1.0/get_method_list.json', '/v.1.1/get_method_list.json', '/v.1.1/get_method_list']) {
      const r = await t.post(p, JSON.stringify({ api_key: seed.projectKey }), { 'content-type': 'application/json' });
      assert.equal(r.status, 200, p);
      assert.match(r.headers.get('content-type') ?? '', /^application\/json/);
      assert.equal(r.body.response.status, 'ok');
      assert.equal(r.body.response.message, undefined);
      assert.equal(typeof r.body.data.methods, 'string');
    }
  });

  it('answers any other version with 409 conflict, before looking at the body', async () => {
    for (const v of ['1.2', '2', '0.9', '']) {
      const r = await t.post(`/v.${v}/get_method_list`, 'not json', { 'content-type': 'application/json' });
      assert.equal(r.status, 409, v);
      assert.equal(r.body.response.status, 'conflict');
      assert.match(r.body.response.message, /version/i);
    }
  });

  it('v1.1 parses JSON whatever the Content-Type says; v1.0 requires application/json', async () => {
    const body = JSON.stringify({ api_key: seed.projectKey });
    const form = { 'content-type': 'application/x-www-form-urlencoded' };
    assert.equal((await t.post('/v.1.1/get_method_list', body, form)).status, 200);
    assert.equal((await t.post('/v.1.1/get_method_list', body, {})).status, 200);
    const v10 = await t.post('/v.1.0/get_method_list.json', body, form);
    assert.equal(v10.status, 406);
    assert.match(v10.body.response.message, /Content-Type: application\/json/);
    assert.equal((await t.post('/v.1.0/get_method_list.json', body, { 'content-type': 'application/json; charset=utf-8' })).status, 200);
  });

  it('names the byte offset of the first invalid UTF-8 byte', async () => {
    const bytes = Buffer.concat([Buffer.from('{"api_key":"ab'), Buffer.from([0xc3, 0x28]), Buffer.from('"}')]);
    const r = await t.post('/v.1.1/get_method_list', bytes);
    assert.equal(r.status, 406);
    assert.equal(r.body.response.status, 'invalid_utf8');
    assert.match(r.body.response.message, /offset 14\b/);
    const overlong = Buffer.concat([Buffer.from('{"a":"'), Buffer.from([0xc0, 0xaf]), Buffer.from('"}')]);
    assert.match((await t.post('/v.1.1/get_method_list', overlong)).body.response.message, /offset 6\b/);
  });

  it('answers a body that is not JSON with 406 invalid_json', async () => {
    for (const body of ['{"api_key": ', '', 'nope', '{"a":1}}']) {
      const r = await t.post('/v.1.1/get_method_list', body);
      assert.equal(r.status, 406, body);
      assert.equal(r.body.response.status, 'invalid_json', body);
      assert.equal(r.body.response.uid, null);
      assert.equal(r.body.data, undefined);
    }
  });

  it('refuses a JSON body that is not an object, or a key of the wrong type, with call_error', async () => {
    assert.equal((await t.post('/v.1.1/get_method_list', '[1,2]')).body.response.status, 'call_error');
    const r = await t.call('get_method_list', { api_key: ['x'] });
    assert.equal(r.status, 406);
    assert.match(r.body.response.message, /api_key/);
    const a = await t.call('get_method_list', { api_key: seed.projectKey, arguments: 'x' });
    assert.equal(a.status, 406);
    assert.match(a.body.response.message, /arguments/);
  });

  it('echoes the request uid with its JSON type', async () => {
    for (const uid of ['abc', 42, null, true]) {
      const r = await t.call('get_method_list', { api_key: seed.projectKey, uid });
      assert.deepEqual(r.body.response.uid, uid);
    }
    const none = await t.call('get_method_list', { api_key: seed.projectKey });
    assert.equal(none.body.response.uid, null);
    const err = await t.call('get_method_list', { api_key: 'wrong', uid: 7 });
    assert.equal(err.body.response.uid, 7);
  });

  it('answers 401 for unknown or missing keys', async () => {
    for (const body of [{ api_key: 'nope' }, {}, { api_key: '' }, { api_key: null }]) {
      const r = await t.call('get_method_list', body);
      assert.equal(r.status, 401);
      assert.equal(r.body.response.status, 'unauthorized');
      assert.match(r.body.response.message, /Invalid or inactive/);
    }
  });

  it('checks the key before the method name', async () => {
    assert.equal((await t.call('no_such_method', { api_key: 'bad' })).status, 401);
    const r = await t.call('no_such_method', { api_key: seed.projectKey });
    assert.equal(r.status, 406);
    assert.equal(r.body.response.status, 'call_error');
    assert.match(r.body.response.message, /no_such_method/);
  });

  it('answers 500 internal_server_error for test_error', async () => {
    const r = await t.call('test_error', { api_key: seed.projectKey, uid: 'x' });
    assert.equal(r.status, 500);
    assert.equal(r.body.response.status, 'internal_server_error');
    assert.equal(r.body.response.uid, 'x');
  });

  it('answers 413 payload_too_large for an oversized body', async () => {
    const big = JSON.stringify({ api_key: seed.projectKey, arguments: { pad: 'x'.repeat(100 * 1024) } });
    const r = await t.post('/v.1.1/get_method_list', big, { 'content-type': 'application/json' });
    assert.equal(r.status, 413);
    assert.equal(r.body.response.status, 'payload_too_large');
  });

  it('answers non-POST with 405 and unknown paths with 404, in the envelope', async () => {
    const get = await fetch(t.url + '/v.1.1/get_method_list');
    assert.equal(get.status, 405);
    assert.equal((await get.json()).response.status, 'method_not_allowed');
    const other = await t.post('/somewhere', '{}');
    assert.equal(other.status, 404);
    assert.equal(other.body.response.status, 'not_found');
    // An error echoes what it was given (here the path): a browser must never read it as a page.
    const echoed = await fetch(t.url + '/%3Cscript%3Ealert(1)%3C%2Fscript%3E');
    assert.equal(echoed.status, 404);
    assert.equal(echoed.headers.get('content-type'), 'application/json; charset=utf-8');
    assert.equal(echoed.headers.get('x-content-type-options'), 'nosniff');
    assert.equal(get.headers.get('x-content-type-options'), 'nosniff');
  });

  it('answers 423 locked while the account is disabled, and works again once enabled', async () => {
    const s = await t.seed('locked');
    await setAccountStatus(t.app.services, s.accountUid, 'disabled');
    for (const key of [s.projectKey, s.accountKey]) {
      const r = await t.call('get_method_list', { api_key: key });
      assert.equal(r.status, 423);
      assert.equal(r.body.response.status, 'locked');
    }
    await setAccountStatus(t.app.services, s.accountUid, 'active');
    assert.equal((await t.call('get_method_list', { api_key: s.projectKey })).status, 200);
  });
});

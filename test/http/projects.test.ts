// Project methods (account key) against the real server: create, list, get, update, disable and
// enable, key rotation; keys are shown once and never again.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { hashApiKey } from '../../src/domain/keys.ts';
import { startTestApp, type Seed, type TestApp } from '../helpers/app.ts';

/** A new project's settings (docs/api/account.md, update_project). */
const DEFAULT_SETTINGS = { tracking: false, sandbox: false, default_from: null };

const VERSIONS = ['1.0', '1.1'] as const;

describe('project methods', () => {
  let t: TestApp;
  let seed: Seed;
  before(async () => {
    t = await startTestApp();
    seed = await t.seed('projects');
  });
  after(() => t.close());

  const call = (method: string, args: unknown, version: '1.0' | '1.1' = '1.1', key = seed.accountKey) =>
    t.call(method, { api_key: key, arguments: args }, { version });

  it('create_project returns the project with its key once, and the key works at once', async () => {
    for (const version of VERSIONS) {
      const r = await call('create_project', { name: `Shop ${version}` }, version);
      assert.equal(r.status, 200, JSON.stringify(r.body));
      const p = r.body.data.project;
      assert.equal(p.name, `Shop ${version}`);
      assert.equal(typeof p.uid, 'string');
      assert.ok(p.uid.length > 0);
      assert.equal(p.url, `${t.app.services.config.publicUrl}/projects/${encodeURIComponent(p.uid)}`);
      assert.match(p.api_key, /^[0-9A-Za-z]{32}$/);
      assert.equal(p.key_prefix, p.api_key.slice(0, 6));
      assert.equal(p.status, 'active');
      assert.deepEqual(p.settings, DEFAULT_SETTINGS);
      // The new key is a project key: it can call project methods, and comes with the samples.
      const templates = await t.call('list_templates', { api_key: p.api_key });
      assert.equal(templates.status, 200);
      assert.deepEqual(templates.body.data.templates.map((x: { slug: string }) => x.slug), ['sample_child_template', 'sample_parent_layout']);
      // It is stored only as a hash.
      const row = await t.app.services.store.db.selectFrom('api_keys').selectAll().where('key_hash', '=', hashApiKey(p.api_key)).executeTakeFirstOrThrow();
      assert.equal(row.key_prefix, p.api_key.slice(0, 6));
      const anyPlain = await t.app.services.store.db.selectFrom('api_keys').select('id').where('key_hash', '=', p.api_key).execute();
      assert.equal(anyPlain.length, 0);
    }
  });

  it('create_project takes a uid unique per account: a duplicate is 400 bad_request', async () => {
    const r = await call('create_project', { name: 'Named', uid: 'shop-1' });
    assert.equal(r.status, 200);
    assert.equal(r.body.data.project.uid, 'shop-1');
    for (const version of VERSIONS) {
      const dup = await call('create_project', { name: 'Again', uid: 'shop-1' }, version);
      assert.equal(dup.status, 400);
      assert.equal(dup.body.response.status, 'bad_request');
      assert.match(dup.body.response.message, /shop-1 already exists/);
    }
    // Unique per account, not globally.
    const other = await t.seed('other');
    const elsewhere = await t.call('create_project', { api_key: other.accountKey, arguments: { name: 'Named', uid: 'shop-1' } });
    assert.equal(elsewhere.status, 200);
    // A numeric uid is taken as its string.
    const numeric = await call('create_project', { name: 'N', uid: 77 });
    assert.equal(numeric.body.data.project.uid, '77');
  });

  it('concurrent creates with one uid: exactly one wins, the others are 400', async () => {
    const replies = await Promise.all(Array.from({ length: 6 }, (_, i) => call('create_project', { name: `Race ${i}`, uid: 'race' }, i % 2 ? '1.0' : '1.1')));
    assert.deepEqual(replies.map((r) => r.status).sort(), [200, 400, 400, 400, 400, 400]);
    const rows = await t.app.services.store.db.selectFrom('projects').select('id').where('account_id', '=', seed.accountId).where('uid', '=', 'race').execute();
    assert.equal(rows.length, 1);
    const keys = await t.app.services.store.db.selectFrom('api_keys').select('id').where('project_id', '=', rows[0].id).execute();
    assert.equal(keys.length, 1, 'the losers left no key behind');
  });

  it('create_project refuses a missing name (400) and wrong types (406 naming the field)', async () => {
    for (const args of [{}, { name: null }, { name: '  ' }, undefined]) {
      const r = await call('create_project', args);
      assert.equal(r.status, 400, JSON.stringify(args));
      assert.equal(r.body.response.status, 'bad_request');
      assert.match(r.body.response.message, /"name"/);
    }
    for (const [args, field] of [
      [{ name: ['x'] }, 'name'],
      [{ name: { a: 1 } }, 'name'],
      [{ name: 'ok', uid: ['u'] }, 'uid'],
      [{ name: 'x'.repeat(201) }, 'name'],
      [{ name: 'ok', uid: 'u'.repeat(201) }, 'uid'],
    ] as const) {
      const r = await call('create_project', args);
      assert.equal(r.status, 406, JSON.stringify(args));
      assert.equal(r.body.response.status, 'call_error');
      assert.match(r.body.response.message, new RegExp(`"${field}"`));
    }
    const notObject = await call('create_project', 'name=x');
    assert.equal(notObject.status, 406);
    assert.match(notObject.body.response.message, /arguments/);
  });

  it('list_projects and get_project never show a key or a hash', async () => {
    const created = (await call('create_project', { name: 'Listed', uid: 'listed' })).body.data.project;
    for (const version of VERSIONS) {
      const list = await call('list_projects', {}, version);
      assert.equal(list.status, 200);
      const found = list.body.data.projects.find((p: { uid: string }) => p.uid === 'listed');
      assert.deepEqual(Object.keys(found).sort(), ['created_at', 'key_prefix', 'name', 'settings', 'status', 'uid', 'updated_at', 'url']);
      assert.equal(found.key_prefix, created.api_key.slice(0, 6));
      assert.match(found.created_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
      const text = JSON.stringify(list.body);
      assert.ok(!text.includes(created.api_key));
      assert.ok(!text.includes(hashApiKey(created.api_key)));
      // Another account's projects are not listed.
      assert.ok(!list.body.data.projects.some((p: { name: string }) => p.name === 'other project'));

      const one = await call('get_project', { uid: 'listed' }, version);
      assert.equal(one.status, 200);
      assert.deepEqual(one.body.data.project, found);
    }
  });

  it('get_project: missing uid 400, unknown uid 404, another account\'s project 404', async () => {
    const missing = await call('get_project', {});
    assert.equal(missing.status, 400);
    assert.match(missing.body.response.message, /"uid"/);
    const unknown = await call('get_project', { uid: 'nope' });
    assert.equal(unknown.status, 404);
    assert.equal(unknown.body.response.status, 'not_found');
    const other = await t.seed('stranger');
    const foreign = await call('get_project', { uid: other.projectUid });
    assert.equal(foreign.status, 404);
  });

  it('update_project changes the name and merges settings; tracking accepts "true"', async () => {
    await call('create_project', { name: 'Before', uid: 'upd' });
    const r = await call('update_project', { uid: 'upd', name: 'After' }, '1.0');
    assert.equal(r.status, 200);
    assert.equal(r.body.data.project.name, 'After');
    assert.deepEqual(r.body.data.project.settings, DEFAULT_SETTINGS);
    const on = await call('update_project', { uid: 'upd', settings: { tracking: 'true' } });
    assert.equal(on.body.data.project.settings.tracking, true);
    assert.equal(on.body.data.project.name, 'After');
    // A settings object without tracking leaves it as it was.
    const same = await call('update_project', { uid: 'upd', settings: {} });
    assert.equal(same.body.data.project.settings.tracking, true);
    const off = await call('update_project', { uid: 'upd', settings: { tracking: false } });
    assert.equal(off.body.data.project.settings.tracking, false);
    const row = await t.app.services.store.db.selectFrom('projects').select('settings').where('uid', '=', 'upd').executeTakeFirstOrThrow();
    assert.deepEqual(JSON.parse(row.settings), DEFAULT_SETTINGS);
  });

  it('update_project errors: 400 missing uid, 404 unknown, 406 naming bad settings', async () => {
    assert.equal((await call('update_project', { name: 'x' })).status, 400);
    assert.equal((await call('update_project', { uid: 'nope', name: 'x' })).status, 404);
    for (const [args, field] of [
      [{ uid: 'upd', settings: 'tracking' }, 'settings'],
      [{ uid: 'upd', settings: { tracking: 'maybe' } }, 'settings.tracking'],
      [{ uid: 'upd', settings: { trakcing: true } }, 'settings.trakcing'],
      [{ uid: 'upd', name: '' }, 'name'],
    ] as const) {
      const r = await call('update_project', args);
      assert.equal(r.status, 406, JSON.stringify(args));
      assert.equal(r.body.response.status, 'call_error');
      assert.ok(r.body.response.message.includes(`"${field}"`), r.body.response.message);
    }
  });

  it('disable_project locks the project key (423) until enable_project (200)', async () => {
    const p = (await call('create_project', { name: 'Lockable', uid: 'lock' })).body.data.project;
    assert.equal((await t.call('get_method_list', { api_key: p.api_key })).status, 200);
    for (const version of VERSIONS) {
      const d = await call('disable_project', { uid: 'lock' }, version);
      assert.equal(d.status, 200);
      assert.equal(d.body.data.project.status, 'disabled');
      const locked = await t.call('list_templates', { api_key: p.api_key }, { version });
      assert.equal(locked.status, 423);
      assert.equal(locked.body.response.status, 'locked');
      // Disabling twice is harmless.
      assert.equal((await call('disable_project', { uid: 'lock' }, version)).status, 200);
      const e = await call('enable_project', { uid: 'lock' }, version);
      assert.equal(e.status, 200);
      assert.equal(e.body.data.project.status, 'active');
      assert.equal((await t.call('list_templates', { api_key: p.api_key }, { version })).status, 200);
    }
    assert.equal((await call('disable_project', { uid: 'nope' })).status, 404);
    assert.equal((await call('enable_project', {})).status, 400);
  });

  it('rotate_project_key: the new key works at once, the old one is 401 at once', async () => {
    const p = (await call('create_project', { name: 'Rotating', uid: 'rot' })).body.data.project;
    let current = p.api_key as string;
    for (const version of VERSIONS) {
      const r = await call('rotate_project_key', { uid: 'rot' }, version);
      assert.equal(r.status, 200);
      const fresh = r.body.data.project.api_key as string;
      assert.match(fresh, /^[0-9A-Za-z]{32}$/);
      assert.notEqual(fresh, current);
      assert.equal(r.body.data.project.key_prefix, fresh.slice(0, 6));
      const old = await t.call('list_templates', { api_key: current }, { version });
      assert.equal(old.status, 401);
      assert.equal(old.body.response.status, 'unauthorized');
      assert.equal((await t.call('list_templates', { api_key: fresh }, { version })).status, 200);
      current = fresh;
    }
    const listed = (await call('get_project', { uid: 'rot' })).body.data.project;
    assert.equal(listed.key_prefix, current.slice(0, 6));
    assert.equal(listed.api_key, undefined);
    assert.equal((await call('rotate_project_key', { uid: 'nope' })).status, 404);
    assert.equal((await call('rotate_project_key', {})).status, 400);
  });

  it('refuses project keys for account methods with 401, and unknown keys with 401', async () => {
    for (const method of ['create_project', 'list_projects', 'get_project', 'update_project', 'disable_project', 'enable_project', 'rotate_project_key']) {
      for (const version of VERSIONS) {
        const r = await call(method, { name: 'x', uid: 'rot' }, version, seed.projectKey);
        assert.equal(r.status, 401, method);
        assert.equal(r.body.response.status, 'unauthorized');
        assert.match(r.body.response.message, /account API key/);
        assert.equal((await call(method, { uid: 'rot' }, version, 'wrong-key')).status, 401);
      }
    }
    // Nothing was created by the refused calls.
    const names = (await call('list_projects', {})).body.data.projects.map((p: { name: string }) => p.name);
    assert.ok(!names.includes('x'));
  });
});

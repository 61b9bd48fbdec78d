// update_account against the real server: name, settings merge (null removes a key), limits, key kind.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startTestApp, type Seed, type TestApp } from '../helpers/app.ts';

describe('update_account', () => {
  let t: TestApp;
  let seed: Seed;
  before(async () => {
    t = await startTestApp();
    seed = await t.seed('acct');
  });
  after(() => t.close());

  const call = (args: unknown, version: '1.0' | '1.1' = '1.1', key = seed.accountKey) =>
    t.call('update_account', { api_key: key, uid: 'req-1', arguments: args }, { version });

  it('renames the account and returns data.account', async () => {
    for (const version of ['1.0', '1.1'] as const) {
      const r = await call({ name: `Renamed ${version}` }, version);
      assert.equal(r.status, 200, JSON.stringify(r.body));
      assert.equal(r.body.response.uid, 'req-1');
      const a = r.body.data.account;
      assert.equal(a.uid, seed.accountUid);
      assert.equal(a.name, `Renamed ${version}`);
      assert.equal(a.status, 'active');
      assert.deepEqual(a.settings, {});
      assert.match(a.updated_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
      assert.deepEqual(Object.keys(a).sort(), ['created_at', 'name', 'settings', 'status', 'uid', 'updated_at']);
    }
    const row = await t.app.services.store.db.selectFrom('accounts').select('name').where('id', '=', seed.accountId).executeTakeFirstOrThrow();
    assert.equal(row.name, 'Renamed 1.1');
  });

  it('merges settings key by key; null removes a key; nested values are replaced whole', async () => {
    let r = await call({ settings: { timezone: 'Europe/Paris', notify: { email: 'ops@example.com', level: 'all' } } });
    assert.deepEqual(r.body.data.account.settings, { timezone: 'Europe/Paris', notify: { email: 'ops@example.com', level: 'all' } });
    r = await call({ settings: { locale: 'fr', notify: { email: 'x@example.com' } } });
    assert.deepEqual(r.body.data.account.settings, { timezone: 'Europe/Paris', locale: 'fr', notify: { email: 'x@example.com' } });
    r = await call({ settings: { timezone: null } });
    assert.deepEqual(r.body.data.account.settings, { locale: 'fr', notify: { email: 'x@example.com' } });
    // The name is untouched by a settings-only call, and an empty call changes nothing.
    const before = r.body.data.account.name;
    r = await call({});
    assert.equal(r.status, 200);
    assert.equal(r.body.data.account.name, before);
    assert.deepEqual(r.body.data.account.settings, { locale: 'fr', notify: { email: 'x@example.com' } });
    const row = await t.app.services.store.db.selectFrom('accounts').select('settings').where('id', '=', seed.accountId).executeTakeFirstOrThrow();
    assert.deepEqual(JSON.parse(row.settings), { locale: 'fr', notify: { email: 'x@example.com' } });
  });

  it('refuses wrong types and sizes with 406 call_error naming the field', async () => {
    for (const [args, field] of [
      [{ settings: 'x' }, 'settings'],
      [{ settings: [1] }, 'settings'],
      [{ name: ['a'] }, 'name'],
      [{ name: '' }, 'name'],
      [{ name: 'n'.repeat(201) }, 'name'],
      [{ settings: { big: 'x'.repeat(70 * 1024) } }, 'settings'],
    ] as const) {
      const r = await call(args);
      assert.equal(r.status, 406, JSON.stringify(args).slice(0, 80));
      assert.equal(r.body.response.status, 'call_error');
      assert.ok(r.body.response.message.includes(`"${field}"`), r.body.response.message);
      assert.equal(r.body.data, undefined);
    }
  });

  it('needs an account key: a project key is 401, a disabled account 423', async () => {
    const r = await call({ name: 'x' }, '1.1', seed.projectKey);
    assert.equal(r.status, 401);
    assert.match(r.body.response.message, /needs an account API key/);
    assert.equal((await call({ name: 'x' }, '1.0', 'nope')).status, 401);
    const s = await t.seed('dis');
    await t.app.services.store.db.updateTable('accounts').set({ status: 'disabled' }).where('id', '=', s.accountId).execute();
    assert.equal((await call({ name: 'x' }, '1.1', s.accountKey)).status, 423);
  });
});

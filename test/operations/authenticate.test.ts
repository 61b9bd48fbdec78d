// Key errors name the kind of key in question (src/operations/authenticate.ts): a wrong key sent to
// a project method is "an invalid or inactive project API key", a rotated project key too, and an
// account method keeps PostageApp's text exactly (compatibility.md).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setProjectStatus } from '../../src/operations/projects.ts';
import { startTestApp, type Seed, type TestApp } from '../helpers/app.ts';

describe('authentication messages', () => {
  let t: TestApp;
  let seed: Seed;
  before(async () => {
    t = await startTestApp();
    seed = await t.seed();
  });
  after(() => t.close());

  const WRONG = 'x'.repeat(32);

  it('a wrong key sent to a project method is an invalid project API key', async () => {
    const r = await t.call('send_message', { api_key: WRONG, arguments: { recipients: 'a@example.com', content: 'hi' } });
    assert.equal(r.status, 401);
    assert.equal(r.body.response.status, 'unauthorized');
    assert.equal(r.body.response.message, 'Invalid or inactive project API key used.');
  });

  it('a wrong key sent to an account method, or to a method of either kind, keeps PostageApp\'s text', async () => {
    for (const method of ['get_account_info', 'get_method_list']) {
      const r = await t.call(method, { api_key: WRONG });
      assert.equal(r.status, 401, method);
      assert.equal(r.body.response.message, 'Invalid or inactive account API key used.', method);
    }
  });

  it('a rotated project key is an inactive project API key, whatever the method', async () => {
    const rotated = await t.call('rotate_project_key', { api_key: seed.accountKey, arguments: { uid: seed.projectUid } });
    assert.equal(rotated.status, 200, JSON.stringify(rotated.body));
    const r = await t.call('get_account_info', { api_key: seed.projectKey });
    assert.equal(r.status, 401);
    assert.equal(r.body.response.message, 'Invalid or inactive project API key used.');
  });

  it('a key of a disabled project says the project is disabled', async () => {
    const other = await t.seed('Disabled project');
    const account = await t.app.services.store.db.selectFrom('accounts').selectAll().where('id', '=', other.accountId).executeTakeFirstOrThrow();
    await setProjectStatus(t.app.services, account, other.projectUid, 'disabled');
    const r = await t.call('send_message', { api_key: other.projectKey, arguments: { recipients: 'a@example.com', content: 'hi' } });
    assert.equal(r.status, 423);
    assert.equal(r.body.response.message, 'The specified API key is not valid: its project is disabled.');
  });
});

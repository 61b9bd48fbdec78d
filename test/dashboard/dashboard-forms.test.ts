// The dashboard's forms over HTTP against a real server on both databases (docs/dashboard.md,
// "Forms"): a submission sent again (what a reload of the page a POST answered does) runs once and
// is sent back to its page with a notice; a refused one may be sent again; a token that is missing,
// altered or another user's is refused. Then what the forms added: removing, disabling and enabling
// a webhook endpoint, and a project's settings saved through update_project's operation (its
// errors beside their fields), with a sandbox project marked wherever its counts and messages are.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startTestApp, type Seed, type TestApp } from '../helpers/app.ts';
import { SessionClient, signedInClient, type PageReply } from './session-client.ts';

const ALREADY = /class="notice error" role="alert"><bdi>This form was already submitted/;

describe('dashboard forms', () => {
  let t: TestApp;
  let seed: Seed;
  let client: SessionClient;

  before(async () => {
    t = await startTestApp({ config: { allowPrivateWebhooks: true } });
    seed = await t.seed('forms');
    ({ client } = await signedInClient(t, seed.accountUid));
  });
  after(() => t.close());

  const account = (method: string, args: Record<string, unknown> = {}) => t.call(method, { api_key: seed.accountKey, arguments: args });
  const keyOf = (r: PageReply) => /id="new-key" class="key" readonly value="([^"]+)"/.exec(r.text)![1];
  /** A repeated submission: sent back to the page its form was on, which says so once. */
  const assertSentBack = async (r: PageReply, page: string) => {
    assert.equal(r.status, 303, r.text.slice(0, 300));
    assert.equal(r.headers.get('location'), page);
    assert.match((await client.get(page)).text, ALREADY);
  };

  it('a key rotation sent again rotates nothing: the key shown keeps working', async () => {
    const keys = `/projects/${seed.projectUid}/keys`;
    await client.get(keys);
    const rotated = await client.post(keys, {});
    assert.equal(rotated.status, 200);
    assert.equal(rotated.headers.get('cache-control'), 'no-store', 'the answer holding the key is not stored');
    const key = keyOf(rotated);
    await assertSentBack(await client.resubmit(), keys);
    assert.equal((await t.call('get_project_info', { api_key: key })).status, 200, 'the key shown still works');
    const prefix = (await account('get_project', { uid: seed.projectUid })).body.data.project.key_prefix;
    assert.ok(key.startsWith(prefix), 'the project\'s active key is the one shown');
    seed.projectKey = key;
  });

  it('a webhook added, its secret rotated and a user added, each sent again, happen once', async () => {
    await client.get('/webhooks');
    const added = await client.post('/webhooks', { url: 'http://127.0.0.1:9/hooks/once', events: ['delivered'], project: '' });
    assert.equal(added.status, 200, added.text.slice(0, 300));
    assert.equal(added.headers.get('cache-control'), 'no-store');
    await assertSentBack(await client.resubmit(), '/webhooks');
    const hooks = (await account('list_webhooks')).body.data.webhooks;
    assert.deepEqual(hooks.map((h: { url: string }) => h.url), ['http://127.0.0.1:9/hooks/once'], 'one endpoint, not two');

    const sealed = async () => (await t.app.services.store.db.selectFrom('webhooks').select('secret').where('uid', '=', hooks[0].uid).executeTakeFirstOrThrow()).secret;
    await client.get('/webhooks');
    const rotated = await client.post(`/webhooks/${encodeURIComponent(hooks[0].uid)}/rotate`, {});
    assert.equal(rotated.status, 200);
    const secret = /id="secret" class="key" readonly value="([^"]+)"/.exec(rotated.text)![1];
    const stored = await sealed();
    assert.equal(t.app.services.secrets.open(stored), secret);
    await assertSentBack(await client.resubmit(), '/webhooks');
    assert.equal(await sealed(), stored, 'the secret shown is still the endpoint\'s');

    await client.get('/users');
    const user = await client.post('/users', { email: 'once@forms.example', project: '' });
    assert.equal(user.status, 200);
    const password = /id="new-password" class="key" readonly value="([^"]+)"/.exec(user.text)![1];
    await assertSentBack(await client.resubmit(), '/users');
    assert.equal((await new SessionClient(t.url).signIn('once@forms.example', password)).status, 303, 'the password shown works');
  });

  it('a form answered by a redirect, sent again, changes nothing more', async () => {
    const page = `/suppressions?project=${seed.projectUid}`;
    await client.get(page);
    const added = await client.post('/suppressions/add', { project: seed.projectUid, addresses: 'again@forms.example' });
    assert.equal(added.status, 303);
    // Taken off the list since: the same submission must not put it back.
    assert.equal((await t.call('remove_from_suppression_list', { api_key: seed.projectKey, arguments: { addresses: ['again@forms.example'] } })).status, 200);
    await assertSentBack(await client.resubmit(), page);
    assert.ok(!('again@forms.example' in ((await t.call('get_suppression_list', { api_key: seed.projectKey })).body.data ?? {})));
  });

  it('two submissions of one form at once: one runs', async () => {
    const keys = `/projects/${seed.projectUid}/keys`;
    await client.get(keys);
    const token = client.formTokens.pop()!;
    const answers = await Promise.all([client.post(keys, { _form: token }), client.post(keys, { _form: token })]);
    assert.deepEqual(answers.map((a) => a.status).sort(), [200, 303]);
    const key = keyOf(answers.find((a) => a.status === 200)!);
    assert.equal((await t.call('get_project_info', { api_key: key })).status, 200);
    seed.projectKey = key;
  });

  it('a refused submission changed nothing: sent again, it runs again', async () => {
    await client.get(`/templates/~new?project=${seed.projectUid}`);
    const form = { project: seed.projectUid, slug: 'later', subject: 'Hi', text: 'x', html: '', css: '', from: '', name: '', parent: 'layout-to-come' };
    const refused = await client.post('/templates', form);
    assert.equal(refused.status, 412);
    assert.match(refused.text, /id="err-parent" role="status"><bdi>[^<]+/);
    assert.equal((await client.resubmit()).status, 412, 'refused again, not "already submitted"');
    const layout = await t.call('create_template', { api_key: seed.projectKey, arguments: { slug: 'layout-to-come', html: '<div>{{*content*}}</div>' } });
    assert.equal(layout.status, 200, JSON.stringify(layout.body));
    const saved = await client.resubmit();
    assert.equal(saved.status, 303);
    assert.equal((await t.call('get_template', { api_key: seed.projectKey, arguments: { slug: 'later' } })).status, 200);
    await assertSentBack(await client.resubmit(), `/templates/~new?project=${seed.projectUid}`);

    // An error notice (the post redirected with it) gives the token back too.
    await client.get('/webhooks');
    const retry = await client.post('/webhooks/deliveries/999999/retry', {});
    assert.equal(retry.status, 303);
    assert.match((await client.get('/webhooks')).text, /Only a failed delivery can be retried/);
    await client.resubmit();
    const again = (await client.get('/webhooks')).text;
    assert.match(again, /Only a failed delivery can be retried/);
    assert.doesNotMatch(again, ALREADY);
  });

  it('the template preview uses up no token: the editor saves with the token it was shown with', async () => {
    await client.get(`/templates/~new?project=${seed.projectUid}`);
    const token = client.formTokens.pop()!;
    const fields = { project: seed.projectUid, slug: 'previewed', subject: 'Hi {{name}}', text: 'x', html: '<p>{{name}}</p>', css: '', from: '', name: '', parent: '' };
    for (const path of ['/templates/~preview', '/templates/~preview.json']) {
      assert.equal((await client.post(path, { ...fields, _form: token })).status, 200);
    }
    assert.equal((await client.post('/templates', { ...fields, _form: token })).status, 303);
  });

  it('refuses a post without a form token, with an altered one or another user\'s, and changes nothing', async () => {
    const keys = `/projects/${seed.projectUid}/keys`;
    await client.get(keys);
    const without = await client.post(keys, {}, { formToken: false });
    assert.equal(without.status, 403);
    assert.match(without.text, /This form has expired or did not come from this dashboard/);
    const token = client.formTokens.pop()!;
    const parts = token.split('.');
    const elsewhere = [...parts.slice(0, 3), Buffer.from('//evil.example/').toString('base64url'), parts[4]].join('.');
    assert.equal((await client.post(keys, { _form: elsewhere })).status, 403, 'the page it names is signed');
    assert.equal((await client.post(keys, { _form: `${token.slice(0, -2)}AA` })).status, 403);
    const { client: other } = await signedInClient(t, seed.accountUid);
    assert.equal((await client.post(keys, { _form: other.formTokens.pop()! })).status, 403, 'another sign-in\'s token');
    assert.equal((await t.call('get_project_info', { api_key: seed.projectKey })).status, 200, 'the key was not rotated');
  });

  it('removes a webhook endpoint after asking, and disables and enables one', async () => {
    const created = await account('create_webhook', { url: 'http://127.0.0.1:9/hooks/removable' });
    const uid = created.body.data.webhook.uid;
    const list = await client.get('/webhooks');
    assert.match(list.text, new RegExp(`<a href="/webhooks/${uid}/remove" aria-label="Remove http://127\\.0\\.0\\.1:9/hooks/removable">`));
    const ask = await client.get(`/webhooks/${uid}/remove`);
    assert.equal(ask.status, 200);
    assert.match(ask.text, /<form method="post" action="\/webhooks\/[^"]+\/remove"/);
    const urls = async () => (await account('list_webhooks')).body.data.webhooks.map((h: { url: string }) => h.url);
    assert.ok((await urls()).includes('http://127.0.0.1:9/hooks/removable'), 'asking removes nothing');

    const disabled = await client.post(`/webhooks/${uid}/status`, { status: 'disabled' });
    assert.equal(disabled.status, 303);
    const status = async () => (await account('list_webhooks')).body.data.webhooks.find((h: { uid: string }) => h.uid === uid).status;
    assert.equal(await status(), 'disabled');
    assert.match((await client.get('/webhooks')).text, /Disabled: http:\/\/127\.0\.0\.1:9\/hooks\/removable/);
    assert.equal((await client.post(`/webhooks/${uid}/status`, { status: 'active' })).status, 303);
    assert.equal(await status(), 'active');

    await client.get(`/webhooks/${uid}/remove`);
    const removed = await client.post(`/webhooks/${uid}/remove`, {});
    assert.equal(removed.status, 303);
    assert.match((await client.get('/webhooks')).text, /Removed: http:\/\/127\.0\.0\.1:9\/hooks\/removable/);
    assert.ok(!(await urls()).includes('http://127.0.0.1:9/hooks/removable'));
    await assertSentBack(await client.resubmit(), '/webhooks');

    const theirs = await t.seed('theirs');
    const foreign = (await t.call('create_webhook', { api_key: theirs.accountKey, arguments: { url: 'http://127.0.0.1:9/hooks/theirs' } })).body.data.webhook.uid;
    assert.equal((await client.get(`/webhooks/${foreign}/remove`)).status, 404);
    await client.get('/webhooks');
    assert.equal((await client.post(`/webhooks/${foreign}/remove`, {})).status, 303);
    assert.match((await client.get('/webhooks')).text, /class="notice error" role="alert"><bdi>Webhook [^<]+ not found/);
    assert.equal((await t.call('list_webhooks', { api_key: theirs.accountKey })).body.data.webhooks.length, 1);
  });
});

describe('dashboard project settings', () => {
  let t: TestApp;
  let seed: Seed;
  let client: SessionClient;
  let messageId: number;

  before(async () => {
    t = await startTestApp();
    seed = await t.seed('settings');
    ({ client } = await signedInClient(t, seed.accountUid));
    const sent = await t.call('send_message', {
      api_key: seed.projectKey,
      arguments: { recipients: ['someone@example.com'], headers: { subject: 'Counted', from: 'a@example.com' }, content: { 'text/plain': 'x' } },
    });
    messageId = sent.body.data.message.id;
  });
  after(() => t.close());

  const settingsPath = () => `/projects/${seed.projectUid}/settings`;
  const stored = async () => (await t.call('get_project', { api_key: seed.accountKey, arguments: { uid: seed.projectUid } })).body.data.project;
  const sandboxShown = (text: string) => /class="badge sandbox"/.test(text) || /class="notice sandbox"/.test(text);
  const projectPages = () => ['/', `/projects/${seed.projectUid}`, `/messages?project=${seed.projectUid}`, `/messages/${messageId}`];

  it('saves sandbox, tracking, default From, name and retention through update_project\'s operation; a sandbox project says so where its counts and messages are', async () => {
    for (const path of projectPages()) assert.ok(!sandboxShown((await client.get(path)).text), `${path}: a live project shows no sandbox mark`);
    const page = await client.get(settingsPath());
    assert.equal(page.status, 200);
    // No default From of its own: mail goes from noreply@ the --mailer-host, which the field says.
    assert.match(page.text, /id="s-default_from" name="default_from" value="" placeholder="noreply@posthorn\.test"/);
    assert.match(page.text, /empty: (<bdi>)?noreply@posthorn\.test(<\/bdi>)? \(the host name of --mailer-host\)/);
    const saved = await client.post(settingsPath(), { name: 'Renamed', sandbox: 'on', tracking: 'on', default_from: ' Shop <shop@example.com> ', retention_days: '30' });
    assert.equal(saved.status, 303);
    assert.equal(saved.headers.get('location'), settingsPath());
    assert.match((await client.get(settingsPath())).text, /Settings of Renamed saved\. The project is in sandbox mode/);
    const project = await stored();
    assert.equal(project.name, 'Renamed');
    assert.deepEqual(project.settings, { tracking: true, sandbox: true, default_from: 'Shop <shop@example.com>', retention_days: 30 });

    for (const path of projectPages()) {
      const text = (await client.get(path)).text;
      assert.match(text, /class="notice sandbox"><strong>Sandbox mode<\/strong>/, `${path} says the project is a sandbox`);
    }
    assert.match((await client.get('/')).text, /<bdi>Renamed<\/bdi><\/a> <span class="badge sandbox">/);

    // Unticked boxes are off; an empty retention goes back to the server's.
    assert.equal((await client.post(settingsPath(), { name: 'Renamed', default_from: '', retention_days: '' })).status, 303);
    assert.deepEqual((await stored()).settings, { tracking: false, sandbox: false, default_from: null });
    for (const path of projectPages()) assert.ok(!sandboxShown((await client.get(path)).text), `${path}: live again`);
  });

  it('shows update_project\'s refusals beside their fields, and saves nothing', async () => {
    const before = await stored();
    for (const [field, value, api] of [
      ['default_from', 'two@example.com, three@example.com', { settings: { default_from: 'two@example.com, three@example.com' } }],
      ['default_from', 'x\r\nBcc: all@example.com', { settings: { default_from: 'x\r\nBcc: all@example.com' } }],
      ['retention_days', '5000', { settings: { retention_days: 5000 } }],
      ['retention_days', 'a week', { settings: { retention_days: 'a week' } }],
      ['name', '   ', { name: '   ' }],
    ] as const) {
      await client.get(settingsPath());
      const form: Record<string, string> = { name: 'Kept', default_from: '', retention_days: '', sandbox: 'on' };
      form[field] = value;
      const r = await client.post(settingsPath(), form);
      assert.equal(r.status, 406, `${field}=${value}`);
      const message = (await t.call('update_project', { api_key: seed.accountKey, arguments: { uid: seed.projectUid, ...api } })).body.response.message;
      const shown = new RegExp(`id="err-${field}" role="status"><bdi>([^<]+)</bdi>`).exec(r.text)?.[1];
      assert.equal(shown?.replace(/&quot;/g, '"').replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&#39;/g, "'"), message, `${field}: the API's own words`);
      assert.match(r.text, new RegExp(`id="s-${field}"[^>]*aria-invalid="true"`));
      assert.match(r.text, / checked/, 'what was typed is kept');
    }
    assert.deepEqual(await stored(), before);
  });

  it('is for account users, as update_project takes the account key', async () => {
    const { client: scoped } = await signedInClient(t, seed.accountUid, { projectUid: seed.projectUid });
    assert.equal((await scoped.get(settingsPath())).status, 404);
    assert.ok(!(await scoped.get(`/projects/${seed.projectUid}`)).text.includes('/settings"'));
    await scoped.get('/');
    assert.equal((await scoped.post(settingsPath(), { name: 'Taken over', sandbox: 'on' })).status, 404);
    assert.notEqual((await stored()).name, 'Taken over');
  });
});

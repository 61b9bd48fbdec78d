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
    await client.get(`${keys}/rotate`);
    const rotated = await client.post(`${keys}/rotate`, {});
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
    await client.get(`/webhooks/${encodeURIComponent(hooks[0].uid)}/rotate`);
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
    const rotate = `/projects/${seed.projectUid}/keys/rotate`;
    await client.get(rotate);
    const token = client.formTokens.pop()!;
    const answers = await Promise.all([client.post(rotate, { _form: token }), client.post(rotate, { _form: token })]);
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
    const keys = `/projects/${seed.projectUid}/keys/rotate`;
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

describe('dashboard confirmations', () => {
  let t: TestApp;
  let seed: Seed;
  let client: SessionClient;

  before(async () => {
    t = await startTestApp({ config: { allowPrivateWebhooks: true } });
    seed = await t.seed('confirm');
    ({ client } = await signedInClient(t, seed.accountUid));
  });
  after(() => t.close());

  const account = (method: string, args: Record<string, unknown> = {}) => t.call(method, { api_key: seed.accountKey, arguments: args });
  const project = (method: string, args: Record<string, unknown> = {}) => t.call(method, { api_key: seed.projectKey, arguments: args });
  /** The POST forms of a page: their actions. */
  const postForms = (text: string) => [...text.matchAll(/<form method="post" action="([^"]+)"/g)].map((m) => m[1].replace(/&amp;/g, '&'));
  const DESTRUCTIVE = /\/(delete|remove|rotate|cancel)$/;

  it('asks before every action that destroys: the page offering it links to a confirmation, which changes nothing, says what goes, and posts the action with its tokens', async () => {
    const ok = (r: { status: number; body: unknown }) => {
      assert.equal(r.status, 200, JSON.stringify(r.body).slice(0, 300));
      return r.body as { data: Record<string, Record<string, unknown>> };
    };
    ok(await account('create_domain', { name: 'confirm.example' }));
    ok(await project('create_template', { slug: 'farewell', name: 'Farewell <b>note</b>', subject: 'Bye', text: 'x' }));
    ok(await project('add_to_suppression_list', { addresses: ['kept@confirm.example'], message: 'asked <i>twice</i>' }));
    const hook = ok(await account('create_webhook', { url: 'http://127.0.0.1:9/hooks/confirm' })).data.webhook.uid as string;
    const sendAt = new Date(Date.now() + 3_600_000).toISOString();
    const message = ok(await t.call('send_message', { api_key: seed.projectKey, uid: 'later-confirm', arguments: { recipients: ['a@confirm.example', 'b@confirm.example'], send_at: sendAt, headers: { subject: 'Later <on>', from: 'x@confirm.example' }, content: { 'text/plain': 'x' } } })).data.message;
    const keys = `/projects/${seed.projectUid}/keys`;
    const templates = `/templates?project=${seed.projectUid}`;
    const suppressions = `/suppressions?project=${seed.projectUid}`;
    const messagePage = `/messages/${message.id}`;

    const cases: Array<{ offered: string; link: string; action: string; back: string; cancel?: string; says: RegExp[]; done: () => Promise<boolean> }> = [
      {
        offered: '/domains', link: '/domains/confirm.example/delete', action: '/domains/confirm.example/delete', back: '/domains',
        says: [/Remove the sending domain <strong><bdi>confirm\.example<\/bdi><\/strong>\?/, /Its DKIM key is deleted/],
        done: async () => !(ok(await account('list_domains')).data.domains as unknown as Array<{ name: string }>).some((d) => d.name === 'confirm.example'),
      },
      {
        offered: `/templates/farewell?project=${seed.projectUid}`, link: `/templates/farewell/delete?project=${seed.projectUid}`, action: '/templates/farewell/delete', back: templates, cancel: `/templates/farewell?project=${seed.projectUid}`,
        says: [/Delete the template <strong><bdi>farewell<\/bdi><\/strong> \(<bdi>Farewell &lt;b&gt;note&lt;\/b&gt;<\/bdi>\)/, /a send_message naming it is refused/],
        done: async () => (await project('get_template', { slug: 'farewell' })).status === 404,
      },
      {
        offered: suppressions, link: `/suppressions/remove?project=${seed.projectUid}&address=kept%40confirm.example`, action: '/suppressions/remove', back: suppressions,
        says: [/Remove <strong><bdi>kept@confirm\.example<\/bdi><\/strong> from the suppression list/, /asked &lt;i&gt;twice&lt;\/i&gt;/, /mail to it is sent again/],
        done: async () => !('kept@confirm.example' in (ok(await project('get_suppression_list')).data ?? {})),
      },
      {
        offered: '/webhooks', link: `/webhooks/${hook}/rotate`, action: `/webhooks/${hook}/rotate`, back: '/webhooks',
        says: [/Rotate the signing secret of <strong class="url"><bdi>http:\/\/127\.0\.0\.1:9\/hooks\/confirm<\/bdi><\/strong>/, /The current secret stops being used at once/],
        done: async () => /id="secret"/.test(lastAnswer),
      },
      {
        offered: messagePage, link: `${messagePage}/cancel`, action: `${messagePage}/cancel`, back: messagePage,
        says: [/Cancel the <bdi>2 copies<\/bdi> of the message/, /\(<bdi>Later &lt;on&gt;<\/bdi>\)/, /scheduled for <time/],
        done: async () => Object.values(ok(await project('get_message_transmissions', { uid: 'later-confirm' })).data.transmissions).every((c) => (c as { status: string }).status === 'failed'),
      },
      {
        // last: the project key stops working
        offered: keys, link: `${keys}/rotate`, action: `${keys}/rotate`, back: keys,
        says: [/The current key stops working at once/],
        done: async () => (await project('get_project_info')).status === 401,
      },
    ];
    let lastAnswer = '';
    for (const c of cases) {
      const offered = await client.get(c.offered);
      assert.equal(offered.status, 200, c.offered);
      assert.deepEqual(postForms(offered.text).filter((a) => DESTRUCTIVE.test(a)), [], `${c.offered}: no one-click form that destroys`);
      assert.ok(offered.text.includes(`href="${c.link.replace(/&/g, '&amp;')}"`), `${c.offered} links to ${c.link}`);

      const ask = await client.get(c.link);
      assert.equal(ask.status, 200, c.link);
      for (const said of c.says) assert.match(ask.text, said, c.link);
      assert.equal(await c.done(), false, `${c.link}: asking does nothing`);
      const form = new RegExp(`<form method="post" action="${c.action.replace(/[.?]/g, '\\$&')}" class="actions"><input type="hidden" name="_csrf" value="[^"]+"><input type="hidden" name="_form" value="[^"]+">[^]*?<button type="submit" class="danger">[^]*?</button> <a class="button secondary" href="${(c.cancel ?? c.back).replace(/[.?]/g, '\\$&')}">Cancel</a></form>`);
      assert.match(ask.text, form, `${c.link}: its form posts the action, Cancel goes back`);
      const fields = Object.fromEntries([...ask.text.matchAll(/<input type="hidden" name="(project|address)" value="([^"]+)">/g)].map((m) => [m[1], m[2]]));

      const answer = await client.post(c.action, fields);
      lastAnswer = answer.text;
      assert.ok(answer.status === 303 || answer.status === 200, `${c.action}: ${answer.status} ${answer.text.slice(0, 300)}`);
      assert.equal(await c.done(), true, `${c.action} did it`);
      // Sent again (a reload of its answer), it is answered on the page it was offered on.
      const again = await client.resubmit();
      assert.equal(again.status, 303, c.action);
      assert.equal(again.headers.get('location'), c.back, c.action);
    }
  });

  it('a confirmation of what is not there, or not the viewer\'s, is not found', async () => {
    const theirs = await t.seed('theirs');
    const foreign = (await t.call('send_message', { api_key: theirs.projectKey, arguments: { recipients: ['x@theirs.example'], send_at: new Date(Date.now() + 3_600_000).toISOString(), headers: { subject: 's', from: 'a@theirs.example' }, content: { 'text/plain': 'x' } } })).body.data.message.id;
    for (const path of ['/domains/nowhere.example/delete', '/templates/nothing/delete', `/suppressions/remove?project=${seed.projectUid}&address=nobody%40confirm.example`, `/webhooks/nohook/rotate`, `/messages/${foreign}/cancel`, `/projects/${theirs.projectUid}/keys/rotate`]) {
      const r = await client.get(path);
      assert.equal(r.status, 404, path);
      assert.doesNotMatch(r.text, /<form method="post" action="(?!\/logout)/, `${path}: no form`);
    }
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
  const projectPages = () => ['/', `/projects/${seed.projectUid}`, `/messages?project=${seed.projectUid}`];

  it('saves sandbox, tracking, default From, name and retention through update_project\'s operation; a sandbox project says so where its counts and messages are', async () => {
    for (const path of projectPages()) assert.ok(!sandboxShown((await client.get(path)).text), `${path}: a live project shows no sandbox mark`);
    assert.ok(!sandboxShown((await client.get(`/messages/${messageId}`)).text), 'a real message shows no sandbox mark');
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
    // The message accepted while the project was live stays real mail (docs/sandbox.md): its page says so.
    const real = (await client.get(`/messages/${messageId}`)).text;
    assert.ok(!sandboxShown(real), 'a message accepted live shows no sandbox mark after the switch');
    assert.match(real, /<strong>Real mail<\/strong>: accepted while sandbox mode was off/);

    // Unticked boxes are off; an empty retention goes back to the server's.
    assert.equal((await client.post(settingsPath(), { name: 'Renamed', default_from: '', retention_days: '' })).status, 303);
    assert.deepEqual((await stored()).settings, { tracking: false, sandbox: false, default_from: null });
    for (const path of projectPages()) assert.ok(!sandboxShown((await client.get(path)).text), `${path}: live again`);
  });

  it('marks a message accepted in sandbox mode as a sandbox message after the project is live again, on its page and in the list', async () => {
    const setSandbox = async (on: boolean) =>
      assert.equal((await t.call('update_project', { api_key: seed.accountKey, arguments: { uid: seed.projectUid, settings: { sandbox: on } } })).status, 200);
    await setSandbox(true);
    const sent = await t.call('send_message', {
      api_key: seed.projectKey,
      arguments: { recipients: ['tester@example.com'], headers: { subject: 'Sandboxed', from: 'a@example.com' }, content: { 'text/plain': 'x' }, send_at: new Date(Date.now() + 3_600_000).toISOString() },
    });
    assert.equal(sent.status, 200);
    const sandboxedId = sent.body.data.message.id;
    await setSandbox(false);
    const text = (await client.get(`/messages/${sandboxedId}`)).text;
    assert.match(text, /class="notice sandbox"><strong>Sandbox message<\/strong>: accepted in sandbox mode/);
    assert.match(text, /<span class="badge sandbox" title="accepted in sandbox mode: nothing was sent">/);
    assert.doesNotMatch(text, /<strong>Sandbox mode<\/strong>/, 'the project is live: no project note');
    const list = (await client.get(`/messages?project=${seed.projectUid}`)).text;
    const row = (id: number) => new RegExp(`<tr data-key="${id}">[\\s\\S]*?</tr>`).exec(list)?.[0] ?? '';
    assert.match(row(sandboxedId), /class="badge sandbox"/, 'the sandboxed message is marked in the list');
    assert.doesNotMatch(row(messageId), /class="badge sandbox"/, 'the real one is not');
    assert.ok(!sandboxShown((await client.get(`/messages/${messageId}`)).text));
    const cancelled = await t.call('cancel_message', { api_key: seed.projectKey, arguments: { id: sandboxedId } });
    assert.equal(cancelled.status, 200);
  });

  it('shows update_project\'s refusals beside their fields, and saves nothing', async () => {
    const before = await stored();
    for (const [field, value, api] of [
      ['default_from', 'two@example.com, three@example.com', { settings: { default_from: 'two@example.com, three@example.com' } }],
      ['default_from', 'x\r\nBcc: all@example.com', { settings: { default_from: 'x\r\nBcc: all@example.com' } }],
      ['retention_days', '5000', { settings: { retention_days: 5000 } }],
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

  it('shows every field\'s refusal at once, each saying what is wrong with the value typed', async () => {
    const before = await stored();
    await client.get(settingsPath());
    const r = await client.post(settingsPath(), { name: '   ', default_from: 'a@x.test, b@x.test', retention_days: '99999' });
    assert.equal(r.status, 406);
    const errorOf = (text: string, field: string) => new RegExp(`id="err-${field}" role="status"><bdi>([^<]+)</bdi>`).exec(text)?.[1] ?? '';
    assert.match(errorOf(r.text, 'name'), /must not be empty/);
    assert.match(errorOf(r.text, 'default_from'), /must be one address/);
    assert.match(errorOf(r.text, 'retention_days'), /must be between 0 and 3650, got 99999/);
    for (const [typed, shown] of [['1.5', /whole number of days from 0 to 3650, got &quot;1.5&quot;/], ['a week', /whole number of days from 0 to 3650, got &quot;a week&quot;/]] as const) {
      await client.get(settingsPath());
      const one = await client.post(settingsPath(), { name: 'Kept', default_from: '', retention_days: typed });
      assert.equal(one.status, 406);
      assert.match(errorOf(one.text, 'retention_days'), shown);
      assert.doesNotMatch(one.text, /got a string/);
    }
    assert.deepEqual(await stored(), before);
  });

  it('keeps a pasted list with bad lines as typed and names those lines; Remove keeps the search', async () => {
    const page = `/suppressions?project=${seed.projectUid}`;
    await client.get(page);
    const typed = 'keep1@paste.example\nnot an address\nKeep Two <keep2@paste.example>\nalso@bad@';
    const r = await client.post('/suppressions/add', { project: seed.projectUid, addresses: typed, message: 'pasted' });
    assert.equal(r.status, 406, r.text.slice(0, 300));
    assert.ok(r.text.includes('>keep1@paste.example\nnot an address\nKeep Two &lt;keep2@paste.example&gt;\nalso@bad@</textarea>'), 'the text as typed');
    assert.match(r.text, /id="err-add" role="alert"><bdi>Not an address: line 2 \(“not an address”\), line 4 \(“also@bad@”\)\. Nothing was added/);
    assert.match(r.text, /id="s-note"[^>]*value="pasted"/);
    const listed = (await client.get(`${page}&q=paste.example`)).text;
    assert.ok(!listed.includes('keep1@paste.example'), 'nothing added');

    const fixed = await client.post('/suppressions/add', { project: seed.projectUid, addresses: 'keep1@paste.example\nkeep2@paste.example' });
    assert.equal(fixed.status, 303);
    const searched = (await client.get(`${page}&q=keep1`)).text;
    assert.match(searched, /href="\/suppressions\/remove\?[^"]*address=keep1%40paste\.example&amp;q=keep1"/, 'the Remove link carries the search');
    const confirm = (await client.get(`/suppressions/remove?project=${seed.projectUid}&address=keep1%40paste.example&q=keep1`)).text;
    assert.match(confirm, /<input type="hidden" name="q" value="keep1">/, 'the confirmation form carries the search');
    const removed = await client.post('/suppressions/remove', { project: seed.projectUid, address: 'keep1@paste.example', q: 'keep1' });
    assert.equal(removed.status, 303);
    assert.equal(removed.headers.get('location'), `/suppressions?project=${seed.projectUid}&q=keep1`);
    assert.match((await client.get(`${page}&q=keep1`)).text, /name="q" value="keep1"/);
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

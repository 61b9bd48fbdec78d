// preview_template against the real server, with both key kinds: a stored template and its layouts
// (or inline content) rendered with sample variables as delivery would, HTML escaped in the HTML
// part only, and the variables that had no value named (docs/api/preview-template.md).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startTestApp, type ApiReply, type Seed, type TestApp } from '../helpers/app.ts';

describe('preview_template', () => {
  let t: TestApp;
  let seed: Seed;
  before(async () => {
    t = await startTestApp();
    seed = await t.seed('preview');
  });
  after(() => t.close());

  const asProject = (args: Record<string, unknown>): Promise<ApiReply> => t.call('preview_template', { api_key: seed.projectKey, arguments: args });
  const asAccount = (args: Record<string, unknown>): Promise<ApiReply> =>
    t.call('preview_template', { api_key: seed.accountKey, arguments: { project_uid: seed.projectUid, ...args } });

  it('renders a stored template inside its layout, with either key kind', async () => {
    const created = await t.call('create_template', {
      api_key: seed.projectKey,
      arguments: {
        slug: 'order',
        subject: 'Order {{number}} for {{name}}',
        from: 'Shop <shop@example.com>',
        text: 'Hi {{name}},{{#each items}}\n- {{title}} x{{qty}}{{/each}}{{#if coupon}}\nCoupon: {{coupon}}{{/if}}',
        html: '<p>Hi {{name}}</p><ul>{{#each items}}<li>{{title}}</li>{{/each}}</ul>{{{footer}}}',
        parent: 'sample_parent_layout',
      },
    });
    assert.equal(created.status, 200, JSON.stringify(created.body));
    const variables = { name: 'Ann <ann>', number: 7, items: [{ title: 'Pen & Ink', qty: 2 }, { title: 'Pad', qty: 1 }], footer: '<hr>' };
    for (const call of [asProject, asAccount]) {
      const r = await call({ template: 'order', variables });
      assert.equal(r.status, 200, JSON.stringify(r.body));
      const p = r.body.data.preview;
      assert.equal(p.subject, 'Order 7 for Ann <ann>');
      assert.equal(p.from, 'Shop <shop@example.com>');
      assert.match(p.text, /^[\s\S]*Hi Ann <ann>,\n- Pen & Ink x2\n- Pad x1[\s\S]*$/);
      assert.doesNotMatch(p.text, /Coupon/);
      assert.match(p.html, /<p>Hi Ann &lt;ann&gt;<\/p><ul><li>Pen &amp; Ink<\/li><li>Pad<\/li><\/ul><hr>/);
      // The layout wraps the template (sample_parent_layout has a {{*}} in its HTML).
      assert.ok(p.html.length > '<p>Hi Ann &lt;ann&gt;</p>'.length + 40);
      assert.deepEqual(p.errors, {});
    }
  });

  it("shows the From a send gets: the call's, else the template's, else the project's default From, rendered", async () => {
    const setDefaultFrom = (value: string) => t.call('update_project', { api_key: seed.accountKey, arguments: { uid: seed.projectUid, settings: { default_from: value } } });
    assert.equal((await setDefaultFrom('"Billing, {{team}}" <billing@example.com>')).status, 200);
    const created = await t.call('create_template', { api_key: seed.projectKey, arguments: { slug: 'no-from', subject: 'Hi {{name}}', text: 'Body' } });
    assert.equal(created.status, 200, JSON.stringify(created.body));
    const variables = { name: 'Ann', team: 'EU' };
    for (const call of [asProject, asAccount]) {
      const r = await call({ template: 'no-from', variables });
      assert.equal(r.status, 200, JSON.stringify(r.body));
      assert.equal(r.body.data.preview.from, '"Billing, EU" <billing@example.com>');
    }
    // What a send of that template stores as its From (rendered per copy at delivery).
    const sent = await t.call('send_message', { api_key: seed.projectKey, arguments: { recipients: 'a@example.com', template: 'no-from', variables, deliver: false } });
    assert.equal(sent.status, 200, JSON.stringify(sent.body));
    const row = await t.app.services.store.db.selectFrom('messages').select('payload').where('id', '=', sent.body.data.message.id).executeTakeFirstOrThrow();
    assert.equal(JSON.parse(row.payload).from, '"Billing, {{team}}" <billing@example.com>');
    // The call's From, or the template's, wins; without a default_from, noreply@ the mailer host.
    assert.equal((await asProject({ template: 'no-from', from: 'Me <me@example.com>' })).body.data.preview.from, 'Me <me@example.com>');
    assert.equal((await asProject({ template: 'order' })).body.data.preview.from, 'Shop <shop@example.com>');
    assert.equal((await setDefaultFrom('')).status, 200);
    assert.equal((await asProject({ template: 'no-from' })).body.data.preview.from, `noreply@${t.app.services.config.mailerHost}`);
  });

  it('names the variables substituted without a value; a condition is not one', async () => {
    const r = await asProject({ content: { 'text/plain': 'Hi {{name}} {{#if vip}}VIP{{/if}} {{user.first}}{{user.last}}', 'text/html': '<b>{{greeting}}</b>' }, subject: 'For {{name}}', variables: { user: { first: 'A' } } });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.deepEqual(r.body.data.preview.missing.sort(), ['greeting', 'name', 'user.last']);
    assert.equal(r.body.data.preview.text, 'Hi   A');
  });

  it('reports template syntax errors per part instead of rendering', async () => {
    const r = await asProject({ content: { 'text/plain': 'ok {{name}}', 'text/html': '{{#if x}}never closed' } });
    assert.equal(r.status, 200);
    assert.equal(r.body.data.preview.html, null);
    assert.match(r.body.data.preview.errors.html, /Parse error|Expecting/);
  });

  it('create_template and update_template refuse a part that is not valid template syntax (406)', async () => {
    const bad = await t.call('create_template', { api_key: seed.projectKey, arguments: { slug: 'bad', html: '{{#each items}}<li>{{this}}</li>' } });
    assert.equal(bad.status, 406, JSON.stringify(bad.body));
    assert.match(bad.body.response.message, /html.*not a valid template/);
    const ok = await t.call('create_template', { api_key: seed.projectKey, arguments: { slug: 'fine', text: 'Hi {{first name}}', css: 'a{}' } });
    assert.equal(ok.status, 200);
    const upd = await t.call('update_template', { api_key: seed.projectKey, arguments: { slug: 'fine', subject: 'Hi {{> partial}}' } });
    assert.equal(upd.status, 406);
    assert.match(upd.body.response.message, /partials/);
  });

  it('refuses a call with nothing to preview (400), an unknown template (404), an account key without project_uid (400)', async () => {
    assert.equal((await asProject({})).status, 400);
    const unknown = await asProject({ template: 'nope' });
    assert.equal(unknown.status, 404, JSON.stringify(unknown.body));
    const noProject = await t.call('preview_template', { api_key: seed.accountKey, arguments: { template: 'order' } });
    assert.equal(noProject.status, 400);
    assert.match(noProject.body.response.message, /project_uid/);
  });
});

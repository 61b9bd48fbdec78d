// Template methods against the real server, with both key kinds: a project key manages its own
// project's templates, an account key names project_uid. Parent layouts must exist, never loop,
// and a layout in use cannot be deleted.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { MAX_TEMPLATE_CHAIN } from '../../src/operations/templates.ts';
import { startTestApp, type ApiReply, type Seed, type TestApp } from '../helpers/app.ts';

const VERSIONS = ['1.0', '1.1'] as const;

describe('template methods', () => {
  let t: TestApp;
  let seed: Seed;
  before(async () => {
    t = await startTestApp();
    seed = await t.seed('tpl');
  });
  after(() => t.close());

  /** With the project key (own project) or the account key (project_uid added). */
  const asProject = (method: string, args: Record<string, unknown>, version: '1.0' | '1.1' = '1.1'): Promise<ApiReply> =>
    t.call(method, { api_key: seed.projectKey, arguments: args }, { version });
  const asAccount = (method: string, args: Record<string, unknown>, version: '1.0' | '1.1' = '1.1'): Promise<ApiReply> =>
    t.call(method, { api_key: seed.accountKey, arguments: { project_uid: seed.projectUid, ...args } }, { version });
  const both = [
    ['project key', asProject],
    ['account key', asAccount],
  ] as const;

  it('CRUD with either key kind, on both versions', async () => {
    for (const [who, call] of both) {
      for (const version of VERSIONS) {
        const slug = `welcome_${who.split(' ')[0]}-${version}`;
        const created = await call('create_template', {
          slug, name: 'Welcome', subject: 'Hi {{name}}', from: 'Shop <shop@example.com>', text: 'Hello {{name}}',
          html: '<p>Hello {{name}}</p>', css: 'p { color: red }', parent: 'sample_parent_layout',
        }, version);
        assert.equal(created.status, 200, `${who} ${version} ${JSON.stringify(created.body)}`);
        const tpl = created.body.data.template;
        assert.deepEqual(
          { ...tpl, created_at: undefined, updated_at: undefined },
          {
            project_uid: seed.projectUid, slug, name: 'Welcome', subject: 'Hi {{name}}', from: 'Shop <shop@example.com>', text: 'Hello {{name}}',
            html: '<p>Hello {{name}}</p>', css: 'p { color: red }', parent: 'sample_parent_layout', created_at: undefined, updated_at: undefined,
          },
        );
        assert.match(tpl.created_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);

        const got = await call('get_template', { slug }, version);
        assert.equal(got.status, 200);
        assert.deepEqual(got.body.data.template, tpl);

        const updated = await call('update_template', { slug, subject: 'Welcome, {{name}}', css: '', parent: '' }, version);
        assert.equal(updated.status, 200);
        assert.equal(updated.body.data.template.subject, 'Welcome, {{name}}');
        assert.equal(updated.body.data.template.css, null);
        assert.equal(updated.body.data.template.parent, null);
        assert.equal(updated.body.data.template.text, 'Hello {{name}}');

        const list = await call('list_templates', {}, version);
        assert.equal(list.status, 200);
        const listed = list.body.data.templates.find((x: { slug: string }) => x.slug === slug);
        assert.equal(listed.subject, 'Welcome, {{name}}');
        assert.equal(listed.text, undefined, 'listings leave the bodies out');
        assert.ok(list.body.data.templates.some((x: { slug: string }) => x.slug === 'sample_child_template'));

        const deleted = await call('delete_template', { slug }, version);
        assert.equal(deleted.status, 200);
        assert.deepEqual(deleted.body.data.template, { project_uid: seed.projectUid, slug, deleted: true });
        assert.equal((await call('get_template', { slug }, version)).status, 404);
      }
    }
  });

  it('what one key kind writes the other reads (same project)', async () => {
    assert.equal((await asAccount('create_template', { slug: 'shared', subject: 'S' })).status, 200);
    const got = await asProject('get_template', { slug: 'shared' });
    assert.equal(got.body.data.template.subject, 'S');
    assert.equal(got.body.data.template.name, null);
    assert.equal((await asProject('update_template', { slug: 'shared', name: 'Shared' })).status, 200);
    assert.equal((await asAccount('get_template', { slug: 'shared' })).body.data.template.name, 'Shared');
    const row = await t.app.services.store.db.selectFrom('templates').selectAll().where('project_id', '=', seed.projectId).where('slug', '=', 'shared').executeTakeFirstOrThrow();
    assert.equal(row.name, 'Shared');
    assert.equal(row.subject, 'S');
  });

  it('project scoping: an account key needs project_uid (400), an unknown one is 404; a project key cannot reach another project', async () => {
    for (const method of ['create_template', 'update_template', 'get_template', 'delete_template', 'list_templates']) {
      const missing = await t.call(method, { api_key: seed.accountKey, arguments: { slug: 'shared' } });
      assert.equal(missing.status, 400, method);
      assert.match(missing.body.response.message, /project_uid/);
      const unknown = await t.call(method, { api_key: seed.accountKey, arguments: { project_uid: 'nope', slug: 'shared' } });
      assert.equal(unknown.status, 404, method);
      assert.equal(unknown.body.response.status, 'not_found');
    }
    const other = await t.seed('other');
    // Another account's project is unknown to this account key.
    assert.equal((await t.call('list_templates', { api_key: seed.accountKey, arguments: { project_uid: other.projectUid } })).status, 404);
    // A project key naming another project is refused; naming its own is fine.
    assert.equal((await asProject('list_templates', { project_uid: other.projectUid })).status, 404);
    assert.equal((await asProject('list_templates', { project_uid: seed.projectUid })).status, 200);
    // Templates of another project are not visible.
    assert.equal((await t.call('get_template', { api_key: other.projectKey, arguments: { slug: 'shared' } })).status, 404);
  });

  it('errors: 400 missing slug, 404 unknown slug, 400 duplicate slug, 406 naming the field', async () => {
    for (const method of ['create_template', 'update_template', 'get_template', 'delete_template']) {
      const r = await asProject(method, {});
      assert.equal(r.status, 400, method);
      assert.match(r.body.response.message, /"slug"/);
    }
    for (const method of ['update_template', 'get_template', 'delete_template']) {
      assert.equal((await asProject(method, { slug: 'nope' })).status, 404, method);
    }
    const dup = await asProject('create_template', { slug: 'sample_child_template' });
    assert.equal(dup.status, 400);
    assert.equal(dup.body.response.status, 'bad_request');
    assert.match(dup.body.response.message, /already exists/);
    for (const [args, field] of [
      [{ slug: 'has space' }, 'slug'],
      [{ slug: 'slash/x' }, 'slug'],
      [{ slug: 's'.repeat(101) }, 'slug'],
      [{ slug: ['a'] }, 'slug'],
      [{ slug: 'ok1', subject: { a: 1 } }, 'subject'],
      [{ slug: 'ok1', subject: 'a\r\nBcc: x@y.z' }, 'subject'],
      [{ slug: 'ok1', from: 'a@b.c\nX: y' }, 'from'],
      [{ slug: 'ok1', html: ['<p>'] }, 'html'],
      [{ slug: 'ok1', text: { t: 1 } }, 'text'],
      [{ slug: 'ok1', css: [1] }, 'css'],
      [{ slug: 'ok1', name: ['n'] }, 'name'],
      [{ slug: 'ok1', parent: 'bad parent' }, 'parent'],
      [{ slug: 'ok1', project_uid: ['p'] }, 'project_uid'],
    ] as const) {
      const r = await asProject('create_template', args);
      assert.equal(r.status, 406, JSON.stringify(args));
      assert.equal(r.body.response.status, 'call_error');
      assert.ok(r.body.response.message.includes(`"${field}"`), r.body.response.message);
    }
    assert.equal((await asProject('get_template', { slug: 'ok1' })).status, 404, 'nothing was stored');
  });

  it('checks in order: missing (400), malformed (406), unknown project (404), parent (412), duplicate (400)', async () => {
    const acct = (args: Record<string, unknown>) => t.call('create_template', { api_key: seed.accountKey, arguments: args });
    assert.equal((await acct({ project_uid: 'nope' })).status, 400);
    assert.equal((await acct({ project_uid: 'nope', slug: 'bad slug' })).status, 406);
    assert.equal((await acct({ project_uid: 'nope', slug: 'fine', subject: 'a\nb' })).status, 406);
    assert.equal((await acct({ project_uid: 'nope', slug: 'fine', parent: 'nope' })).status, 404);
    assert.equal((await acct({ project_uid: seed.projectUid, slug: 'sample_child_template', parent: 'nope' })).status, 412);
    assert.equal((await acct({ project_uid: seed.projectUid, slug: 'sample_child_template', parent: 'sample_parent_layout' })).status, 400);
  });

  it('parent: must exist (412), may not loop (412), chains are bounded', async () => {
    const missing = await asProject('create_template', { slug: 'orphan', parent: 'no_such_layout' });
    assert.equal(missing.status, 412);
    assert.equal(missing.body.response.status, 'precondition_failed');
    assert.match(missing.body.response.message, /no_such_layout/);

    assert.equal((await asProject('create_template', { slug: 'a' })).status, 200);
    assert.equal((await asProject('create_template', { slug: 'b', parent: 'a' })).status, 200);
    assert.equal((await asProject('create_template', { slug: 'c', parent: 'b' })).status, 200);
    const self = await asProject('update_template', { slug: 'a', parent: 'a' });
    assert.equal(self.status, 412);
    const loop = await asAccount('update_template', { slug: 'a', parent: 'c' });
    assert.equal(loop.status, 412);
    assert.match(loop.body.response.message, /loop/);
    assert.equal((await asProject('get_template', { slug: 'a' })).body.data.template.parent, null, 'the refused update changed nothing');
    const selfCreate = await asProject('create_template', { slug: 'selfish', parent: 'selfish' });
    assert.equal(selfCreate.status, 412);

    // A chain of MAX_TEMPLATE_CHAIN templates is fine; one more is refused, on create and on update.
    let parent = 'c';
    for (let i = 4; i <= MAX_TEMPLATE_CHAIN; i++) {
      const r = await asProject('create_template', { slug: `l${i}`, parent });
      assert.equal(r.status, 200, `l${i}`);
      parent = `l${i}`;
    }
    const tooDeep = await asProject('create_template', { slug: 'deep', parent });
    assert.equal(tooDeep.status, 412);
    assert.match(tooDeep.body.response.message, /longer than/);
    // Hanging the chain under another layout would lengthen it past the limit too.
    assert.equal((await asProject('update_template', { slug: 'a', parent: 'sample_parent_layout' })).status, 412);
  });

  it('deleting a layout in use is 412; once unused it can go', async () => {
    const r = await asProject('delete_template', { slug: 'sample_parent_layout' });
    assert.equal(r.status, 412);
    assert.equal(r.body.response.status, 'precondition_failed');
    assert.match(r.body.response.message, /sample_child_template/);
    assert.equal((await asProject('update_template', { slug: 'sample_child_template', parent: '' })).status, 200);
    assert.equal((await asAccount('delete_template', { slug: 'sample_parent_layout' })).status, 200);
  });

  it('Ruby-style and loose values: numbers become strings, nulls are absent', async () => {
    const r = await asProject('create_template', { slug: 2024, subject: 42, text: null }, '1.0');
    assert.equal(r.status, 200);
    assert.equal(r.body.data.template.slug, '2024');
    assert.equal(r.body.data.template.subject, '42');
    assert.equal(r.body.data.template.text, null);
    // null in update means "not given": the field keeps its value.
    const u = await asProject('update_template', { slug: '2024', subject: null, text: 'now' });
    assert.equal(u.body.data.template.subject, '42');
    assert.equal(u.body.data.template.text, 'now');
  });
});

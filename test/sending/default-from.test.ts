// The From of a message that names none (docs/api/send-message.md, "From"): the project's
// default_from when it sets one, else noreply@ the --mailer-host of the process that accepts the
// message, resolved then, as the Message-ID is. So following the README (`posthorn init`, then
// `serve --mailer-host ...`) sends From and Message-ID on the one configured host, for the project
// init made, its sample templates and a project made later through the API alike; a From the user
// set is kept. Real `node bin/posthorn.js` processes and a real SMTP server.
//
// And migration 230: a project's default From and its sample's From as an earlier version wrote
// them at creation are cleared (they follow the configured host from then on); what a user set or
// changed is kept.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { simpleParser } from 'mailparser';
import { freshDatabaseUrl, openTestStore, releaseDatabaseUrl, testDatabase } from '../helpers/databases.ts';
import { BIN, startPosthorn, stopAll } from '../helpers/processes.ts';
import { startSmtpPeer, type SmtpPeer } from '../helpers/smtp-peers.ts';
import { until } from '../helpers/wait.ts';
import { insertAccount } from '../../src/storage/accounts.ts';
import { insertProject } from '../../src/storage/projects.ts';
import { insertTemplate } from '../../src/storage/templates.ts';
import { up as migrateDefaultFrom } from '../../src/storage/migrations/230-default-from-at-sending.ts';

describe(`the default From follows --mailer-host as configured when mail is sent (${testDatabase()})`, () => {
  let dataDir: string;
  let databaseUrl: string | null;
  let peer: SmtpPeer;

  before(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'posthorn-default-from-'));
    databaseUrl = await freshDatabaseUrl();
    peer = await startSmtpPeer();
  });
  after(async () => {
    await stopAll();
    await peer.close();
    await releaseDatabaseUrl(databaseUrl);
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('init on a machine named otherwise, then serve --mailer-host: From and Message-ID on the configured host; a From the user set is kept', async () => {
    const env = { POSTHORN_DATA: dataDir, DATABASE_URL: databaseUrl ?? '', POSTHORN_SECRET_KEY: 'default-from-key', LOG_LEVEL: 'info', POSTHORN_DNS_SERVERS: '127.0.0.1:9' };
    // The README's order: init first, on the machine's own name (what --mailer-host defaults to).
    const init = spawnSync(process.execPath, [BIN, 'init', '--json', '--mailer-host', 'vm.localdomain'], { env: { ...process.env, ...env, LOG_LEVEL: 'warn' }, encoding: 'utf8', timeout: 60_000 });
    assert.equal(init.status, 0, init.stderr);
    const keys = JSON.parse(init.stdout) as { account: { api_key: string }; project: { uid: string; api_key: string } };
    const serve = startPosthorn('serve', ['serve', '--processes', '1', '--port', '0', '--poll-ms', '100', '--mailer-host', 'mail.example.test', '--transport-map', peer.transportFor('example.test')], env);
    const { url } = await serve.waitUntilRunning();
    const call = async (method: string, apiKey: string, args: Record<string, unknown>) => {
      const r = await fetch(`${url}/v.1.1/${method}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ api_key: apiKey, arguments: args }) });
      const body = await r.json();
      assert.equal(r.status, 200, JSON.stringify(body));
      return body.data;
    };
    const delivered = async (to: string) => {
      const mail = await until(`a message for ${to}`, () => peer.received.find((m) => m.to.includes(to)), 30_000);
      const parsed = await simpleParser(mail.raw);
      return { from: parsed.from?.value.map((a) => `${a.name ? `${a.name} ` : ''}<${a.address}>`).join(', '), messageId: mail.messageId };
    };

    // The project init made: no default From stored, so none shown.
    assert.equal((await call('get_project', keys.account.api_key, { uid: keys.project.uid })).project.settings.default_from, null);
    // The README's first send: the sample template, no From of its own.
    await call('send_message', keys.project.api_key, { recipients: ['sample@example.test'], template: 'sample_child_template', variables: { name: 'World' } });
    const sample = await delivered('sample@example.test');
    assert.equal(sample.from, '<noreply@mail.example.test>');
    assert.match(sample.messageId ?? '', /@mail\.example\.test>$/);
    await call('send_message', keys.project.api_key, { recipients: ['plain@example.test'], content: { 'text/plain': 'hi' }, subject: 'Plain' });
    assert.equal((await delivered('plain@example.test')).from, '<noreply@mail.example.test>');
    // The preview shows the From a send would get.
    assert.equal((await call('preview_template', keys.project.api_key, { template: 'sample_child_template', variables: { name: 'x' } })).preview.from, 'noreply@mail.example.test');

    // A project made later through the API: the same host.
    const later = await call('create_project', keys.account.api_key, { name: 'Later', uid: 'later' });
    await call('send_message', later.project.api_key, { recipients: ['later@example.test'], template: 'sample_child_template', variables: { name: 'Later' } });
    assert.equal((await delivered('later@example.test')).from, '<noreply@mail.example.test>');

    // A From the user set wins, and is kept as set; "" goes back to the configured host's.
    await call('update_project', keys.account.api_key, { uid: keys.project.uid, settings: { default_from: 'Shop <shop@example.test>' } });
    await call('send_message', keys.project.api_key, { recipients: ['shop@example.test'], template: 'sample_child_template', variables: { name: 'Shop' } });
    assert.equal((await delivered('shop@example.test')).from, 'Shop <shop@example.test>');
    const cleared = await call('update_project', keys.account.api_key, { uid: keys.project.uid, settings: { default_from: '' } });
    assert.equal(cleared.project.settings.default_from, null);
    await call('send_message', keys.project.api_key, { recipients: ['again@example.test'], content: { 'text/plain': 'hi' }, subject: 'Again' });
    assert.equal((await delivered('again@example.test')).from, '<noreply@mail.example.test>');
    assert.equal((await serve.stop()).code, 0, serve.tail());
  });

  it('migration 230 clears the default From and sample From written at creation, and keeps what a user set', async () => {
    const t = await openTestStore();
    try {
      const db = t.store.db;
      const account = await insertAccount(db, { uid: 'acct', name: 'Account', now: 1000 });
      const project = async (uid: string, settings: string) => {
        const row = await insertProject(db, { accountId: account.id, uid, name: uid, now: 1000, settings });
        assert.ok(!('duplicate' in row));
        return row;
      };
      // As createProject wrote them: cleared.
      const made = await project('made', '{"default_from":"noreply@vm.localdomain"}');
      // Through update_project (every setting written), even with the same value: the user's.
      const updated = await project('updated', '{"tracking":false,"sandbox":false,"default_from":"noreply@vm.localdomain"}');
      const own = await project('own', '{"tracking":false,"sandbox":false,"default_from":"Shop <shop@example.test>"}');
      const sample = (projectId: number, from: string, updatedAt: number) =>
        db.insertInto('templates').values({ project_id: projectId, slug: 'sample_child_template', name: 'Sample child template', subject: 's', from_address: from, parent_slug: null, css: null, text_body: 'x', html_body: null, created_at: 1000, updated_at: updatedAt }).execute();
      await sample(made.id, 'Posthorn Sample <sample@vm.localdomain>', 1000);
      await sample(updated.id, 'Posthorn Sample <sample@vm.localdomain>', 2000);
      await sample(own.id, 'Shop <shop@example.test>', 1000);
      await insertTemplate(db, own.id, { slug: 'receipt', name: null, subject: 's', from_address: 'Posthorn Sample <sample@vm.localdomain>', parent_slug: null, css: null, text_body: 'x', html_body: null }, 1000);

      await migrateDefaultFrom(db);

      const settings = Object.fromEntries((await db.selectFrom('projects').select(['uid', 'settings']).execute()).map((r) => [r.uid, r.settings]));
      assert.deepEqual(settings, {
        made: '{}',
        updated: '{"tracking":false,"sandbox":false,"default_from":"noreply@vm.localdomain"}',
        own: '{"tracking":false,"sandbox":false,"default_from":"Shop <shop@example.test>"}',
      });
      const froms = (await db.selectFrom('templates').select(['project_id', 'slug', 'from_address']).orderBy('id').execute()).map((r) => [Number(r.project_id), r.slug, r.from_address]);
      assert.deepEqual(froms, [
        [made.id, 'sample_child_template', null],
        [updated.id, 'sample_child_template', 'Posthorn Sample <sample@vm.localdomain>'],
        [own.id, 'sample_child_template', 'Shop <shop@example.test>'],
        [own.id, 'receipt', 'Posthorn Sample <sample@vm.localdomain>'],
      ]);
    } finally {
      await t.close();
    }
  });
});

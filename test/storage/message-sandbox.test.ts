// messages.sandbox (migration 310): the sandbox mode a message was accepted with, written at
// acceptance from its project's setting then (docs/sandbox.md), and filled in by the migration for
// the messages stored before it from their project's setting when it runs.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { up as migrateSandbox } from '../../src/storage/migrations/310-message-sandbox.ts';
import { startTestApp, type Seed, type TestApp } from '../helpers/app.ts';

describe('messages.sandbox', () => {
  let t: TestApp;
  let seed: Seed;

  const setSandbox = async (on: boolean) => {
    const r = await t.call('update_project', { api_key: seed.accountKey, arguments: { uid: seed.projectUid, settings: { sandbox: on } } });
    assert.equal(r.status, 200, JSON.stringify(r.body));
  };
  const send = async (uid: string) => {
    const r = await t.call('send_message', { api_key: seed.projectKey, uid, arguments: { recipients: ['a@example.test'], headers: { subject: uid, from: 'a@example.test' }, content: { 'text/plain': 'x' } } });
    assert.equal(r.status, 200, JSON.stringify(r.body));
  };
  const stored = async () => Object.fromEntries((await t.app.services.store.db.selectFrom('messages').select(['uid', 'sandbox']).execute()).map((r) => [r.uid, Number(r.sandbox)]));

  before(async () => {
    t = await startTestApp({ background: false });
    seed = await t.seed('sandbox-column');
    await send('live');
    await setSandbox(true);
    await send('sandboxed');
    await setSandbox(false);
  });
  after(() => t?.close());

  it('is written at acceptance from the project\'s setting then, and kept when the setting changes', async () => {
    assert.deepEqual(await stored(), { live: 0, sandboxed: 1 });
  });

  it('is filled in by migration 310 for the messages stored before it, from their project\'s setting when it runs', async () => {
    const db = t.app.services.store.db;
    await db.schema.alterTable('messages').dropColumn('sandbox').execute();
    await migrateSandbox(db, t.app.services.store.dialect);
    assert.deepEqual(await stored(), { live: 0, sandboxed: 0 }, 'a live project: every message real');
    await db.schema.alterTable('messages').dropColumn('sandbox').execute();
    await setSandbox(true);
    await migrateSandbox(db, t.app.services.store.dialect);
    assert.deepEqual(await stored(), { live: 1, sandboxed: 1 }, 'a sandbox project: every message sandboxed');
  });
});

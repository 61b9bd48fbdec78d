// messages.send_at (migration 280): written at acceptance for a send scheduled with send_at, null
// otherwise, and filled in by the migration for the messages stored before it from their payloads;
// get_messages reads it (docs/api/reports.md, "get_messages").
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { up as migrateSendAt } from '../../src/storage/migrations/280-message-send-at.ts';
import { startTestApp, type Seed, type TestApp } from '../helpers/app.ts';

const HOUR = 3_600_000;

describe('messages.send_at', () => {
  let t: TestApp;
  let seed: Seed;
  const sendAt = Math.ceil((Date.now() + 2 * HOUR) / 1000) * 1000;

  before(async () => {
    t = await startTestApp({ background: false });
    seed = await t.seed('send-at');
    const send = async (uid: string, extra: Record<string, unknown>) => {
      const r = await t.call('send_message', { api_key: seed.projectKey, uid, arguments: { recipients: ['a@example.test'], headers: { subject: uid, from: 'a@example.test' }, content: { 'text/plain': 'x' }, ...extra } });
      assert.equal(r.status, 200, JSON.stringify(r.body));
    };
    await send('later', { send_at: new Date(sendAt).toISOString() });
    await send('past', { send_at: new Date(Date.now() - HOUR).toISOString() });
    await send('now', {});
  });
  after(() => t?.close());

  const stored = async () => Object.fromEntries((await t.app.services.store.db.selectFrom('messages').select(['uid', 'send_at']).execute()).map((r) => [r.uid, r.send_at === null ? null : Number(r.send_at)]));
  const listed = async () => Object.fromEntries(Object.entries((await t.call('get_messages', { api_key: seed.projectKey })).body.data as Record<string, { send_at: string | null }>).map(([uid, m]) => [uid, m.send_at]));
  const expected = { later: new Date(sendAt).toISOString().replace('.000Z', 'Z'), past: null, now: null };

  it('is written at acceptance: the time of a send scheduled ahead, null for one due at acceptance (a send_at in the past is now)', async () => {
    assert.deepEqual(await stored(), { later: sendAt, past: null, now: null });
    assert.deepEqual(await listed(), expected);
  });

  it('is filled in by migration 280 for the messages stored before it, from their payloads', async () => {
    const db = t.app.services.store.db;
    await db.schema.alterTable('messages').dropColumn('send_at').execute();
    await migrateSendAt(db, t.app.services.store.dialect);
    assert.deepEqual(await stored(), { later: sendAt, past: null, now: null });
    assert.deepEqual(await listed(), expected);
  });
});

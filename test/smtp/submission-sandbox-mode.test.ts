// Mail submitted over SMTP keeps the sandbox mode its project had when it was accepted
// (docs/sandbox.md, "The mode is fixed per message"), as send_message's does: stored with the
// message, and said by the events of its copies completed at acceptance.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startSubmissionHarness, type SubmissionHarness } from './harness.ts';

describe('SMTP submission: the sandbox mode is fixed at acceptance', () => {
  let h: SubmissionHarness;

  before(async () => {
    h = await startSubmissionHarness({ delivery: false });
  });
  after(() => h?.close());

  async function setSandbox(on: boolean): Promise<void> {
    const r = await h.t.call('update_project', { api_key: h.seed.accountKey, arguments: { uid: h.seed.projectUid, settings: { sandbox: on } } });
    assert.equal(r.status, 200, JSON.stringify(r.body));
  }

  async function submit(uid: string): Promise<void> {
    const transport = h.client();
    try {
      const info = await transport.sendMail({ from: 'app@example.test', to: ['ok@example.test', 'app-test@null.postageapp.com'], subject: uid, text: 'x', headers: { 'X-Posthorn-Uid': uid } });
      assert.match(info.response, /^250 /);
    } finally {
      transport.close();
    }
  }

  it('stores the mode of the moment of acceptance, and the events of a sandboxed message say so', async () => {
    await setSandbox(true);
    await submit('smtp-sandboxed');
    await setSandbox(false);
    await submit('smtp-live');
    const db = h.t.app.services.store.db;
    const rows = await db.selectFrom('messages').select(['uid', 'sandbox']).where('project_id', '=', h.seed.projectId).execute();
    assert.deepEqual(Object.fromEntries(rows.map((r) => [r.uid, Number(r.sandbox)])), { 'smtp-sandboxed': 1, 'smtp-live': 0 });
    const events = (await db.selectFrom('events').select(['payload']).execute()).map((e) => JSON.parse(e.payload));
    const of = (uid: string) => events.filter((p) => p.message_uid === uid);
    assert.equal(of('smtp-sandboxed').length, 1);
    assert.equal(of('smtp-sandboxed')[0].sandbox, true);
    assert.equal(of('smtp-live').length, 1);
    assert.equal('sandbox' in of('smtp-live')[0], false);
  });
});

// Acceptance in as few round trips as the database allows (storage/messages.ts storeAcceptedMessage,
// docs/decisions/0003-performance.md): on PostgreSQL a send_message is ONE statement for the message
// and its transmissions, without BEGIN/COMMIT, and a duplicate uid is still refused with the same
// answer, leaving nothing behind. Statements are counted where every one of them passes: the
// query method of node-postgres's Client, which the pool's connections (and the LISTEN one) use.
// The app runs `--role api`, so no background job issues statements meanwhile. The API key lookup
// is kept for KEY_LOOKUP_TTL_MS in the process, so a send_message usually issues no other statement.
import assert from 'node:assert/strict';
import { after, afterEach, before, describe, it } from 'node:test';
import pg from 'pg';
import { forgetKeyLookups, KEY_LOOKUP_TTL_MS } from '../../src/storage/api-keys.ts';
import { onlyOn, testDatabase } from '../helpers/databases.ts';
import { startTestApp, type Seed, type TestApp } from '../helpers/app.ts';

type Query = (...args: unknown[]) => unknown;
const originalQuery = pg.Client.prototype.query as unknown as Query;

/** The text of every statement sent while `fn` runs. */
async function statementsDuring(fn: () => Promise<unknown>): Promise<string[]> {
  const seen: string[] = [];
  (pg.Client.prototype as unknown as { query: Query }).query = function (this: unknown, ...args: unknown[]) {
    const first = args[0] as string | { text?: string } | undefined;
    seen.push(typeof first === 'string' ? first : String(first?.text ?? ''));
    return originalQuery.apply(this, args);
  };
  try {
    await fn();
  } finally {
    (pg.Client.prototype as unknown as { query: Query }).query = originalQuery;
  }
  return seen;
}

const writesMessages = (text: string) => /insert into "?messages"?/i.test(text);
const isTransactionControl = (text: string) => /^\s*(begin|commit|rollback|savepoint|release)\b/i.test(text);
const isNotify = (text: string) => /pg_notify/i.test(text);

describe(`send_message statements (${testDatabase()})`, () => {
  let t: TestApp;
  let seed: Seed;
  before(async () => {
    t = await startTestApp({ config: { role: 'api' } });
    seed = await t.seed('statements');
  });
  after(() => t.close());
  afterEach(() => {
    (pg.Client.prototype as unknown as { query: Query }).query = originalQuery;
  });

  const send = (uid: string, recipients: unknown, content = 'Hello') =>
    t.call('send_message', { api_key: seed.projectKey, uid, arguments: { recipients, headers: { from: 'a@example.test', subject: 'S' }, content: { 'text/plain': content } } });

  const stored = async (uid: string) => {
    const db = t.app.services.store.db;
    const messages = await db.selectFrom('messages').selectAll().where('uid', '=', uid).execute();
    const transmissions = messages.length
      ? await db.selectFrom('transmissions').selectAll().where('message_id', '=', messages[0].id).orderBy('id').execute()
      : [];
    return { messages, transmissions };
  };

  it('stores the message and one transmission per recipient, due now, in recipient order', async () => {
    const reply = await send('order-1', { 'x@example.test': { n: 1 }, 'y@example.test': {}, 'z@example.test': { n: 3 } });
    assert.equal(reply.status, 200, JSON.stringify(reply.body));
    const { messages, transmissions } = await stored('order-1');
    assert.equal(messages.length, 1);
    assert.equal(messages[0].recipient_count, 3);
    assert.equal(reply.body.data.message.id, Number(messages[0].id));
    assert.deepEqual(transmissions.map((r) => [r.recipient, r.status, r.variables, r.attempts]), [
      ['x@example.test', 'queued', '{"n":1}', 0],
      ['y@example.test', 'queued', null, 0],
      ['z@example.test', 'queued', '{"n":3}', 0],
    ]);
    for (const row of transmissions) {
      assert.equal(Number(row.project_id), seed.projectId);
      assert.equal(Number(row.next_attempt_at), Number(messages[0].created_at));
      assert.equal(row.locked_by, null);
    }
  });

  it('is ONE statement on PostgreSQL: no BEGIN or COMMIT, the transmissions in the message INSERT', { skip: onlyOn('postgres') }, async () => {
    await send('warm-up', 'w@example.test'); // the key and the prepared statement exist already
    const statements = await statementsDuring(async () => {
      const reply = await send('one-statement', ['a@example.test', 'b@example.test']);
      assert.equal(reply.status, 200, JSON.stringify(reply.body));
    });
    const writes = statements.filter(writesMessages);
    assert.equal(writes.length, 1, `statements:\n${statements.join('\n---\n')}`);
    assert.match(writes[0], /insert into "?transmissions"?/i);
    assert.deepEqual(statements.filter(isTransactionControl), [], 'no transaction control');
    // Besides the acceptance: the coalesced wake-up, and the key lookup only when the kept one
    // (storage/api-keys.ts) has expired since the warm-up.
    const others = statements.filter((s) => !writesMessages(s) && !isNotify(s));
    assert.ok(others.length <= 1 && others.every((s) => /api_keys/.test(s)), `unexpected statements:\n${others.join('\n---\n')}`);
    assert.equal((await stored('one-statement')).transmissions.length, 2);
  });

  it('on PostgreSQL the acceptances of one turn share ONE statement; each gets its own id and rows, a taken or repeated uid is the duplicate', { skip: onlyOn('postgres') }, async () => {
    const { storeAcceptedMessage } = await import('../../src/storage/messages.ts');
    const store = t.app.services.store;
    const now = Date.now();
    const acceptance = (uid: string, recipients: string[], projectId = seed.projectId) => ({
      message: { project_id: projectId, uid, unique_id: `u-${uid}`, template: null, subject: 'S', from_address: 'a@example.test', deliver: 1, created_at: now, send_at: null, sandbox: 0, payload: '{}' },
      copies: recipients.map((recipient, i) => ({ recipient, recipientName: i === 0 ? 'First' : null, variables: i === 1 ? '{"n":2}' : null, subject: i === 1 ? 'S 2' : null, completed: null })),
      dueAt: now,
    });
    assert.equal((await send('group-taken', 'x@example.test')).status, 200);
    await storeAcceptedMessage(store, acceptance('group-warm-1', ['w@example.test'])); // prepared, pool warm
    let results: Array<{ id: number } | { duplicate: true }> = [];
    const statements = await statementsDuring(async () => {
      results = await Promise.all([
        storeAcceptedMessage(store, acceptance('group-a', ['a1@example.test', 'a2@example.test', 'a3@example.test'])),
        storeAcceptedMessage(store, acceptance('group-taken', ['nobody@example.test'])),
        storeAcceptedMessage(store, acceptance('group-b', ['b1@example.test'])),
        storeAcceptedMessage(store, acceptance('group-a', ['again@example.test'])),
        storeAcceptedMessage(store, acceptance('group-c', ['c1@example.test', 'c2@example.test'])),
      ]);
    });
    // group-a's repeat waits for the next statement; the other four are one.
    assert.equal(statements.filter(writesMessages).length, 2, `statements:\n${statements.join('\n---\n')}`);
    assert.deepEqual(statements.filter(isTransactionControl), []);
    assert.deepEqual(results.map((r) => ('duplicate' in r ? 'duplicate' : 'stored')), ['stored', 'duplicate', 'stored', 'duplicate', 'stored']);
    const ids = results.filter((r): r is { id: number } => 'id' in r).map((r) => r.id);
    assert.equal(new Set(ids).size, 3);
    for (const [uid, recipients] of [['group-a', ['a1@example.test', 'a2@example.test', 'a3@example.test']], ['group-b', ['b1@example.test']], ['group-c', ['c1@example.test', 'c2@example.test']]] as const) {
      const { messages, transmissions } = await stored(uid);
      assert.equal(messages.length, 1, uid);
      assert.equal(Number(messages[0].id), ids[uid === 'group-a' ? 0 : uid === 'group-b' ? 1 : 2], `${uid} answered with its own id`);
      assert.deepEqual(transmissions.map((r) => r.recipient), [...recipients], `${uid}: its copies, in order`);
      assert.equal(transmissions[0].recipient_name, 'First');
      if (recipients.length > 1) assert.deepEqual([transmissions[1].variables, transmissions[1].subject, transmissions[0].subject], ['{"n":2}', 'S 2', null]);
    }
    assert.deepEqual((await stored('group-taken')).transmissions.map((r) => r.recipient), ['x@example.test']);

    // A statement carries at most 10,000 copies: three messages of 4,000 make two statements.
    const big = (uid: string) => acceptance(uid, Array.from({ length: 4000 }, (_, i) => `big${i}@example.test`));
    const bigStatements = await statementsDuring(async () => {
      const stored3 = await Promise.all([storeAcceptedMessage(store, big('big-1')), storeAcceptedMessage(store, big('big-2')), storeAcceptedMessage(store, big('big-3'))]);
      assert.ok(stored3.every((r) => 'id' in r));
    });
    assert.equal(bigStatements.filter(writesMessages).length, 2);
    assert.equal((await stored('big-3')).transmissions.length, 4000);

    // A bad row fails alone: the group is retried one acceptance at a time.
    const mixed = await Promise.allSettled([
      storeAcceptedMessage(store, acceptance('group-d', ['d1@example.test'])),
      storeAcceptedMessage(store, acceptance('group-bad', ['bad@example.test'], 987654321)), // no such project
      storeAcceptedMessage(store, acceptance('group-e', ['e1@example.test'])),
    ]);
    assert.deepEqual(mixed.map((r) => r.status), ['fulfilled', 'rejected', 'fulfilled']);
    assert.equal((await stored('group-d')).transmissions.length, 1);
    assert.equal((await stored('group-e')).transmissions.length, 1);
    assert.equal((await stored('group-bad')).messages.length, 0);
  });

  it('refuses a reused uid with the same answer, writing nothing, on either path', async () => {
    const first = await send('dup-1', 'first@example.test');
    assert.equal(first.status, 200);
    const again = await send('dup-1', ['other@example.test', 'third@example.test'], 'different');
    assert.equal(again.status, 400);
    assert.equal(again.body.response.status, 'bad_request');
    assert.equal(again.body.response.message, 'Uid dup-1 already exists. Assuming message duplication.');
    assert.equal(again.body.response.uid, 'dup-1');
    // The acceptance events' path (a copy completed at acceptance is a transaction on every database).
    const sink = await send('dup-1', 'someone@null.postageapp.com');
    assert.equal(sink.status, 400);
    assert.equal(sink.body.response.message, 'Uid dup-1 already exists. Assuming message duplication.');
    const { messages, transmissions } = await stored('dup-1');
    assert.equal(messages.length, 1);
    assert.deepEqual(transmissions.map((r) => r.recipient), ['first@example.test']);
  });

  it('concurrent sends of one uid: exactly one is stored, every other is the duplicate answer', async () => {
    const replies = await Promise.all(Array.from({ length: 8 }, (_, i) => send('race-1', `r${i}@example.test`)));
    assert.deepEqual(replies.map((r) => r.status).sort(), [200, 400, 400, 400, 400, 400, 400, 400]);
    for (const r of replies.filter((x) => x.status === 400)) assert.equal(r.body.response.message, 'Uid race-1 already exists. Assuming message duplication.');
    const { messages, transmissions } = await stored('race-1');
    assert.equal(messages.length, 1);
    assert.equal(transmissions.length, 1);
  });

  it('a key lookup is kept for a second: a change through this process is seen at once, one by another process within the second', async () => {
    const other = await t.seed('kept-key');
    const sendAs = (uid: string) => t.call('send_message', { api_key: other.projectKey, uid, arguments: { recipients: 'k@example.test', headers: { from: 'a@example.test' }, content: 'x' } });
    assert.equal((await sendAs('kept-1')).status, 200); // looked up and kept
    // Through this process's operations (the account API): forgotten at once.
    assert.equal((await t.call('disable_project', { api_key: other.accountKey, arguments: { uid: other.projectUid } })).status, 200);
    assert.equal((await sendAs('kept-2')).status, 423);
    assert.equal((await t.call('enable_project', { api_key: other.accountKey, arguments: { uid: other.projectUid } })).status, 200);
    assert.equal((await sendAs('kept-3')).status, 200);
    // As another process (the CLI, another API process) would: the row changes under the kept lookup.
    await t.app.services.store.db.updateTable('projects').set({ status: 'disabled' }).where('id', '=', other.projectId).execute();
    const changedAt = performance.now();
    let status = 200;
    for (let i = 0; status === 200 && performance.now() - changedAt < KEY_LOOKUP_TTL_MS + 2000; i++) {
      status = (await sendAs(`kept-poll-${i}`)).status;
      if (status === 200) await new Promise((r) => setTimeout(r, 50));
    }
    assert.equal(status, 423, `still accepted ${Math.round(performance.now() - changedAt)} ms after the change`);
  });

  it('requests that find their key lookup expired together share one lookup', { skip: onlyOn('postgres') }, async () => {
    const other = await t.seed('shared-lookup');
    const sendAs = (uid: string) => t.call('send_message', { api_key: other.projectKey, uid, arguments: { recipients: 'k@example.test', headers: { from: 'a@example.test' }, content: 'x' } });
    assert.equal((await sendAs('shared-warm')).status, 200);
    forgetKeyLookups(); // as when the kept lookup expires
    let replies: Array<{ status: number }> = [];
    const statements = await statementsDuring(async () => {
      replies = await Promise.all(Array.from({ length: 12 }, (_, i) => sendAs(`shared-${i}`)));
    });
    assert.deepEqual(replies.map((r) => r.status), Array(12).fill(200));
    assert.equal(statements.filter((text) => /"api_keys"/.test(text)).length, 1, statements.join('\n'));
  });

  it('copies completed at acceptance (null.postageapp.com) still get their delivered event in the same write', async () => {
    const reply = await send('sink-1', ['a@null.postageapp.com', 'b@example.test']);
    assert.equal(reply.status, 200, JSON.stringify(reply.body));
    const { messages, transmissions } = await stored('sink-1');
    assert.deepEqual(transmissions.map((r) => [r.recipient, r.status, r.result_code]), [
      ['a@null.postageapp.com', 'completed', 'SMTP_250'],
      ['b@example.test', 'queued', null],
    ]);
    const events = await t.app.services.store.db.selectFrom('events').selectAll().where('message_id', '=', messages[0].id).execute();
    assert.deepEqual(events.map((e) => e.type), ['delivered']);
  });
});

// The acceptance thread of a SQLite file (storage/dialects/sqlite-acceptance.ts; docs/decisions/
// 0003-performance.md, "The acceptance thread"): accepted messages are written by a thread with its
// own connection, in group commits, while the event loop goes on (store.ts openStore asks for it
// for `--role api` processes). Checked against a real file: the event loop turns while a large
// group is written; every acceptance of a turn gets its own id and its rows; a taken uid comes back
// as a duplicate with nothing written; a bad row fails alone; an acceptance waits for a write lock
// held by another connection without stopping the event loop, and so do the acceptances of the
// turns after it; a dead thread fails what it held as unavailable and the next acceptance starts
// another; closing the store writes what was accepted before it (and keeps the process alive until
// then).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import SqliteDatabase from 'better-sqlite3';
import { StoreUnavailableError } from '../../src/domain/errors.ts';
import { storeAcceptedMessage, type Acceptance } from '../../src/storage/messages.ts';
import { openStore, type Store } from '../../src/storage/store.ts';
import { onlyOn } from '../helpers/databases.ts';

const skip = onlyOn('sqlite');

function acceptance(projectId: number, uid: string, recipients: string[]): Acceptance {
  const now = Date.now();
  return {
    message: { project_id: projectId, uid, unique_id: `${uid}@test`, template: null, subject: 'S', from_address: 'a@example.test', deliver: 1, created_at: now, send_at: null, sandbox: 0, payload: '{}' },
    copies: recipients.map((recipient) => ({ recipient, recipientName: null, variables: null, subject: null, completed: null })),
    dueAt: now,
  };
}

/** An account and its project, for the messages' foreign key: the project's id. */
async function seedProject(store: Store): Promise<number> {
  return store.write(async (trx) => {
    const now = Date.now();
    const account = await trx.insertInto('accounts').values({ uid: 'acc', name: 'a', status: 'active', settings: '{}', created_at: now, updated_at: now }).returning('id').executeTakeFirstOrThrow();
    const project = await trx
      .insertInto('projects')
      .values({ account_id: account.id, uid: 'prj', name: 'p', status: 'active', settings: '{}', created_at: now, updated_at: now })
      .returning('id')
      .executeTakeFirstOrThrow();
    return Number(project.id);
  });
}

/** Another connection takes the file's write lock; `release` commits (once), `close` rolls back if not released. */
function holdWriteLock(file: string): { release(): void; close(): void } {
  const other = new SqliteDatabase(file);
  other.pragma('busy_timeout = 0');
  other.exec('BEGIN IMMEDIATE');
  let released = false;
  return {
    release() {
      if (!released) other.exec('COMMIT');
      released = true;
    },
    close() {
      if (!released) other.exec('ROLLBACK');
      other.close();
    },
  };
}

describe('SQLite: the acceptance thread', { skip }, () => {
  let dir: string;
  let file: string;
  let store: Store;
  let projectId: number;

  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'posthorn-acceptance-'));
    file = path.join(dir, 'posthorn.db');
    store = await openStore({ databaseUrl: null, data: dir, acceptanceThread: true });
    await store.migrate();
    projectId = await seedProject(store);
  });
  after(async () => {
    await store?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const transmissionsOf = (messageId: number) =>
    store.db.selectFrom('transmissions').select(['recipient', 'status', 'project_id']).where('message_id', '=', messageId).orderBy('id').execute();
  const messageCount = async (uid: string) =>
    Number((await store.db.selectFrom('messages').select((eb) => eb.fn.countAll().as('n')).where('uid', '=', uid).executeTakeFirstOrThrow()).n);

  it('writes every acceptance of a turn with its transmissions, each with its own id, readable once answered', async () => {
    const uids = Array.from({ length: 40 }, (_, i) => `turn-${i}`);
    const stored = await Promise.all(uids.map((uid, i) => storeAcceptedMessage(store, acceptance(projectId, uid, [`r${i}a@example.test`, `r${i}b@example.test`]))));
    const ids = stored.map((s) => ('id' in s ? s.id : null));
    assert.ok(ids.every((id) => typeof id === 'number'), JSON.stringify(stored));
    assert.equal(new Set(ids).size, uids.length);
    for (let i = 0; i < uids.length; i++) {
      const rows = await transmissionsOf(ids[i]!);
      assert.deepEqual(rows.map((r) => [r.recipient, r.status, Number(r.project_id)]), [
        [`r${i}a@example.test`, 'queued', projectId],
        [`r${i}b@example.test`, 'queued', projectId],
      ]);
    }
  });

  it('gives every message of a large group its own rows, the first of a repeated uid written and the rest answered as duplicates', async () => {
    // 150 acceptances in one turn, one to three copies each: a uid taken before the turn, and one
    // given twice, far apart in the group.
    await storeAcceptedMessage(store, acceptance(projectId, 'mixed-taken', ['before@example.test']));
    const uidOf = (i: number) => (i === 7 ? 'mixed-taken' : i === 140 ? 'mixed-10' : `mixed-${i}`);
    const recipientsOf = (i: number) => Array.from({ length: 1 + (i % 3) }, (_, k) => `m${i}-${k}@example.test`);
    const stored = await Promise.all(Array.from({ length: 150 }, (_, i) => storeAcceptedMessage(store, acceptance(projectId, uidOf(i), recipientsOf(i)))));
    for (let i = 0; i < 150; i++) {
      if (i === 7 || i === 140) {
        assert.deepEqual(stored[i], { duplicate: true }, `acceptance ${i}`);
        continue;
      }
      const s = stored[i];
      assert.ok('id' in s, `acceptance ${i}: ${JSON.stringify(s)}`);
      const message = await store.db.selectFrom('messages').select(['uid']).where('id', '=', s.id).executeTakeFirstOrThrow();
      assert.equal(message.uid, uidOf(i));
      assert.deepEqual((await transmissionsOf(s.id)).map((r) => r.recipient), recipientsOf(i));
    }
    assert.equal(await messageCount('mixed-10'), 1);
    assert.equal(await messageCount('mixed-taken'), 1);
  });

  it('writes off the event loop: timers keep turning while a large group is written', async () => {
    // 2,000 messages of 5 copies: tens of milliseconds of inserts. Written by the store's own
    // connection, they would run in one synchronous stretch of the event loop (a handful of turns).
    let turns = 0;
    let writing = true;
    const tick = () => {
      turns++;
      if (writing) setImmediate(tick);
    };
    setImmediate(tick);
    const recipients = Array.from({ length: 5 }, (_, i) => `bulk${i}@example.test`);
    const stored = await Promise.all(Array.from({ length: 2000 }, (_, i) => storeAcceptedMessage(store, acceptance(projectId, `bulk-${i}`, recipients))));
    writing = false;
    assert.ok(stored.every((s) => 'id' in s));
    assert.ok(turns > 1000, `the event loop turned ${turns} times while 2,000 acceptances were written`);
  });

  it('answers a taken uid as a duplicate and writes nothing for it, within a turn and across turns', async () => {
    const [first, again] = await Promise.all([
      storeAcceptedMessage(store, acceptance(projectId, 'dup-1', ['x@example.test'])),
      storeAcceptedMessage(store, acceptance(projectId, 'dup-1', ['y@example.test'])),
    ]);
    assert.ok('id' in first, JSON.stringify(first));
    assert.deepEqual(again, { duplicate: true });
    assert.deepEqual(await storeAcceptedMessage(store, acceptance(projectId, 'dup-1', ['z@example.test'])), { duplicate: true });
    assert.equal(await messageCount('dup-1'), 1);
    assert.deepEqual((await transmissionsOf(first.id)).map((r) => r.recipient), ['x@example.test']);
  });

  it('fails a bad row alone: its message is not written, the others of its group are', async () => {
    const bad = acceptance(projectId, 'bad-1', ['ok@example.test', 'second@example.test']);
    // A copy without an address violates transmissions.recipient NOT NULL, after its message's row
    // and first transmission were written: its SAVEPOINT takes them back.
    (bad.copies[1] as { recipient: string | null }).recipient = null;
    const [good1, failed, good2] = await Promise.allSettled([
      storeAcceptedMessage(store, acceptance(projectId, 'good-1', ['g1@example.test'])),
      storeAcceptedMessage(store, bad),
      storeAcceptedMessage(store, acceptance(projectId, 'good-2', ['g2@example.test'])),
    ]);
    assert.equal(good1.status, 'fulfilled');
    assert.equal(good2.status, 'fulfilled');
    assert.equal(failed.status, 'rejected');
    assert.match(String((failed as PromiseRejectedResult).reason), /NOT NULL/i);
    assert.ok(!((failed as PromiseRejectedResult).reason instanceof StoreUnavailableError));
    assert.equal(await messageCount('good-1'), 1);
    assert.equal(await messageCount('good-2'), 1);
    assert.equal(await messageCount('bad-1'), 0);
    const orphans = await store.db.selectFrom('transmissions').select('id').where('recipient', '=', 'ok@example.test').execute();
    assert.equal(orphans.length, 0);
  });

  it('waits for a write lock held by another connection without stopping the event loop, then writes', async () => {
    const lock = holdWriteLock(file);
    try {
      let settled = false;
      const pending = storeAcceptedMessage(store, acceptance(projectId, 'locked-1', ['l@example.test'])).finally(() => (settled = true));
      // The event loop turns while the thread waits in SQLite's busy handler: 20 timer ticks of
      // 5 ms each pass, and the acceptance is still waiting for the lock.
      for (let i = 0; i < 20; i++) await new Promise((resolve) => setTimeout(resolve, 5));
      assert.equal(settled, false, 'an acceptance was answered while another connection held the write lock');
      lock.release();
      const stored = await pending;
      assert.ok('id' in stored, JSON.stringify(stored));
      assert.equal(await messageCount('locked-1'), 1);
    } finally {
      lock.close();
    }
  });

  it('answers every acceptance of the turns that waited for a write lock held elsewhere', async () => {
    // The lock held elsewhere keeps the thread in its first group while ten more turns post their
    // acceptances to it; once the lock is free, every one of them is written and answered.
    const lock = holdWriteLock(file);
    try {
      const accepted: Array<ReturnType<typeof storeAcceptedMessage>> = [];
      for (let turn = 0; turn < 10; turn++) {
        for (let i = 0; i < 3; i++) accepted.push(storeAcceptedMessage(store, acceptance(projectId, `held-${turn}-${i}`, ['h@example.test'])));
        await new Promise((resolve) => setTimeout(resolve, 2));
      }
      lock.release();
      let timer: NodeJS.Timeout | undefined;
      const results = await Promise.race([
        Promise.all(accepted),
        new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error('acceptances were not answered within 10 s of the lock being released')), 10_000))),
      ]).finally(() => clearTimeout(timer));
      const ids = results.map((r) => ('id' in r ? r.id : null));
      assert.ok(ids.every((id) => typeof id === 'number'), JSON.stringify(results));
      assert.equal(new Set(ids).size, 30);
      const row = await store.db.selectFrom('messages').select((eb) => eb.fn.countAll().as('n')).where('uid', 'like', 'held-%').executeTakeFirstOrThrow();
      assert.equal(Number(row.n), 30);
    } finally {
      lock.close();
    }
  });

  it('fails what a dead thread held as unavailable, and starts another for the next acceptance', async () => {
    // A thread that cannot open the file dies at its start (the file renamed away under a store
    // that has it open); once the file is back, the next acceptance starts a thread that writes.
    const dir2 = fs.mkdtempSync(path.join(os.tmpdir(), 'posthorn-acceptance-dead-'));
    const file2 = path.join(dir2, 'posthorn.db');
    const away = path.join(dir2, 'away.db');
    let second: Store | undefined;
    try {
      second = await openStore({ databaseUrl: null, data: dir2, acceptanceThread: true });
      await second.migrate();
      const id = await seedProject(second);
      fs.renameSync(file2, away);
      let restored = false;
      try {
        const failed = await Promise.allSettled([1, 2].map((i) => storeAcceptedMessage(second!, acceptance(id, `dead-${i}`, ['d@example.test']))));
        for (const outcome of failed) {
          assert.equal(outcome.status, 'rejected');
          assert.ok((outcome as PromiseRejectedResult).reason instanceof StoreUnavailableError, String((outcome as PromiseRejectedResult).reason));
        }
        fs.renameSync(away, file2);
        restored = true;
      } finally {
        if (!restored) fs.renameSync(away, file2);
      }
      const stored = await storeAcceptedMessage(second, acceptance(id, 'after-death', ['d@example.test']));
      assert.ok('id' in stored, JSON.stringify(stored));
      const row = second.db.selectFrom('messages').select('uid').where('id', '=', stored.id);
      assert.deepEqual(await row.execute(), [{ uid: 'after-death' }]);
    } finally {
      await second?.close();
      fs.rmSync(dir2, { recursive: true, force: true });
    }
  });

  it('writes what was accepted before the store closes', async () => {
    const dir2 = fs.mkdtempSync(path.join(os.tmpdir(), 'posthorn-acceptance-close-'));
    try {
      const second = await openStore({ databaseUrl: null, data: dir2, acceptanceThread: true });
      await second.migrate();
      const id = await seedProject(second);
      const accepted = Array.from({ length: 10 }, (_, i) => storeAcceptedMessage(second, acceptance(id, `closing-${i}`, ['c@example.test'])));
      const closing = second.close();
      const results = await Promise.all(accepted);
      await closing;
      assert.ok(results.every((r) => 'id' in r), JSON.stringify(results));
      const reopened = new SqliteDatabase(path.join(dir2, 'posthorn.db'), { readonly: true });
      try {
        const row = reopened.prepare("select count(*) as n from messages where uid like 'closing-%'").get() as { n: number };
        assert.equal(row.n, 10);
      } finally {
        reopened.close();
      }
    } finally {
      fs.rmSync(dir2, { recursive: true, force: true });
    }
  });
});

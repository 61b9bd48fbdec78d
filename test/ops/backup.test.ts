// `posthorn backup` (docs/operations.md, "Backup and restore"): a backup taken while send_message
// is under load restores to a database where every message acknowledged before the backup began
// is present, and the restored service answers with the same keys.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { backupDatabase } from '../../src/operations/backup.ts';
import { startTestApp } from '../helpers/app.ts';
import { onlyOn } from '../helpers/databases.ts';
import { simpleMessage } from '../delivery/harness.ts';

describe('backup and restore', () => {
  const cleanup: Array<() => Promise<void>> = [];
  after(async () => {
    for (const f of cleanup.reverse()) await f();
  });

  it('a backup taken during a send load restores with every acknowledged message', { skip: onlyOn('sqlite') }, async (ctx) => {
    const t = await startTestApp();
    cleanup.push(() => t.close());
    const seed = await t.seed();
    // Some bulk (about 16 MiB) so the copy takes several steps, between which requests are served.
    const bulk = 'x'.repeat(512 * 1024);
    for (let i = 0; i < 32; i++) {
      await t.app.services.store.write((trx) =>
        trx.insertInto('templates').values({ project_id: seed.projectId, slug: `bulk-${i}`, name: null, subject: null, from_address: null, text_body: bulk, html_body: null, css: null, parent_slug: null, created_at: 0, updated_at: 0 }).execute(),
      );
    }
    const acknowledged: string[] = [];
    let stop = false;
    // Bounded load: 8 concurrent senders, at most 1500 messages or until told to stop.
    let next = 0;
    const sender = async () => {
      while (!stop && next < 1500) {
        const uid = `load-${next++}`;
        const r = await t.call('send_message', { api_key: seed.projectKey, uid, arguments: simpleMessage([`${uid}@example.test`, `cc-${uid}@example.test`]) });
        assert.equal(r.status, 200, JSON.stringify(r.body));
        acknowledged.push(uid);
      }
    };
    const senders = Array.from({ length: 8 }, sender);
    // Let the load run, then back up while it goes on.
    while (acknowledged.length < 150 && next < 1500) await new Promise((r) => setImmediate(r));
    const before = [...acknowledged];
    const file = path.join(t.dataDir, 'backup', 'posthorn-backup.db');
    fs.mkdirSync(path.dirname(file));
    const progress: number[] = [];
    const result = await backupDatabase(t.app.services, file, (p) => progress.push(p.remainingPages));
    const duringBackup = acknowledged.length - before.length;
    stop = true;
    await Promise.all(senders);
    // How much the load overlapped the copy depends on the machine: reported, not asserted.
    ctx.diagnostic(`${duringBackup} sends acknowledged while the backup ran, ${progress.length} progress steps`);
    assert.equal(progress.at(-1), 0, 'progress ends at 0 remaining pages');
    assert.ok(result.bytes > 0);
    assert.deepEqual(fs.readdirSync(path.dirname(file)), ['posthorn-backup.db'], 'no partial file is left');
    // It holds what the database holds: readable by the service's user alone, whatever the umask.
    assert.equal(fs.statSync(file).mode & 0o777, 0o600);

    // Restore: the backup file becomes the database of a new data directory.
    const restoredDir = fs.mkdtempSync(path.join(t.dataDir, 'restored-'));
    fs.copyFileSync(file, path.join(restoredDir, 'posthorn.db'));
    const restored = await startTestApp({ config: { data: restoredDir } });
    cleanup.push(() => restored.close());
    const db = restored.app.services.store.db;
    const uids = new Set((await db.selectFrom('messages').select('uid').execute()).map((r) => r.uid));
    const missing = before.filter((uid) => !uids.has(uid));
    assert.deepEqual(missing, [], 'every message acknowledged before the backup began is in it');
    // Each with both transmissions: a message is never half there.
    const counts = await db.selectFrom('transmissions').select((eb) => ['message_id', eb.fn.countAll<number>().as('n')]).groupBy('message_id').execute();
    assert.ok(counts.every((c) => Number(c.n) === 2));
    assert.equal(counts.length, uids.size);
    // The restored service answers with the same project key.
    const receipt = await restored.call('get_message_receipt', { api_key: seed.projectKey, uid: before[0] });
    assert.equal(receipt.status, 200, JSON.stringify(receipt.body));
    const check = await fetch(restored.url + '/readyz');
    assert.equal(check.status, 200);
  });

  it('refuses to overwrite the database itself', { skip: onlyOn('sqlite') }, async () => {
    const t = await startTestApp();
    cleanup.push(() => t.close());
    await assert.rejects(backupDatabase(t.app.services, path.join(t.dataDir, 'posthorn.db')), /must not be the database itself/);
  });

  it('on PostgreSQL points at pg_dump', { skip: onlyOn('postgres') }, async () => {
    const t = await startTestApp();
    cleanup.push(() => t.close());
    await assert.rejects(backupDatabase(t.app.services, path.join(t.dataDir, 'x.db')), /pg_dump/);
  });
});

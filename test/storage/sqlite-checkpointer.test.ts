// Background WAL checkpoints (storage/dialects/sqlite-checkpointer.ts): a thread copies the WAL into
// the database file while the process goes on writing, so the checkpoint left to the COMMIT that
// crosses wal_autocheckpoint finds its pages already copied; it starts only once the WAL is large,
// and it stops with the store.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import SqliteDatabase from 'better-sqlite3';
import { startCheckpointer } from '../../src/storage/dialects/sqlite-checkpointer.ts';
import { openStore } from '../../src/storage/store.ts';
import { until } from '../helpers/wait.ts';

describe('SQLite background checkpoints', () => {
  let dir: string;
  before(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'posthorn-checkpoint-'));
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('copies the WAL into the database while the writer holds its own checkpoints back', async () => {
    const file = path.join(dir, 'direct.db');
    const writer = new SqliteDatabase(file);
    writer.pragma('journal_mode = WAL');
    writer.pragma('wal_autocheckpoint = 0');
    writer.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT)');
    const insert = writer.prepare('INSERT INTO t (body) VALUES (?)');
    writer.transaction(() => {
      for (let i = 0; i < 600; i++) insert.run('x'.repeat(3000));
    })();
    const before = fs.statSync(file).size;
    const checkpointer = startCheckpointer(file);
    const copied = new Promise<{ checkpointed: number; log: number }>((resolve) => checkpointer.onCheckpoint(resolve));
    try {
      const pages = await Promise.race([copied, new Promise<never>((_, reject) => setTimeout(() => reject(new Error('no checkpoint within 5 s')), 5000))]);
      assert.ok(pages.checkpointed > 400, `pages copied: ${JSON.stringify(pages)}`);
      assert.ok(fs.statSync(file).size > before + 1_000_000, 'the database file holds the copied pages');
      // What the writer's own checkpoint would now have to copy: nothing.
      const [mine] = writer.pragma('wal_checkpoint(PASSIVE)') as Array<{ log: number; checkpointed: number }>;
      assert.equal(mine.checkpointed, mine.log);
      assert.equal((writer.prepare('SELECT count(*) AS n FROM t').get() as { n: number }).n, 600);
    } finally {
      await checkpointer.stop();
      writer.close();
    }
  });

  it('is started by the store once its WAL passes 1 MiB, and stopped with it', async () => {
    const store = await openStore({ databaseUrl: null, data: dir });
    const file = path.join(dir, 'posthorn.db');
    try {
      await store.write(async (trx) => {
        await trx.schema.createTable('blobs').addColumn('id', 'integer', (c) => c.primaryKey()).addColumn('body', 'text').execute();
      });
      const sizeAfterSchema = fs.statSync(file).size;
      // ~2 MB through the group commit, far below wal_autocheckpoint (4000 pages): only the
      // background thread copies it into the database file.
      for (let i = 0; i < 20; i++) {
        await store.write(async (trx) => {
          await trx.insertInto('blobs' as never).values(Array.from({ length: 30 }, () => ({ body: 'y'.repeat(3500) })) as never).execute();
        });
      }
      await until('the database file to grow by the checkpointed pages', () => fs.statSync(file).size > sizeAfterSchema + 1_500_000, 5000);
    } finally {
      await store.close();
    }
  });
});

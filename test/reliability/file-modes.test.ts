// Data files are the service user's alone (docs/reliability.md, storage/private-files.ts): the data
// directory Posthorn creates is 0700; the SQLite database, its WAL and SHM and the secret key file
// are 0600, on a fresh start and after a restart, and files an older version left 0644 are
// narrowed at the next start. The umask is set to the common 022 so that without these rules the
// files would be 0644 and the directory 0755.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { startApp } from '../../src/app.ts';
import { parseConfig, type Config } from '../../src/config.ts';
import { createLogger } from '../../src/log.ts';
import { createAccount } from '../../src/operations/accounts.ts';
import { freshDatabaseUrl, releaseDatabaseUrl, testDatabase } from '../helpers/databases.ts';

const modeOf = (file: string) => fs.statSync(file).mode & 0o777;
const octal = (mode: number) => mode.toString(8).padStart(4, '0');

describe('file modes', () => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'posthorn-modes-'));
  let databaseUrl: string | null = null;
  const previousUmask = process.umask(0o022);
  after(async () => {
    process.umask(previousUmask);
    await releaseDatabaseUrl(databaseUrl);
    fs.rmSync(root, { recursive: true, force: true });
  });

  /** Starts the service, writes, and checks the modes while it runs (a clean close removes the WAL and SHM). */
  async function runAndCheck(config: Config, name: string): Promise<void> {
    const app = await startApp(config, { log: createLogger('silent'), background: false });
    try {
      // A committed write: the WAL and SHM files exist from here on.
      await createAccount(app.services, { name });
      expectPrivate(config.data);
    } finally {
      await app.close();
    }
    // What remains after the close (the database, the key) stays private.
    for (const f of fs.readdirSync(config.data)) assert.equal(octal(modeOf(path.join(config.data, f))), '0600', f);
  }

  function expectPrivate(dataDir: string): void {
    const files = ['secret.key', ...(testDatabase() === 'sqlite' ? ['posthorn.db', 'posthorn.db-wal', 'posthorn.db-shm'] : [])];
    const seen = Object.fromEntries(files.filter((f) => fs.existsSync(path.join(dataDir, f))).map((f) => [f, octal(modeOf(path.join(dataDir, f)))]));
    assert.deepEqual(seen, Object.fromEntries(files.map((f) => [f, '0600'])), `modes in ${dataDir}`);
    assert.equal(octal(modeOf(dataDir)), '0700');
  }

  it('creates the data directory 0700 and the database, WAL, SHM and key file 0600; a restart keeps them', async () => {
    databaseUrl = await freshDatabaseUrl();
    const dataDir = path.join(root, 'nested', 'data');
    const config: Config = Object.freeze({
      ...parseConfig(new Map(), {}),
      port: 0,
      host: '127.0.0.1',
      data: dataDir,
      databaseUrl,
      mailerHost: 'posthorn.test',
      secretKey: null,
      workers: 0,
      dnsServers: ['127.0.0.1:9'],
    });
    await runAndCheck(config, 'first');
    assert.equal(octal(modeOf(path.join(root, 'nested'))), '0700', 'parents created on the way are private too');

    await runAndCheck(config, 'second');

    // Files an older version left world-readable are narrowed at the next start.
    for (const f of fs.readdirSync(dataDir)) fs.chmodSync(path.join(dataDir, f), 0o644);
    await runAndCheck(config, 'third');
  });
});

// `posthorn backup FILE` (docs/operations.md, "Backup and restore"): a consistent copy of the
// SQLite database taken while the service keeps serving, through SQLite's online backup API
// (better-sqlite3's db.backup). The copy is written beside FILE and renamed into place once
// complete and checked, so FILE is never a half-written database.
//
// Consistency: the backup reads through its own connection. SQLite restarts a backup when another
// connection writes to the source between two steps, so under a steady write load a copy made in
// small steps might never finish: the copy goes in steps (for the progress report) until the
// first restart is seen, then finishes in one step, which reads one snapshot of the WAL database
// while writers go on. Everything committed (every acknowledged message) before that snapshot is
// in the copy.
//
// PostgreSQL deployments use pg_dump / pg_restore (docs/operations.md).
import fs from 'node:fs';
import path from 'node:path';
import SqliteDatabase from 'better-sqlite3';
import type { Services } from '../services.ts';
import { sqliteFileFrom } from '../storage/dialects/sqlite.ts';
import { PRIVATE_FILE_MODE } from '../storage/private-files.ts';

/** Pages copied per step while no restart has been seen (4 MiB of 4 KiB pages). */
const STEP_PAGES = 1024;

export class BackupUnsupportedError extends Error {}

export interface BackupProgress {
  totalPages: number;
  remainingPages: number;
}

export interface BackupResult {
  file: string;
  bytes: number;
  pages: number;
  durationMs: number;
}

export async function backupDatabase(services: Services, target: string, onProgress?: (p: BackupProgress) => void): Promise<BackupResult> {
  if (services.store.kind !== 'sqlite') {
    throw new BackupUnsupportedError('posthorn backup copies a SQLite database; for PostgreSQL use pg_dump and pg_restore (docs/operations.md)');
  }
  const source = sqliteFileFrom(services.config.databaseUrl, services.config.data);
  if (source === ':memory:') throw new BackupUnsupportedError('an in-memory database cannot be backed up');
  const file = path.resolve(target);
  if (file === path.resolve(source)) throw new BackupUnsupportedError('the backup file must not be the database itself');
  const started = Date.now();
  const partial = path.join(path.dirname(file), `.${path.basename(file)}.partial-${process.pid}`);
  fs.rmSync(partial, { force: true });
  // The copy holds what the database holds (message content, key hashes, sealed secrets): created
  // 0600 before SQLite writes into it, as the database is (docs/reliability.md).
  fs.closeSync(fs.openSync(partial, 'wx', PRIVATE_FILE_MODE));
  const db = new SqliteDatabase(source, { readonly: true, fileMustExist: true });
  let pages = 0;
  try {
    db.pragma('busy_timeout = 10000');
    let lastRemaining = Number.POSITIVE_INFINITY;
    let oneStep = false;
    const result = await db.backup(partial, {
      progress: ({ totalPages, remainingPages }) => {
        // More pages left than at the last step: another connection wrote and the copy restarted.
        if (remainingPages > lastRemaining) oneStep = true;
        lastRemaining = remainingPages;
        onProgress?.({ totalPages, remainingPages });
        return oneStep ? 0x7fffffff : STEP_PAGES;
      },
    });
    pages = result.totalPages;
  } catch (error) {
    fs.rmSync(partial, { force: true });
    throw error;
  } finally {
    db.close();
  }
  // The copy is a database in rollback-journal mode with no WAL of its own: check it, then move it
  // into place.
  const copy = new SqliteDatabase(partial, { fileMustExist: true });
  try {
    const check = copy.pragma('quick_check', { simple: true });
    if (check !== 'ok') throw new Error(`the backup copy failed its check: ${String(check)}`);
  } catch (error) {
    copy.close();
    fs.rmSync(partial, { force: true });
    throw error;
  }
  copy.close();
  fs.renameSync(partial, file);
  onProgress?.({ totalPages: pages, remainingPages: 0 });
  return { file, bytes: fs.statSync(file).size, pages, durationMs: Date.now() - started };
}

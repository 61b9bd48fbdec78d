// The files that hold message content and secrets are readable by the service's user only
// (docs/reliability.md): a data directory Posthorn creates is 0700; the SQLite database, its WAL
// and shared-memory files and the secret key file are 0600. SQLite creates the -wal and -shm files
// with the mode of the database file, so making the database 0600 before it is opened covers them;
// files left 0644 by an older version are narrowed at the next start.
import fs from 'node:fs';
import path from 'node:path';

export const PRIVATE_DIR_MODE = 0o700;
export const PRIVATE_FILE_MODE = 0o600;

/**
 * Creates the directory and its missing parents 0700. A directory that already exists keeps its
 * mode: it may be shared (a sqlite:// URL in /var/lib, a working directory) and is the operator's.
 */
export function makePrivateDir(dir: string): void {
  fs.mkdirSync(dir, { recursive: true, mode: PRIVATE_DIR_MODE });
}

/** Narrows an existing file to 0600 when group or others may read it; absent files are ignored. */
export function narrowFileMode(file: string): void {
  let mode: number;
  try {
    mode = fs.statSync(file).mode;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw error;
  }
  if ((mode & 0o077) !== 0) fs.chmodSync(file, PRIVATE_FILE_MODE);
}

/** The SQLite file's directory (0700 when created here), the file itself (created empty 0600 when
 * absent, so SQLite never creates it with the umask's mode), and its -wal and -shm files. */
export function makePrivateDatabaseFiles(file: string): void {
  makePrivateDir(path.dirname(file));
  fs.closeSync(fs.openSync(file, fs.constants.O_CREAT | fs.constants.O_RDWR, PRIVATE_FILE_MODE));
  for (const f of [file, `${file}-wal`, `${file}-shm`, `${file}-journal`]) narrowFileMode(f);
}

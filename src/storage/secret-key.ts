// Where the secret-encryption key comes from: --secret-key / POSTHORN_SECRET_KEY, else a key file
// generated once into the data directory. The file is 0600 in a directory created 0700
// (storage/private-files.ts); a key file an older version left readable by others is narrowed.
// Multi-host deployments must set the variable so every process can read what the others stored.
import fs from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { makePrivateDir, narrowFileMode, PRIVATE_FILE_MODE } from './private-files.ts';

export function loadSecretKey(opts: { secretKey: string | null; data: string }): string {
  if (opts.secretKey) return opts.secretKey;
  const file = path.join(opts.data, 'secret.key');
  try {
    const key = fs.readFileSync(file, 'utf8').trim();
    narrowFileMode(file);
    return key;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  makePrivateDir(opts.data);
  const key = randomBytes(32).toString('base64');
  try {
    fs.writeFileSync(file, key + '\n', { mode: PRIVATE_FILE_MODE, flag: 'wx' });
    return key;
  } catch (error) {
    // Another process created it first: use theirs.
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return fs.readFileSync(file, 'utf8').trim();
    throw error;
  }
}

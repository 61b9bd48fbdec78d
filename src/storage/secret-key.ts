// Where the secret-encryption key comes from: --secret-key / POSTHORN_SECRET_KEY, else a key file
// generated once into the data directory (mode 0600). Multi-host deployments must set the variable
// so every process can read what the others stored.
import fs from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';

export function loadSecretKey(opts: { secretKey: string | null; data: string }): string {
  if (opts.secretKey) return opts.secretKey;
  const file = path.join(opts.data, 'secret.key');
  try {
    return fs.readFileSync(file, 'utf8').trim();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  fs.mkdirSync(opts.data, { recursive: true });
  const key = randomBytes(32).toString('base64');
  try {
    fs.writeFileSync(file, key + '\n', { mode: 0o600, flag: 'wx' });
    return key;
  } catch (error) {
    // Another process created it first: use theirs.
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return fs.readFileSync(file, 'utf8').trim();
    throw error;
  }
}

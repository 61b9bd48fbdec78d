// Encryption of stored secrets (mailbox passwords, postback secrets, DKIM private keys) with
// AES-256-GCM. Stored form: "v1:" + base64(iv | tag | ciphertext). The key comes from
// configuration (--secret-key) or a generated key file; see storage/secret-key.ts.
import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';

export class SecretBox {
  private readonly key: Buffer;
  constructor(secret: string) {
    // Any length of configured secret becomes a 256-bit key.
    this.key = createHash('sha256').update(secret, 'utf8').digest();
  }

  seal(plaintext: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return `v1:${Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64')}`;
  }

  open(sealed: string): string {
    if (!sealed.startsWith('v1:')) throw new Error('unknown secret format');
    const raw = Buffer.from(sealed.slice(3), 'base64');
    const decipher = createDecipheriv('aes-256-gcm', this.key, raw.subarray(0, 12));
    decipher.setAuthTag(raw.subarray(12, 28));
    return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString('utf8');
  }

  // Keep the key out of logs and inspection.
  toJSON(): string {
    return '[SecretBox]';
  }
}

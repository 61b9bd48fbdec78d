// Encryption of stored secrets (mailbox passwords, postback secrets, DKIM private keys) with
// AES-256-GCM. Stored form: "v1:" + base64(iv | tag | ciphertext). The key comes from
// configuration (--secret-key) or a generated key file; see storage/secret-key.ts.
import { createCipheriv, createDecipheriv, createHash, createHmac, randomBytes } from 'node:crypto';

export class SecretBox {
  private readonly key: Buffer;
  /** the root of derived keys, separate from the encryption key */
  private readonly derivationKey: Buffer;
  private readonly derived = new Map<string, string>();
  constructor(secret: string) {
    // Any length of configured secret becomes a 256-bit key.
    this.key = createHash('sha256').update(secret, 'utf8').digest();
    this.derivationKey = createHmac('sha256', secret).update('posthorn key derivation v1').digest();
  }

  /**
   * A key for one purpose (VERP tags, tracking links), derived from the deployment secret: every
   * process sharing the secret derives the same key, and neither the secret nor the encryption key
   * ever appears in an address or a URL.
   */
  deriveKey(purpose: string): string {
    let key = this.derived.get(purpose);
    if (key === undefined) {
      key = createHmac('sha256', this.derivationKey).update(purpose).digest('base64');
      this.derived.set(purpose, key);
    }
    return key;
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

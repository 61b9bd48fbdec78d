// DKIM signing keys for outgoing mail (issue 3, "Domains"). STUB: owned by the bounces/domains
// engineer, who replaces the body; the signature is the contract delivery composes with.

export interface DkimKey {
  domainName: string;
  keySelector: string;
  /** PEM, decrypted */
  privateKey: string;
}

/**
 * The key to sign with for a message whose From address is `fromAddress`, sent by `accountId`:
 * the account's domain with a key matching the From domain, or null (unsigned). Cached briefly.
 */
export async function findDkimKey(_services: import('../operations/context.ts').Services, _accountId: number, _fromAddress: string | null): Promise<DkimKey | null> {
  return null;
}

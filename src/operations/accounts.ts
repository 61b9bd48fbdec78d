// Accounts are created by the operator (CLI), never through the API.
import { randomUUID } from 'node:crypto';
import { generateApiKey, hashApiKey, keyPrefix } from '../domain/keys.ts';
import { insertAccount, listAccounts as listAccountRows, findAccountByUid, updateAccount } from '../storage/accounts.ts';
import { insertApiKey } from '../storage/api-keys.ts';
import type { Account } from '../storage/schema.ts';
import type { Services } from '../services.ts';
import { checkName } from '../domain/args.ts';
import { MAX_ACCOUNT_NAME } from './account-settings.ts';

export interface CreatedAccount {
  account: Account;
  /** shown this once */
  apiKey: string;
}

export async function createAccount(services: Services, input: { name: string }): Promise<CreatedAccount> {
  checkName('name', input.name, MAX_ACCOUNT_NAME);
  const now = services.clock.now();
  const apiKey = generateApiKey();
  const account = await services.store.write(async (trx) => {
    const account = await insertAccount(trx, { uid: randomUUID(), name: input.name, now });
    await insertApiKey(trx, { accountId: account.id, projectId: null, keyHash: hashApiKey(apiKey), keyPrefix: keyPrefix(apiKey), now });
    return account;
  });
  return { account, apiKey };
}

export async function listAccounts(services: Services): Promise<Account[]> {
  return listAccountRows(services.store.db);
}

/** Disables or re-enables an account: its keys answer 423 while disabled. */
export async function setAccountStatus(services: Services, uid: string, status: 'active' | 'disabled'): Promise<Account | undefined> {
  const account = await findAccountByUid(services.store.db, uid);
  if (!account) return undefined;
  return services.store.write((trx) => updateAccount(trx, account.id, { status, updated_at: services.clock.now() }));
}

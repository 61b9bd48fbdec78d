// Changing an account through the API: its name and its free-form settings object. Settings are
// MERGED key by key (a key set to null is removed), so two tools each owning a setting do not
// overwrite each other. Accounts themselves are created and disabled by the operator (CLI).
import { invalidArgument, type Json, type JsonObject } from '../domain/args.ts';
import { findAccountById, updateAccount as updateAccountRow } from '../storage/accounts.ts';
import type { Account } from '../storage/schema.ts';
import type { Services } from '../services.ts';

/** Longest account name, in characters. */
export const MAX_ACCOUNT_NAME = 200;
/** Largest stored settings object, in bytes of its JSON (after the merge). */
export const MAX_ACCOUNT_SETTINGS_BYTES = 64 * 1024;

export interface AccountChanges {
  name?: string;
  /** merged into the stored settings; a null value deletes that key */
  settings?: JsonObject;
}

export function readAccountSettings(account: Pick<Account, 'settings'>): JsonObject {
  try {
    const parsed: unknown = JSON.parse(account.settings);
    return typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed) ? (parsed as JsonObject) : {};
  } catch {
    return {};
  }
}

export function mergeSettings(stored: JsonObject, changes: JsonObject): JsonObject {
  const out: { [key: string]: Json } = { ...stored };
  for (const [key, value] of Object.entries(changes)) {
    if (value === null) delete out[key];
    else out[key] = value;
  }
  return out;
}

export async function updateAccount(services: Services, account: Account, changes: AccountChanges): Promise<Account> {
  const now = services.clock.now();
  return services.store.write(async (trx) => {
    // Re-read inside the transaction: the caller's copy was read at authentication and a
    // concurrent update's settings must not be lost by the merge.
    const current = (await findAccountById(trx, account.id)) ?? account;
    const patch: { name?: string; settings?: string; updated_at: number } = { updated_at: now };
    if (changes.name !== undefined) patch.name = changes.name;
    if (changes.settings !== undefined) {
      const merged = JSON.stringify(mergeSettings(readAccountSettings(current), changes.settings));
      if (Buffer.byteLength(merged, 'utf8') > MAX_ACCOUNT_SETTINGS_BYTES) {
        throw invalidArgument('settings', `would make the stored settings larger than ${MAX_ACCOUNT_SETTINGS_BYTES} bytes`);
      }
      patch.settings = merged;
    }
    return (await updateAccountRow(trx, account.id, patch))!;
  });
}

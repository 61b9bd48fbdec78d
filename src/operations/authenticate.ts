// Who is calling: the key's hash is looked up; an inactive (rotated) key or an unknown one is 401,
// a key whose project or account is disabled is 423.
import { ApiError, MESSAGES } from '../domain/errors.ts';
import { hashApiKey, hashesEqual } from '../domain/keys.ts';
import { findKeyByHash } from '../storage/api-keys.ts';
import type { Caller } from './context.ts';
import type { Services } from '../services.ts';

export async function authenticate(services: Services, apiKey: string): Promise<Caller> {
  const hash = hashApiKey(apiKey);
  const found = apiKey === '' ? undefined : await findKeyByHash(services.store.db, hash);
  if (!found || !hashesEqual(found.key.key_hash, hash) || found.key.status !== 'active') {
    throw new ApiError('unauthorized', MESSAGES.unauthorized);
  }
  if (found.account.status !== 'active' || (found.project !== null && found.project.status !== 'active')) {
    throw new ApiError('locked', MESSAGES.locked);
  }
  return found.project
    ? { keyKind: 'project', account: found.account, project: found.project }
    : { keyKind: 'account', account: found.account, project: null };
}

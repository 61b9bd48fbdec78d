// Who is calling: the key's hash is looked up; an inactive (rotated) key or an unknown one is 401,
// a key whose project or account is disabled is 423.
//
// The messages name the kind of key in question: the key's own kind when it is known (a rotated
// project key is "an inactive project API key"), else the kind the method takes, so a wrong key
// sent to send_message reads "project API key". An account method keeps PostageApp's text exactly
// ("Invalid or inactive account API key used.", compatibility.md).
import { ApiError, MESSAGES } from '../domain/errors.ts';
import { hashApiKey, hashesEqual } from '../domain/keys.ts';
import { findKeyByHash } from '../storage/api-keys.ts';
import type { Caller, KeyKind } from './context.ts';
import type { Services } from '../services.ts';

/** @param expected the kind of key the caller's method takes ('any' or absent: either) */
export async function authenticate(services: Services, apiKey: string, expected?: KeyKind | 'any'): Promise<Caller> {
  const hash = hashApiKey(apiKey);
  const found = apiKey === '' ? undefined : await findKeyByHash(services.store.db, hash);
  if (!found || !hashesEqual(found.key.key_hash, hash) || found.key.status !== 'active') {
    const kind: KeyKind | undefined = found ? (found.project ? 'project' : 'account') : expected === 'any' ? undefined : expected;
    throw new ApiError('unauthorized', kind === 'project' ? 'Invalid or inactive project API key used.' : MESSAGES.unauthorized);
  }
  if (found.project !== null && found.project.status !== 'active' && found.account.status === 'active') {
    throw new ApiError('locked', 'The specified API key is not valid: its project is disabled.');
  }
  if (found.account.status !== 'active' || (found.project !== null && found.project.status !== 'active')) {
    throw new ApiError('locked', MESSAGES.locked);
  }
  return found.project
    ? { keyKind: 'project', account: found.account, project: found.project }
    : { keyKind: 'account', account: found.account, project: null };
}

// The dashboard's one-time form tokens (docs/dashboard.md, "Forms"). Every form a page renders
// carries a token of its own; the first submission that carries it uses it up, so the same
// submission sent again (a reload of the page a POST answered, Back or Forward onto it, a double
// click) changes nothing and is answered with a notice instead. A submission that changed nothing
// (it was refused) gives its token back, so sending it again tries again.
//
// A token is issued without a write: it is signed (HMAC-SHA-256 under a key derived from the
// secret key) over the signed-in user's CSRF token, its time, a random nonce and the page it was
// shown on (where a repeated submission is sent back to). Only a use is written: the nonce, in
// dashboard_form_uses (migration 220), whose unique key lets exactly one of two simultaneous
// submissions through, in every API process of the service.
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Services } from '../services.ts';
import { deleteFormUse, recordFormUse } from '../storage/dashboard-users.ts';
import { SESSION_TTL_MS, type Viewer } from './users.ts';

const VERSION = 'f1';
/** A path kept as a token's page: longer ones keep only their path (the query left out). */
const MAX_RETURN_PATH = 512;
/** A token issued this far in the future still counts (processes on several machines, clocks a little apart). */
const CLOCK_SKEW_MS = 60_000;

/** What a submitted token says. */
export type FormTokenUse =
  /** first use: the form runs; `returnPath` is the page the form was shown on */
  | { kind: 'first'; nonce: string; returnPath: string }
  /** used before: the form does not run again */
  | { kind: 'repeated'; returnPath: string }
  /** missing, altered, another user's, or older than a sign-in lasts */
  | { kind: 'invalid' };

/** A path of this site only (never //host, a backslash or a scheme); anything else is the overview. */
export function sitePath(path: string): string {
  return /^\/(?![/\\])[^\s]*$/.test(path) ? path : '/';
}

function keyOf(services: Services): string {
  return services.secrets.deriveKey('posthorn dashboard form tokens v1');
}

function mac(services: Services, viewer: Pick<Viewer, 'csrfToken'>, issuedAt: string, nonce: string, returnPath: string): Buffer {
  return createHmac('sha256', keyOf(services)).update(`${VERSION}\n${viewer.csrfToken}\n${issuedAt}\n${nonce}\n${returnPath}`).digest();
}

/** A new token for one form shown on `returnPath` (the page's path and query). No write. */
export function issueFormToken(services: Services, viewer: Pick<Viewer, 'csrfToken'>, returnPath: string): string {
  let path = sitePath(returnPath);
  if (path.length > MAX_RETURN_PATH) path = sitePath(path.split('?')[0].slice(0, MAX_RETURN_PATH));
  const issuedAt = services.clock.now().toString(36);
  const nonce = randomBytes(16).toString('base64url');
  const encodedPath = Buffer.from(path).toString('base64url');
  return `${VERSION}.${issuedAt}.${nonce}.${encodedPath}.${mac(services, viewer, issuedAt, nonce, path).toString('base64url')}`;
}

/**
 * Uses a submitted token: checks its signature (for this user's sign-in) and age, then records its
 * nonce. The first use runs the form; any later one is `repeated`.
 */
export async function useFormToken(services: Services, viewer: Pick<Viewer, 'csrfToken'>, token: string | undefined): Promise<FormTokenUse> {
  if (typeof token !== 'string' || token.length > 1024) return { kind: 'invalid' };
  const parts = token.split('.');
  if (parts.length !== 5 || parts[0] !== VERSION) return { kind: 'invalid' };
  const [, issuedAt, nonce, encodedPath, signature] = parts;
  const returnPath = Buffer.from(encodedPath, 'base64url').toString('utf8');
  const expected = mac(services, viewer, issuedAt, nonce, returnPath);
  const given = Buffer.from(signature, 'base64url');
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return { kind: 'invalid' };
  const issuedMs = parseInt(issuedAt, 36);
  const now = services.clock.now();
  if (!Number.isSafeInteger(issuedMs) || issuedMs > now + CLOCK_SKEW_MS || now - issuedMs >= SESSION_TTL_MS) return { kind: 'invalid' };
  const first = await services.store.write((trx) => recordFormUse(trx, { nonce, expiresAt: issuedMs + SESSION_TTL_MS }, now));
  return first ? { kind: 'first', nonce, returnPath: sitePath(returnPath) } : { kind: 'repeated', returnPath: sitePath(returnPath) };
}

/** Gives a token back: its submission was refused and changed nothing, so it may be sent again. */
export async function releaseFormToken(services: Services, nonce: string): Promise<void> {
  await services.store.write((trx) => deleteFormUse(trx, nonce));
}

// Dashboard users and their sessions (docs/dashboard.md). A user belongs to an account and, when
// project-scoped, sees only that project. Passwords are hashed with scrypt (memory-hard, node:crypto)
// and never stored or logged; a session is a random token in an HttpOnly cookie of which only the
// SHA-256 is stored, with its own CSRF token, expiring SESSION_TTL_MS after sign-in.
import { createHash, createHmac, randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto';
import { ApiError } from '../domain/errors.ts';
import type { Services } from '../services.ts';
import { findAccountById, findAccountByUid } from '../storage/accounts.ts';
import type { DashboardUser } from '../storage/dashboard-schema.ts';
import {
  clearSignInFailures,
  countSignInFailures,
  deleteExpiredSessions,
  deleteSession,
  deleteUserSessions,
  findLiveSession,
  findUserByEmail,
  insertSession,
  insertUser,
  listUsersOfAccount,
  markSignedIn,
  recordSignInFailures,
  updateUserPassword,
} from '../storage/dashboard-users.ts';
import { findProjectById, findProjectByUid, listProjects } from '../storage/projects.ts';
import { isDuplicate } from '../storage/duplicates.ts';
import type { Account, Project } from '../storage/schema.ts';

/** A session lasts this long from sign-in (12 hours): a working day, not forever. */
export const SESSION_TTL_MS = 12 * 3_600_000;
/** scrypt cost: N=2^15, r=8 needs 32 MiB per hash (OWASP's minimum for scrypt is N=2^17 r=8 p=1 at
 *  128 MiB; 2^15 keeps a sign-in near 100 ms on a small machine while staying memory-hard). */
const SCRYPT = { N: 2 ** 15, r: 8, p: 1 } as const;
const SCRYPT_KEY_BYTES = 32;
export const MIN_PASSWORD_CHARS = 10;
export const MAX_PASSWORD_CHARS = 200;
const MAX_EMAIL_CHARS = 254;

/** Sign-in failures allowed per window, per client address and per user email. */
export const SIGN_IN_LIMITS = Object.freeze({ windowMs: 15 * 60_000, perAddress: 20, perEmail: 5 });

function scryptAsync(password: string, salt: Buffer, opts: ScryptOptions): Promise<Buffer> {
  return new Promise((resolve, reject) => scrypt(password, salt, SCRYPT_KEY_BYTES, opts, (err, key) => (err ? reject(err) : resolve(key))));
}

export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const key = await scryptAsync(password, salt, { ...SCRYPT, maxmem: 64 * 1024 * 1024 });
  return `scrypt$${SCRYPT.N}$${SCRYPT.r}$${SCRYPT.p}$${salt.toString('base64')}$${key.toString('base64')}`;
}

export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [scheme, n, r, p, salt, hash] = stored.split('$');
  if (scheme !== 'scrypt' || !salt || !hash) return false;
  const expected = Buffer.from(hash, 'base64');
  const key = await scryptAsync(password, Buffer.from(salt, 'base64'), { N: Number(n), r: Number(r), p: Number(p), maxmem: 256 * 1024 * 1024 });
  return key.length === expected.length && timingSafeEqual(key, expected);
}

/** A password to show once: 24 characters of base64url (144 random bits). */
export function generatePassword(): string {
  return randomBytes(18).toString('base64url');
}

/** Refuses an email a dashboard user cannot have (412 naming it). */
export function checkUserEmail(email: string): void {
  normalizeEmail(email);
}

function normalizeEmail(email: string): string {
  const e = email.trim().toLowerCase();
  if (e.length > MAX_EMAIL_CHARS || !/^[^\s@]+@[^\s@]+$/.test(e)) throw new ApiError('precondition_failed', `Invalid email address "${email.slice(0, 300)}".`);
  return e;
}

function checkPassword(password: string): void {
  if (password.length < MIN_PASSWORD_CHARS || password.length > MAX_PASSWORD_CHARS) {
    throw new ApiError('precondition_failed', `A password must be ${MIN_PASSWORD_CHARS} to ${MAX_PASSWORD_CHARS} characters long.`);
  }
}

export interface CreatedUser {
  user: DashboardUser;
  account: Account;
  project: Project | null;
  /** shown this once: generated unless one was given */
  password: string;
}

/** Creates a user of the account (optionally scoped to one of its projects). */
export async function createUser(
  services: Services,
  input: { accountUid: string; email: string; projectUid?: string | null; password?: string },
): Promise<CreatedUser> {
  const email = normalizeEmail(input.email);
  const password = input.password ?? generatePassword();
  checkPassword(password);
  const account = await findAccountByUid(services.store.db, input.accountUid);
  if (!account) throw new ApiError('not_found', `Account ${input.accountUid} not found.`);
  let project: Project | null = null;
  if (input.projectUid) {
    project = (await findProjectByUid(services.store.db, account.id, input.projectUid)) ?? null;
    if (!project) throw new ApiError('not_found', `Project ${input.projectUid} not found.`);
  }
  const passwordHash = await hashPassword(password);
  const now = services.clock.now();
  const user = await services.store.write(async (trx) => {
    if (await findUserByEmail(trx, email)) throw new ApiError('bad_request', `A dashboard user ${email} already exists.`);
    const inserted = await insertUser(trx, { accountId: account.id, projectId: project ? project.id : null, email, passwordHash, now });
    // A concurrent create of the same email loses at the unique constraint.
    if (isDuplicate(inserted)) throw new ApiError('bad_request', `A dashboard user ${email} already exists.`);
    return inserted;
  });
  return { user, account, project, password };
}

/** Sets a new password (generated unless given) and ends every session of the user. */
export async function resetPassword(services: Services, input: { email: string; password?: string }): Promise<{ user: DashboardUser; password: string }> {
  const email = normalizeEmail(input.email);
  const password = input.password ?? generatePassword();
  checkPassword(password);
  const passwordHash = await hashPassword(password);
  const now = services.clock.now();
  const user = await services.store.write(async (trx) => {
    const user = await findUserByEmail(trx, email);
    if (!user) throw new ApiError('not_found', `No dashboard user ${email}.`);
    await updateUserPassword(trx, user.id, passwordHash, now);
    await deleteUserSessions(trx, user.id);
    return user;
  });
  return { user, password };
}

/**
 * The throttle's keys of a sign-in: the client address and the email typed, each as an HMAC-SHA-256
 * under a key derived from the service's secret key, so the table holds neither, nor anything a
 * reader of the database could reverse by trying addresses. Counted in the database (migration
 * 170), so every API process of the service sees the same counts and a restart forgets none.
 */
function throttleKeys(services: Services, clientAddress: string, email: string): { address: string; email: string } {
  const key = services.secrets.deriveKey('posthorn sign-in throttle v1');
  const mac = (value: string) => createHmac('sha256', key).update(value).digest('hex');
  return { address: `a:${mac(clientAddress)}`, email: `e:${mac(email)}` };
}

export class SignInRefused extends Error {
  constructor(readonly reason: 'invalid' | 'throttled') {
    super(reason === 'invalid' ? 'Wrong email or password.' : 'Too many failed sign-ins: try again in a few minutes.');
  }
}

export interface NewSession {
  /** the cookie's value: shown to the browser only */
  token: string;
  csrfToken: string;
  expiresAt: number;
}

/** Signs a user in: the password is checked, a session row written; failures are counted. */
export async function signIn(services: Services, input: { email: string; password: string; clientAddress: string }): Promise<NewSession> {
  const now = services.clock.now();
  const email = input.email.trim().toLowerCase().slice(0, MAX_EMAIL_CHARS);
  const keys = throttleKeys(services, input.clientAddress, email);
  const windowStart = now - SIGN_IN_LIMITS.windowMs;
  const failures = await countSignInFailures(services.store.db, [keys.address, keys.email], windowStart);
  if ((failures.get(keys.address) ?? 0) >= SIGN_IN_LIMITS.perAddress || (failures.get(keys.email) ?? 0) >= SIGN_IN_LIMITS.perEmail) {
    throw new SignInRefused('throttled');
  }
  const user = await findUserByEmail(services.store.db, email);
  // An unknown email costs the same hash as a known one, so timing does not tell them apart.
  const ok = user ? await verifyPassword(input.password.slice(0, MAX_PASSWORD_CHARS), user.password_hash) : (await hashPassword(input.password.slice(0, MAX_PASSWORD_CHARS)), false);
  if (!user || !ok) {
    await services.store.write((trx) => recordSignInFailures(trx, [keys.address, keys.email], now, windowStart));
    throw new SignInRefused('invalid');
  }
  const token = randomBytes(32).toString('base64url');
  const csrfToken = randomBytes(24).toString('base64url');
  const expiresAt = now + SESSION_TTL_MS;
  await services.store.write(async (trx) => {
    await clearSignInFailures(trx, keys.email);
    await deleteExpiredSessions(trx, now);
    await insertSession(trx, { userId: user.id, tokenHash: hashToken(token), csrfToken, now, expiresAt });
    await markSignedIn(trx, user.id, now);
  });
  return { token, csrfToken, expiresAt };
}

function hashToken(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

/** Who a live session belongs to, and what it may see. */
export interface Viewer {
  readonly user: DashboardUser;
  readonly account: Account;
  /** the one project of a project-scoped user; null for an account user */
  readonly scopeProject: Project | null;
  readonly csrfToken: string;
  readonly expiresAt: number;
}

/** The viewer of a session token, or null when there is no such live session (or its account is disabled). */
export async function findViewer(services: Services, token: string | undefined): Promise<Viewer | null> {
  if (!token || token.length > 200) return null;
  const db = services.store.db;
  const found = await findLiveSession(db, hashToken(token), services.clock.now());
  if (!found) return null;
  const account = await findAccountById(db, Number(found.user.account_id));
  if (!account || account.status !== 'active') return null;
  let scopeProject: Project | null = null;
  if (found.user.project_id !== null) {
    scopeProject = (await findProjectById(db, Number(found.user.project_id))) ?? null;
    if (!scopeProject) return null;
  }
  return { user: found.user, account, scopeProject, csrfToken: found.session.csrf_token, expiresAt: Number(found.session.expires_at) };
}

export async function signOut(services: Services, token: string | undefined): Promise<void> {
  if (!token || token.length > 200) return;
  await services.store.write((trx) => deleteSession(trx, hashToken(token)));
}

/** The projects the viewer may see: its one project, or every project of its account. */
export async function listViewerProjects(services: Services, viewer: Viewer): Promise<Project[]> {
  if (viewer.scopeProject) return [viewer.scopeProject];
  return listProjects(services.store.db, viewer.account.id);
}

/** The viewer's project with this uid; not_found (never revealing another account's) otherwise. */
export async function requireViewerProject(services: Services, viewer: Viewer, uid: string): Promise<Project> {
  if (viewer.scopeProject) {
    if (viewer.scopeProject.uid === uid) return viewer.scopeProject;
    throw new ApiError('not_found', `Project ${uid} not found.`);
  }
  const project = await findProjectByUid(services.store.db, viewer.account.id, uid);
  if (!project) throw new ApiError('not_found', `Project ${uid} not found.`);
  return project;
}

/** Whether the viewer may see this project (by id). */
export function viewerSeesProject(viewer: Viewer, project: Pick<Project, 'id' | 'account_id'>): boolean {
  if (viewer.scopeProject) return Number(viewer.scopeProject.id) === Number(project.id);
  return Number(project.account_id) === Number(viewer.account.id);
}

/**
 * The first user of a new account (`posthorn init`): the given email, or admin@<mailer host>
 * (admin-<account uid>@... when that one is taken), with a generated password shown once.
 */
export async function createFirstUser(services: Services, account: Account, email: string | undefined): Promise<CreatedUser> {
  if (email) return createUser(services, { accountUid: account.uid, email });
  const host = services.config.mailerHost;
  const taken = await findUserByEmail(services.store.db, `admin@${host}`.toLowerCase());
  return createUser(services, { accountUid: account.uid, email: taken ? `admin-${account.uid.slice(0, 8)}@${host}` : `admin@${host}` });
}

/** The users of the viewer's account, with the uid of the project each is scoped to (null: all). */
export async function listAccountUsers(services: Services, viewer: Viewer): Promise<Array<{ user: DashboardUser; projectUid: string | null }>> {
  if (viewer.scopeProject) throw new ApiError('not_found', 'Only account users manage users.');
  const db = services.store.db;
  const [users, projects] = await Promise.all([listUsersOfAccount(db, viewer.account.id), listProjects(db, viewer.account.id)]);
  const uidOf = new Map(projects.map((p) => [Number(p.id), p.uid]));
  return users.map((user) => ({ user, projectUid: user.project_id === null ? null : (uidOf.get(Number(user.project_id)) ?? null) }));
}

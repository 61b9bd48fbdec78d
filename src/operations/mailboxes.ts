// Inbound mailboxes of an account: the IMAP connection the watcher (ingress/) polls and the URL it
// posts each new email to. This module stores and validates the configuration.
//
// The IMAP host follows the address policy of webhooks (services.ports.outboundAddresses,
// docs/mailboxes.md): public addresses only unless the operator sets --allow-private-addresses.
// It is checked when saved, by resolving the name and nothing more (no connection is made, so the
// answer cannot tell an open port from a closed one), and again before every connection, which
// goes to the checked address (reachMailboxHost), so DNS cannot move it to a private one later.
//
// Invariants: the IMAP password and the postback secret are stored sealed with services.secrets
// and never returned or logged; the postback secret is shown once, by createMailbox and
// rotateMailboxSecret. A created or reconfigured mailbox is due at once (next_check_at = now,
// status active) and the watcher is woken.
import { randomUUID } from 'node:crypto';
import net from 'node:net';
import { checkChosenUid, invalidArgument, longerThan } from '../domain/args.ts';
import { ApiError, duplicateUid, limitReached } from '../domain/errors.ts';
import { randomToken } from '../domain/keys.ts';
import {
  countMailboxes,
  deleteMailbox as deleteMailboxRow,
  findMailboxByUid,
  insertMailbox,
  listMailboxes as listMailboxRows,
  updateMailbox as updateMailboxRow,
  type MailboxPatch,
} from '../storage/mailboxes.ts';
import { isDuplicate } from '../storage/duplicates.ts';
import type { Account, Mailbox } from '../storage/schema.ts';
import type { Tx } from '../storage/store.ts';
import type { Services } from '../services.ts';
import { checkOutboundUrl } from './outbound-url.ts';

export const MAILBOX_LIMITS = Object.freeze({
  /** per account: list_mailboxes is unpaged and the watcher polls each one */
  mailboxesPerAccount: 100,
  uidChars: 200,
  labelChars: 200,
  hostChars: 253,
  usernameChars: 320,
  passwordChars: 1024,
  postbackUrlChars: 2048,
});

/** Length of a generated postback secret (base62, ~190 bits). */
const POSTBACK_SECRET_CHARS = 32;

export interface MailboxInput {
  /** generated (a UUID) when absent or "" */
  uid?: string;
  label?: string;
  host: string;
  port: number;
  username: string;
  password: string;
  tls: boolean;
  postback_url: string;
}

export type MailboxChanges = Partial<Omit<MailboxInput, 'uid'>>;

export interface MailboxWithSecret {
  mailbox: Mailbox;
  /** the HMAC key postbacks are signed with; shown this once */
  postbackSecret: string;
}

function checkLength(field: string, value: string, max: number): void {
  if (longerThan(value, max)) throw invalidArgument(field, `must be at most ${max} characters long`);
}

const HOST_LABEL = /^(?!-)[A-Za-z0-9-]{1,63}(?<!-)$/;

/** A host name (letters, digits, hyphens in dot-separated labels) or an IPv4/IPv6 address. */
export function normalizeMailboxHost(value: string): string {
  let host = value.trim();
  if (host.startsWith('[') && host.endsWith(']')) host = host.slice(1, -1);
  checkLength('host', host, MAILBOX_LIMITS.hostChars);
  if (net.isIP(host) !== 0) return host;
  const name = host.endsWith('.') ? host.slice(0, -1) : host;
  if (name === '' || !name.split('.').every((label) => HOST_LABEL.test(label)) || /^[0-9.]+$/.test(name)) {
    throw invalidArgument('host', 'must be a host name or an IP address');
  }
  return name.toLowerCase();
}

/** An absolute http or https URL (syntax and length); which destinations are allowed is checkPostbackUrl's. */
export function normalizePostbackUrl(value: string): string {
  const text = value.trim();
  checkLength('postback_url', text, MAILBOX_LIMITS.postbackUrlChars);
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw invalidArgument('postback_url', 'must be an absolute http:// or https:// URL');
  }
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.hostname === '') {
    throw invalidArgument('postback_url', 'must be an absolute http:// or https:// URL');
  }
  return url.href;
}

function checkPort(port: number): void {
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw invalidArgument('port', 'must be between 1 and 65535');
}

/** Validates and normalizes every given field; returns the columns to store (password sealed). */
function mailboxColumns(services: Services, input: MailboxChanges): Omit<MailboxPatch, 'updated_at'> {
  const out: Omit<MailboxPatch, 'updated_at'> = {};
  if (input.label !== undefined) {
    checkLength('label', input.label, MAILBOX_LIMITS.labelChars);
    out.label = input.label === '' ? null : input.label;
  }
  if (input.host !== undefined) out.host = normalizeMailboxHost(input.host);
  if (input.port !== undefined) {
    checkPort(input.port);
    out.port = input.port;
  }
  if (input.username !== undefined) {
    checkLength('username', input.username, MAILBOX_LIMITS.usernameChars);
    out.username = input.username;
  }
  if (input.password !== undefined) {
    checkLength('password', input.password, MAILBOX_LIMITS.passwordChars);
    out.password = services.secrets.seal(input.password);
  }
  if (input.tls !== undefined) out.tls = input.tls ? 1 : 0;
  if (input.postback_url !== undefined) out.postback_url = normalizePostbackUrl(input.postback_url);
  return out;
}

export type MailboxReach = { ok: true; address: string; servername: string | undefined } | { ok: false; reason: string };

/**
 * Where the watcher may connect for `host`: the checked address (and the name for TLS), or why it
 * is refused. The one place the IMAP host meets the address policy, at save and at connect time.
 */
export async function reachMailboxHost(services: Services, host: string): Promise<MailboxReach> {
  const checked = await services.ports.outboundAddresses.checkHost(host);
  if (!checked.ok) {
    return { ok: false, reason: `IMAP host refused: ${checked.reason}. Posthorn connects only to public addresses (the operator allows private ones with --allow-private-addresses)` };
  }
  return { ok: true, address: checked.address, servername: net.isIP(host) === 0 ? host : undefined };
}

/** The IMAP host's address policy, when saved: 400 naming the option that allows private hosts. */
async function checkMailboxHost(services: Services, host: string | undefined): Promise<void> {
  if (host === undefined) return;
  const reach = await reachMailboxHost(services, host);
  if (!reach.ok) throw new ApiError('bad_request', `${reach.reason}.`);
}

/** The postback destination's address policy, checked when saved (the dispatcher checks again at each post). */
async function checkPostbackUrl(services: Services, url: string | undefined): Promise<void> {
  if (url !== undefined) await checkOutboundUrl(services, url, { field: 'postback_url', label: 'Postback URL' });
}

export async function createMailbox(services: Services, account: Account, input: MailboxInput): Promise<MailboxWithSecret> {
  const uid = checkChosenUid('uid', input.uid, MAILBOX_LIMITS.uidChars) ?? randomUUID();
  const columns = mailboxColumns(services, input);
  await checkMailboxHost(services, columns.host);
  await checkPostbackUrl(services, columns.postback_url);
  const postbackSecret = randomToken(POSTBACK_SECRET_CHARS);
  const now = services.clock.now();
  const mailbox = await services.store.write(async (trx) => {
    if (await findMailboxByUid(trx, account.id, uid)) throw duplicateUid(uid);
    if ((await countMailboxes(trx, account.id)) >= MAILBOX_LIMITS.mailboxesPerAccount) {
      throw limitReached('account', MAILBOX_LIMITS.mailboxesPerAccount, 'mailboxes');
    }
    const inserted = await insertMailbox(trx, {
      account_id: account.id,
      uid,
      label: columns.label ?? null,
      host: columns.host!,
      port: columns.port!,
      username: columns.username!,
      password: columns.password!,
      tls: columns.tls!,
      postback_url: columns.postback_url!,
      postback_secret: services.secrets.seal(postbackSecret),
      status: 'active',
      last_error: null,
      failures: 0,
      next_check_at: now,
      checked_at: null,
      locked_by: null,
      locked_until: null,
      uid_validity: null,
      last_seen_uid: null,
      created_at: now,
      updated_at: now,
    });
    // A concurrent create with the same uid loses at the unique constraint.
    if (isDuplicate(inserted)) throw duplicateUid(uid);
    return inserted;
  });
  services.store.wake('mailboxes');
  return { mailbox, postbackSecret };
}

async function requireMailbox(db: Tx, account: Account, uid: string): Promise<Mailbox> {
  const mailbox = await findMailboxByUid(db, account.id, uid);
  if (!mailbox) throw new ApiError('not_found', `Mailbox ${uid} not found.`);
  return mailbox;
}

export async function listMailboxes(services: Services, account: Account): Promise<Mailbox[]> {
  return listMailboxRows(services.store.db, account.id);
}

export async function getMailbox(services: Services, account: Account, uid: string): Promise<Mailbox> {
  return requireMailbox(services.store.db, account, uid);
}

/**
 * Changes a mailbox's configuration. A change to how the service connects (host, port, username,
 * password, tls) clears the failure state and makes the mailbox due at once, so a fixed password
 * is tried right away; a change of server or user also forgets the IMAP UID position, which
 * belongs to the old mailbox.
 */
export async function updateMailbox(services: Services, account: Account, uid: string, changes: MailboxChanges): Promise<Mailbox> {
  const columns = mailboxColumns(services, changes);
  await checkMailboxHost(services, columns.host);
  await checkPostbackUrl(services, columns.postback_url);
  const now = services.clock.now();
  const reconnect = ['host', 'port', 'username', 'password', 'tls'].some((k) => k in columns);
  const mailbox = await services.store.write(async (trx) => {
    const current = await requireMailbox(trx, account, uid);
    const patch: MailboxPatch = { ...columns, updated_at: now };
    const movedTo = (['host', 'port', 'username'] as const).some((k) => columns[k] !== undefined && columns[k] !== current[k]);
    if (reconnect) Object.assign(patch, { status: 'active', last_error: null, failures: 0, next_check_at: now });
    if (movedTo) Object.assign(patch, { uid_validity: null, last_seen_uid: null });
    return (await updateMailboxRow(trx, current.id, patch))!;
  });
  if (reconnect) services.store.wake('mailboxes');
  return mailbox;
}

/** Replaces the postback secret; postbacks are signed with the new one from the next post on. */
export async function rotateMailboxSecret(services: Services, account: Account, uid: string): Promise<MailboxWithSecret> {
  const postbackSecret = randomToken(POSTBACK_SECRET_CHARS);
  const sealed = services.secrets.seal(postbackSecret);
  const now = services.clock.now();
  const mailbox = await services.store.write(async (trx) => {
    const current = await requireMailbox(trx, account, uid);
    return (await updateMailboxRow(trx, current.id, { postback_secret: sealed, updated_at: now }))!;
  });
  return { mailbox, postbackSecret };
}

/** Deletes the mailbox; a watcher holding its lease finds no row to finish and drops its work. */
export async function deleteMailbox(services: Services, account: Account, uid: string): Promise<Mailbox> {
  return services.store.write(async (trx) => {
    const mailbox = await requireMailbox(trx, account, uid);
    await deleteMailboxRow(trx, mailbox.id);
    return mailbox;
  });
}

/** The mailbox's secrets, unsealed: for the IMAP watcher only, never for a response or a log line. */
export function openMailboxSecrets(services: Services, mailbox: Pick<Mailbox, 'password' | 'postback_secret'>): { password: string; postbackSecret: string } {
  return { password: services.secrets.open(mailbox.password), postbackSecret: services.secrets.open(mailbox.postback_secret) };
}

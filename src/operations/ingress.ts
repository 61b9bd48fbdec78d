// What the IMAP watcher (ingress/) does to storage, as operations that own their transactions:
// lease mailboxes, record login outcomes, hand new emails to postbacks, and learn which postbacks
// were delivered so their emails can be marked \Seen.
//
// Invariants: every write to a leased mailbox row is guarded by `locked_by = worker` (a deleted or
// re-leased mailbox is left alone); an email is enqueued together with the advance of
// last_seen_uid, in one transaction, so a crash either posts it or fetches it again.
import { postbackRefOf } from '../domain/outbound-refs.ts';
import type { Mailbox } from '../storage/schema.ts';
import { advanceMailboxPosition, claimDueMailboxRows, extendMailboxLeases, findLeasedMailboxFailures, findMailboxHeldBy, mailboxesHeldBy, updateLeasedMailbox } from '../storage/mailboxes.ts';
import { insertInboundEmail, listPostingInboundEmails, markInboundEmailsFailed, markInboundEmailsSeen } from '../storage/inbound-emails.ts';
import type { InboundEmail } from '../storage/outbound-schema.ts';
import { enqueueOutbound, outboundStates } from './outbound-requests.ts';
import { signPostback } from '../domain/signatures.ts';
import type { Services } from '../services.ts';

/** Backoff after a failed login or connection: 1 min doubling to at most 1 h. */
export function mailboxRetryDelayMs(failures: number): number {
  return Math.min(60_000 * 2 ** Math.max(0, failures - 1), 3600_000);
}

function normaliseMailbox(m: Mailbox): Mailbox {
  return {
    ...m,
    id: Number(m.id),
    account_id: Number(m.account_id),
    next_check_at: Number(m.next_check_at),
    last_seen_uid: m.last_seen_uid === null ? null : Number(m.last_seen_uid),
  };
}

/** Leases up to `limit` due mailboxes: one UPDATE ... RETURNING. */
export async function claimDueMailboxes(services: Services, worker: string, leaseMs: number, limit: number): Promise<Mailbox[]> {
  const now = services.clock.now();
  const rows = await services.store.write((trx) => claimDueMailboxRows(trx, { worker, now, leaseMs, limit }));
  return rows.map(normaliseMailbox);
}

/** Extends the leases `worker` holds (the lease runner renews while the sessions run). */
export async function renewMailboxLeases(services: Services, worker: string, ids: readonly number[], leaseMs: number): Promise<number> {
  const until = services.clock.now() + leaseMs;
  return services.store.write((trx) => extendMailboxLeases(trx, ids, worker, until));
}

/** The ids of the mailboxes the database says `worker` holds. */
export function mailboxIdsHeldBy(services: Services, worker: string): Promise<number[]> {
  return mailboxesHeldBy(services.store.db, worker);
}

/** The mailbox as it is now, while `worker` holds it; null when it was deleted or taken over. */
export async function findLeasedMailbox(services: Services, id: number, worker: string): Promise<Mailbox | null> {
  const row = await findMailboxHeldBy(services.store.db, id, worker);
  return row ? normaliseMailbox(row) : null;
}

export async function recordMailboxConnected(services: Services, id: number, worker: string): Promise<void> {
  const now = services.clock.now();
  await services.store.write((trx) => updateLeasedMailbox(trx, id, worker, { status: 'active', last_error: null, failures: 0, checked_at: now }));
}

/**
 * How a mailbox session ended: `failed` (a refused login, auth_failed, or a lost connection, error:
 * recorded with the server's words, retried after a growing delay), `released` (stopped or
 * reconfigured: due again at once, here or elsewhere) or `gone` (deleted or taken over: nothing).
 */
export type MailboxSessionEnd =
  | { kind: 'failed'; mailboxId: number; status: 'auth_failed' | 'error'; error: string }
  | { kind: 'released'; mailboxId: number }
  | { kind: 'gone'; mailboxId: number };

/** Records session ends under their leases, in one transaction; per end, whether the lease held. */
export async function endMailboxSessions(services: Services, worker: string, ends: readonly MailboxSessionEnd[]): Promise<boolean[]> {
  const now = services.clock.now();
  return services.store.write(async (trx) => {
    const held: boolean[] = [];
    for (const end of ends) {
      if (end.kind === 'gone') {
        held.push(false);
        continue;
      }
      const before = await findLeasedMailboxFailures(trx, end.mailboxId, worker);
      held.push(before !== undefined);
      if (before === undefined) continue;
      if (end.kind === 'released') {
        await updateLeasedMailbox(trx, end.mailboxId, worker, { locked_by: null, locked_until: null, next_check_at: now, checked_at: now });
        continue;
      }
      const failures = before + 1;
      await updateLeasedMailbox(trx, end.mailboxId, worker, {
        status: end.status,
        last_error: end.error.slice(0, 500),
        failures,
        checked_at: now,
        next_check_at: now + mailboxRetryDelayMs(failures),
        locked_by: null,
        locked_until: null,
      });
    }
    return held;
  });
}

export interface FetchedEmail {
  imapUid: number;
  raw: Buffer;
  messageId: string | null;
}

/**
 * Hands one email to a postback: the inbound_emails row, the outbound request (signed with the
 * mailbox's postback secret) and the mailbox's new position, in one transaction under the lease.
 * False when the lease was lost (nothing written).
 */
export async function enqueuePostback(services: Services, mailbox: Mailbox, worker: string, uidValidity: string, email: FetchedEmail): Promise<boolean> {
  // The raw message travels as a JSON string; the signature covers that string's UTF-8 bytes,
  // which is what the receiver hashes after parsing the JSON.
  const message = email.raw.toString('utf8');
  const body = JSON.stringify({ inbound_email: { message } });
  const now = services.clock.now();
  const done = await services.store
    .write(async (trx) => {
      // Emails are handed over in ascending UID order by the one lease holder: the position is
      // simply the latest UID. The URL and secret are read here, so a rotation applies at once.
      const current = await advanceMailboxPosition(trx, mailbox.id, worker, { uidValidity, lastSeenUid: email.imapUid });
      if (!current) return false;
      const postbackSecret = services.secrets.open(current.postback_secret);
      const headers = { 'X-PostageApp-Signature': signPostback(postbackSecret, message) };
      const outboundId = await enqueueOutbound(
        trx,
        { accountId: mailbox.account_id, projectId: null, kind: 'postback', url: current.postback_url, body, headers, ref: postbackRefOf(mailbox.uid) },
        now,
      );
      const inserted = await insertInboundEmail(trx, {
        mailbox_id: mailbox.id,
        uid_validity: uidValidity,
        imap_uid: email.imapUid,
        message_id: email.messageId,
        size: email.raw.length,
        outbound_id: outboundId,
        state: 'posting',
        created_at: now,
        updated_at: now,
      });
      // Already handed over (a fetch repeated after a crash): roll back the duplicate request.
      if (!inserted) throw new DuplicateEmail();
      return true;
    })
    .catch((error) => {
      if (error instanceof DuplicateEmail) return true;
      throw error;
    });
  if (done) services.store.wake('outbound');
  return done;
}

class DuplicateEmail extends Error {}

export interface PostbackProgress {
  delivered: InboundEmail[];
  failed: InboundEmail[];
}

/** Emails of the mailbox whose postback has finished since the last look. */
export async function findFinishedPostbacks(services: Services, mailboxId: number): Promise<PostbackProgress> {
  const posting = await listPostingInboundEmails(services.store.db, mailboxId, 500);
  const states = await outboundStates(services.store.db, posting.map((e) => e.outbound_id));
  return {
    delivered: posting.filter((e) => states.get(e.outbound_id) === 'delivered'),
    // A request no longer there was pruned (a week after delivery, a month after failure) while
    // the mailbox could not be reached: its outcome is unknown, so the email is left unseen.
    failed: posting.filter((e) => states.get(e.outbound_id) === 'failed' || !states.has(e.outbound_id)),
  };
}

/**
 * Records what settling found: `seen` (flagged \Seen on the server) or `failed` (the postback gave
 * up; not when the request was put back in the queue since it was read: storage/inbound-emails.ts).
 */
export async function markInboundEmails(services: Services, ids: readonly number[], state: 'seen' | 'failed'): Promise<void> {
  if (ids.length === 0) return;
  const now = services.clock.now();
  await services.store.write((trx) => (state === 'seen' ? markInboundEmailsSeen(trx, ids, now) : markInboundEmailsFailed(trx, ids, now)));
}

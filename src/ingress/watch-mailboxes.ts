// The mailbox job: due mailboxes, each leased by the lease runner (workers/lease-runner.ts: slots,
// lease renewal, wake-ups on 'mailboxes', outages, stop) and held by one IMAP session until the
// runner stops, the mailbox is deleted or reconfigured, or the connection ends. One session, as
// its steps:
//
//   connect + log in   (tls: implicit TLS; else plain, upgraded with STARTTLS when offered;
//                       certificates always verified, extra CAs from --mailbox-ca-file)
//                       a refused login -> status auth_failed, last_error, retried with backoff
//   open INBOX, then repeat until stopped, deleted, reconfigured or disconnected:
//     settle           postbacks delivered (2xx) -> \Seen on the server; given up -> failed
//     hand over        each unseen email above last_seen_uid -> one postback (operations/ingress.ts)
//     wait             for new mail (IDLE where the server offers it), a wake-up, or the poll
//                      interval (--mailbox-poll-ms) where it does not
//     look again       at the mailbox's row (a read): deleted -> end; reconfigured -> reconnect
//   end                released (stopped, reconfigured), failed (login, connection), or gone
//
// The password is decrypted only to log in and is never logged (ImapFlow's logger is off).
import fs from 'node:fs';
import tls from 'node:tls';
import { ImapFlow } from 'imapflow';
import type { BackgroundService, Services } from '../services.ts';
import { generateWorkerId } from '../domain/keys.ts';
import {
  claimDueMailboxes,
  endMailboxSessions,
  mailboxIdsHeldBy,
  enqueuePostback,
  findFinishedPostbacks,
  findLeasedMailbox,
  markInboundEmails,
  recordMailboxConnected,
  renewMailboxLeases,
  type MailboxSessionEnd,
} from '../operations/ingress.ts';
import { openMailboxSecrets, reachMailboxHost } from '../operations/mailboxes.ts';
import type { Mailbox } from '../storage/schema.ts';
import { LeaseRunner, type LeaseJob } from '../workers/lease-runner.ts';
import { peerText } from '../observability/attempts.ts';

/** Sessions held per process. */
const MAX_SESSIONS = 100;
/** Emails handed over per settle/hand-over round; the next round takes the rest. */
const BATCH = 50;
const LEASE_MS = 120_000;
/** A session looks at its mailbox's row at least this often (and at every wake-up). */
const LOOK_AGAIN_MS = 10_000;
/** The longest wait for new mail between two rounds. */
const WAIT_MS = 30_000;
/** stop(): the longest a session takes to log out (logoutBounded) and a little more. */
const STOP_GRACE_MS = 5_000;

export interface MailboxWatcher extends BackgroundService {
  /** Claims due mailboxes now and waits until every session finished one full round (tests). */
  syncNow(): Promise<void>;
  /** Mailbox ids with a live session in this process. */
  sessions(): number[];
}

interface Session {
  /** resolves the session's current wait early */
  poke(): void;
  /** resolves after the next completed round */
  nextRound(): Promise<void>;
  done: Promise<void>;
}

export function createWatcher(services: Services, workerId?: string): MailboxWatcher {
  const { config, log } = services;
  const sessions = new Map<number, Session>();
  const extraCa = config.mailboxCaFile ? fs.readFileSync(config.mailboxCaFile, 'utf8') : null;
  let runner: LeaseRunner<Mailbox, MailboxSessionEnd>;

  async function runSession(initial: Mailbox, signal: AbortSignal, session: { setPoke(fn: () => void): void; finishRound(): void }): Promise<MailboxSessionEnd> {
    const worker = runner.workerId;
    let mailbox = initial;
    const failed = (status: 'auth_failed' | 'error', error: string): MailboxSessionEnd => ({ kind: 'failed', mailboxId: mailbox.id, status, error });
    const { password } = openMailboxSecrets(services, mailbox);
    // The host meets the address policy again (DNS may have moved it since it was saved), and the
    // client connects to the address that was checked, naming the host for TLS (docs/mailboxes.md).
    const reach = await reachMailboxHost(services, mailbox.host);
    if (!reach.ok) return failed('error', reach.reason);
    const client = new ImapFlow({
      host: reach.address,
      ...(reach.servername ? { servername: reach.servername } : {}),
      port: mailbox.port,
      secure: mailbox.tls === 1,
      auth: { user: mailbox.username, pass: password },
      logger: false,
      tls: { rejectUnauthorized: true, ...(extraCa ? { ca: [...tls.rootCertificates, extraCa] } : {}) },
      connectionTimeout: 30_000,
      greetingTimeout: 16_000,
      socketTimeout: 5 * 60_000,
      // IDLE soon after our own commands, so new mail is announced within moments; a command we
      // send while idling ends the IDLE first (ImapFlow does that).
      autoIdleDelay: 250,
    });
    let closed = false;
    let pokeResolve: (() => void) | null = null;
    let poked = false;
    const poke = () => {
      poked = true;
      pokeResolve?.();
    };
    session.setPoke(poke);
    client.on('error', (error: Error) => log.warn({ mailbox: mailbox.uid, err: { message: peerText(services, error.message) } }, 'IMAP connection error'));
    client.on('close', () => {
      closed = true;
      poke();
    });
    client.on('exists', poke);

    try {
      await client.connect();
    } catch (error) {
      const e = error as Error & { authenticationFailed?: boolean; responseText?: string; code?: string };
      client.close();
      if (e.authenticationFailed) return failed('auth_failed', `IMAP login refused: ${e.responseText ?? e.message}`);
      return failed('error', `IMAP connection failed: ${e.code ? e.code + ' ' : ''}${e.message}`);
    }
    let reason: 'stopped' | 'gone' | 'changed' | 'closed' = 'stopped';
    try {
      await recordMailboxConnected(services, mailbox.id, worker);
      const opened = await client.mailboxOpen('INBOX');
      const uidValidity = String(opened.uidValidity);
      const idle = client.capabilities.has('IDLE');
      let position = mailbox.uid_validity === uidValidity ? (mailbox.last_seen_uid ?? 0) : 0;
      let lookedAt = Date.now();
      while (!signal.aborted) {
        poked = false;
        await settle(client, mailbox, uidValidity);
        position = await handOver(client, mailbox, uidValidity, position, signal);
        session.finishRound();
        if (closed) {
          reason = 'closed';
          break;
        }
        if (!poked) {
          const waitMs = idle ? WAIT_MS : Math.min(config.mailboxPollMs, WAIT_MS);
          await new Promise<void>((resolve) => {
            const t = setTimeout(resolve, waitMs);
            pokeResolve = () => {
              clearTimeout(t);
              resolve();
            };
          });
          pokeResolve = null;
        }
        if (signal.aborted) break;
        if (closed) {
          reason = 'closed';
          break;
        }
        if (Date.now() - lookedAt >= LOOK_AGAIN_MS || poked) {
          const row = await findLeasedMailbox(services, mailbox.id, worker);
          lookedAt = Date.now();
          if (!row) {
            reason = 'gone';
            break;
          }
          if (connectionChanged(mailbox, row)) {
            reason = 'changed';
            break;
          }
          mailbox = row;
        }
      }
    } catch (error) {
      log.warn({ mailbox: mailbox.uid, err: { message: peerText(services, (error as Error).message) } }, 'IMAP session ended with an error');
      await logoutBounded(client);
      // Stopping: the error is the stop's (a closed store, an interrupted command).
      return signal.aborted ? { kind: 'released', mailboxId: mailbox.id } : failed('error', `IMAP session failed: ${(error as Error).message}`);
    }
    await logoutBounded(client);
    if (reason === 'gone') return { kind: 'gone', mailboxId: mailbox.id };
    if (reason === 'closed' && !signal.aborted) return failed('error', 'IMAP connection closed by the server');
    // Stopped or reconfigured: another session (here or elsewhere) may take it at once.
    return { kind: 'released', mailboxId: mailbox.id };
  }

  /** Postbacks that got their 2xx: flag their emails \Seen (only now); given-up ones: failed (unless requeued since the read: storage/inbound-emails.ts). */
  async function settle(client: ImapFlow, mailbox: Mailbox, uidValidity: string): Promise<void> {
    const { delivered, failed } = await findFinishedPostbacks(services, mailbox.id);
    const here = delivered.filter((e) => e.uid_validity === uidValidity);
    if (here.length > 0) await client.messageFlagsAdd(here.map((e) => e.imap_uid).join(','), ['\\Seen'], { uid: true });
    await markInboundEmails(services, delivered.map((e) => e.id), 'seen');
    await markInboundEmails(services, failed.map((e) => e.id), 'failed');
  }

  /** Unseen emails above the position, oldest first, each handed to a postback. */
  async function handOver(client: ImapFlow, mailbox: Mailbox, uidValidity: string, position: number, signal: AbortSignal): Promise<number> {
    for (let round = 0; round < 100 && !signal.aborted; round++) {
      const found = await client.search({ uid: `${position + 1}:*`, seen: false }, { uid: true });
      const uids = (Array.isArray(found) ? found : []).filter((u) => u > position).sort((a, b) => a - b).slice(0, BATCH);
      if (uids.length === 0) return position;
      for (const uid of uids) {
        const msg = await client.fetchOne(String(uid), { source: true, envelope: true }, { uid: true });
        if (!msg || !msg.source) continue;
        const ok = await enqueuePostback(services, mailbox, runner.workerId, uidValidity, {
          imapUid: uid,
          raw: msg.source,
          messageId: msg.envelope?.messageId ?? null,
        });
        if (!ok) throw new Error('mailbox lease lost');
        position = uid;
      }
    }
    return position;
  }

  const job: LeaseJob<Mailbox, MailboxSessionEnd> = {
    name: 'mailboxes',
    wakeOn: 'mailboxes',
    slots: MAX_SESSIONS,
    // A session is claimed as soon as its mailbox is due: any free slot is worth a claim.
    claimThreshold: 1,
    leaseMs: LEASE_MS,
    pollMs: Math.max(100, config.pollMs),
    stopGraceMs: STOP_GRACE_MS,
    finishBatchMs: 5,
    finishBatchMax: 16,

    claim: (worker, limit) => claimDueMailboxes(services, worker, LEASE_MS, limit),
    idOf: (mailbox) => mailbox.id,

    async work(mailbox, { signal }) {
      let poke: () => void = () => {};
      let roundWaiters: Array<() => void> = [];
      const finishRound = () => {
        const waiters = roundWaiters;
        roundWaiters = [];
        for (const w of waiters) w();
      };
      const run = runSession(mailbox, signal, { setPoke: (fn) => (poke = fn), finishRound }).catch((error): MailboxSessionEnd => {
        log.error({ err: error, mailbox: mailbox.uid }, 'mailbox session failed unexpectedly');
        return { kind: 'failed', mailboxId: mailbox.id, status: 'error', error: 'internal error; see the service log' };
      });
      const session: Session = {
        poke: () => poke(),
        nextRound: () => new Promise<void>((resolve) => roundWaiters.push(resolve)),
        done: run.then(() => undefined),
      };
      sessions.set(mailbox.id, session);
      // The runner's signal is shared by every session: this one's listener goes when it ends.
      const onStop = () => poke();
      signal.addEventListener('abort', onStop, { once: true });
      try {
        return await run;
      } finally {
        signal.removeEventListener('abort', onStop);
        sessions.delete(mailbox.id);
        finishRound();
      }
    },
    finish: (worker, ends) => endMailboxSessions(services, worker, ends),
    renew: (worker, ids) => renewMailboxLeases(services, worker, ids, LEASE_MS),
    // Sessions release their mailboxes themselves when stopped; what is left here failed to.
    release: (worker, ids) => endMailboxSessions(services, worker, ids.map((mailboxId) => ({ kind: 'released', mailboxId }))),
    heldBy: (worker) => mailboxIdsHeldBy(services, worker),
    // A wake-up: postbacks settled, a mailbox changed or was deleted: every session looks again.
    woken() {
      for (const s of sessions.values()) s.poke();
    },
  };
  runner = new LeaseRunner(services, job, workerId ?? generateWorkerId());

  return {
    name: 'mailboxes',
    start: () => runner.start(),
    stop: () => runner.stop(),
    async syncNow() {
      const before = [...sessions.values()];
      const rounds = before.map((s) => s.nextRound());
      for (const s of before) s.poke();
      await runner.claimNow();
      const started = [...sessions.values()].filter((s) => !before.includes(s));
      await Promise.all([...rounds, ...started.map((s) => Promise.race([s.nextRound(), s.done]))]);
    },
    sessions: () => [...sessions.keys()],
  };
}

/** LOGOUT, but never waiting on a server that stopped answering: stop() must stay bounded. */
async function logoutBounded(client: ImapFlow): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([client.logout().catch(() => undefined), new Promise((resolve) => (timer = setTimeout(resolve, 3000)))]);
  clearTimeout(timer);
  client.close();
}

function connectionChanged(a: Mailbox, b: Mailbox): boolean {
  return a.host !== b.host || a.port !== b.port || a.username !== b.username || a.password !== b.password || a.tls !== b.tls;
}

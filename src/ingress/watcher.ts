// The mailbox watcher: leases due mailboxes and keeps one IMAP session per leased mailbox.
//
// One session, as a list of steps:
//   connect + log in   (tls: implicit TLS; else plain, upgraded with STARTTLS when offered;
//                       certificates always verified, extra CAs from --mailbox-ca-file)
//                       a refused login -> status auth_failed, last_error, retried with backoff
//   open INBOX, then repeat until stopped, deleted, reconfigured or disconnected:
//     settle           postbacks delivered (2xx) -> \Seen on the server; given up -> failed
//     hand over        each unseen email above last_seen_uid -> one postback (operations/ingress.ts)
//     wait             for new mail (IDLE where the server offers it), a wake-up, or the poll
//                      interval (--mailbox-poll-ms) where it does not
//     renew the lease  (and notice a deleted or reconfigured mailbox)
//
// The password is decrypted only to log in and is never logged (ImapFlow's logger is off).
import fs from 'node:fs';
import tls from 'node:tls';
import { ImapFlow } from 'imapflow';
import type { BackgroundService } from '../background.ts';
import { generateWorkerId } from '../domain/keys.ts';
import type { Services } from '../services.ts';
import {
  claimDueMailboxes,
  enqueuePostback,
  findFinishedPostbacks,
  markInboundEmails,
  recordMailboxConnected,
  recordMailboxFailure,
  releaseMailbox,
  renewMailboxLease,
} from '../operations/ingress.ts';
import { openMailboxSecrets, reachMailboxHost } from '../operations/mailboxes.ts';
import type { Mailbox } from '../storage/schema.ts';
import { OutageWatch } from '../workers/outage.ts';

/** Sessions held per process. */
const MAX_SESSIONS = 100;
/** Emails handed over per settle/hand-over round; the next round takes the rest. */
const BATCH = 50;
const LEASE_MS = 120_000;
const RENEW_EVERY_MS = 30_000;

export interface MailboxWatcher extends BackgroundService {
  /** Claims due mailboxes now and waits until every session finished one full round (tests). */
  syncNow(): Promise<void>;
  /** Mailbox ids with a live session in this process. */
  sessions(): number[];
}

interface Session {
  mailboxId: number;
  /** resolves the session's current wait early */
  poke(): void;
  /** resolves after the next completed round */
  nextRound(): Promise<void>;
  done: Promise<void>;
}

export function createWatcher(services: Services, workerId?: string): MailboxWatcher {
  const { config, log } = services;
  const worker = workerId ?? generateWorkerId();
  const sessions = new Map<number, Session>();
  let stopped = false;
  let timer: NodeJS.Timeout | null = null;
  let unsubscribe: (() => Promise<void>) | null = null;
  let claiming: Promise<void> | null = null;
  const outage = new OutageWatch(log, 'mailboxes');
  const extraCa = config.mailboxCaFile ? fs.readFileSync(config.mailboxCaFile, 'utf8') : null;

  function claimAndStart(): Promise<void> {
    if (stopped || outage.holdingOff()) return Promise.resolve();
    claiming ??= (async () => {
      try {
        const free = MAX_SESSIONS - sessions.size;
        if (free <= 0) return;
        const claimed = await claimDueMailboxes(services, worker, LEASE_MS, free);
        outage.succeeded();
        for (const mailbox of claimed) {
          if (sessions.has(mailbox.id)) continue;
          sessions.set(mailbox.id, startSession(mailbox));
        }
      } catch (error) {
        if (!outage.failed(error)) log.error({ err: error }, 'mailbox watcher could not claim mailboxes');
      } finally {
        claiming = null;
      }
    })();
    return claiming;
  }

  function wakeAll(): void {
    for (const s of sessions.values()) s.poke();
    void claimAndStart();
  }

  function startSession(initial: Mailbox): Session {
    let poke: () => void = () => {};
    let roundWaiters: Array<() => void> = [];
    const session: Session = {
      mailboxId: initial.id,
      poke: () => poke(),
      nextRound: () => new Promise<void>((resolve) => roundWaiters.push(resolve)),
      done: Promise.resolve(),
    };
    const finishRound = () => {
      const waiters = roundWaiters;
      roundWaiters = [];
      for (const w of waiters) w();
    };
    session.done = (async () => {
      try {
        await runSession(initial, (fn) => (poke = fn), finishRound);
      } catch (error) {
        log.error({ err: error, mailbox: initial.uid }, 'mailbox session failed unexpectedly');
        await recordMailboxFailure(services, initial.id, worker, 'error', 'internal error; see the service log').catch(() => {});
      } finally {
        sessions.delete(initial.id);
        finishRound();
      }
    })();
    return session;
  }

  async function runSession(initial: Mailbox, setPoke: (fn: () => void) => void, finishRound: () => void): Promise<void> {
    let mailbox = initial;
    const { password } = openMailboxSecrets(services, mailbox);
    // The host meets the address policy again (DNS may have moved it since it was saved), and the
    // client connects to the address that was checked, naming the host for TLS (docs/mailboxes.md).
    const reach = await reachMailboxHost(services, mailbox.host);
    if (!reach.ok) {
      await recordMailboxFailure(services, mailbox.id, worker, 'error', reach.reason);
      return;
    }
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
    client.on('error', (error: Error) => log.warn({ mailbox: mailbox.uid, err: { message: error.message } }, 'IMAP connection error'));
    client.on('close', () => {
      closed = true;
      poke();
    });
    let pokeResolve: (() => void) | null = null;
    let poked = false;
    const poke = () => {
      poked = true;
      pokeResolve?.();
    };
    setPoke(poke);
    client.on('exists', poke);

    try {
      await client.connect();
    } catch (error) {
      const e = error as Error & { authenticationFailed?: boolean; responseText?: string; code?: string };
      if (e.authenticationFailed) {
        await recordMailboxFailure(services, mailbox.id, worker, 'auth_failed', `IMAP login refused: ${e.responseText ?? e.message}`);
      } else {
        await recordMailboxFailure(services, mailbox.id, worker, 'error', `IMAP connection failed: ${e.code ? e.code + ' ' : ''}${e.message}`);
      }
      client.close();
      return;
    }
    let reason: 'stopped' | 'gone' | 'changed' | 'closed' = 'stopped';
    try {
      await recordMailboxConnected(services, mailbox.id, worker);
      const opened = await client.mailboxOpen('INBOX');
      const uidValidity = String(opened.uidValidity);
      const idle = client.capabilities.has('IDLE');
      let position = mailbox.uid_validity === uidValidity ? (mailbox.last_seen_uid ?? 0) : 0;
      let lastRenew = Date.now();
      while (!stopped) {
        poked = false;
        await settle(client, mailbox, uidValidity);
        position = await handOver(client, mailbox, uidValidity, position);
        finishRound();
        if (closed) {
          reason = 'closed';
          break;
        }
        if (!poked) {
          const waitMs = idle ? RENEW_EVERY_MS : Math.min(config.mailboxPollMs, RENEW_EVERY_MS);
          await new Promise<void>((resolve) => {
            const t = setTimeout(resolve, waitMs);
            pokeResolve = () => {
              clearTimeout(t);
              resolve();
            };
          });
          pokeResolve = null;
        }
        if (stopped) break;
        if (closed) {
          reason = 'closed';
          break;
        }
        if (Date.now() - lastRenew >= RENEW_EVERY_MS / 3 || poked) {
          const row = await renewMailboxLease(services, mailbox.id, worker, LEASE_MS);
          lastRenew = Date.now();
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
      reason = 'closed';
      log.warn({ mailbox: mailbox.uid, err: { message: (error as Error).message } }, 'IMAP session ended with an error');
      if (!stopped) await recordMailboxFailure(services, mailbox.id, worker, 'error', `IMAP session failed: ${(error as Error).message}`);
      await logoutBounded(client);
      return;
    }
    await logoutBounded(client);
    if (reason === 'gone') return;
    if (reason === 'closed' && !stopped) {
      await recordMailboxFailure(services, mailbox.id, worker, 'error', 'IMAP connection closed by the server');
      return;
    }
    // Stopped or reconfigured: another session (here or elsewhere) may take it at once.
    await releaseMailbox(services, mailbox.id, worker, services.clock.now());
  }

  /** Postbacks that got their 2xx: flag their emails \Seen (only now); given-up ones: failed. */
  async function settle(client: ImapFlow, mailbox: Mailbox, uidValidity: string): Promise<void> {
    const { delivered, failed } = await findFinishedPostbacks(services, mailbox.id);
    const here = delivered.filter((e) => e.uid_validity === uidValidity);
    if (here.length > 0) await client.messageFlagsAdd(here.map((e) => e.imap_uid).join(','), ['\\Seen'], { uid: true });
    await markInboundEmails(services, delivered.map((e) => e.id), 'seen');
    await markInboundEmails(services, failed.map((e) => e.id), 'failed');
  }

  /** Unseen emails above the position, oldest first, each handed to a postback. */
  async function handOver(client: ImapFlow, mailbox: Mailbox, uidValidity: string, position: number): Promise<number> {
    for (let round = 0; round < 100 && !stopped; round++) {
      const found = await client.search({ uid: `${position + 1}:*`, seen: false }, { uid: true });
      const uids = (Array.isArray(found) ? found : []).filter((u) => u > position).sort((a, b) => a - b).slice(0, BATCH);
      if (uids.length === 0) return position;
      for (const uid of uids) {
        const msg = await client.fetchOne(String(uid), { source: true, envelope: true }, { uid: true });
        if (!msg || !msg.source) continue;
        const ok = await enqueuePostback(services, mailbox, worker, uidValidity, {
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

  return {
    name: 'mailboxes',
    async start() {
      unsubscribe = await services.store.onWake('mailboxes', wakeAll);
      timer = setInterval(() => void claimAndStart(), Math.max(100, config.pollMs));
      timer.unref();
      void claimAndStart();
    },
    async stop() {
      stopped = true;
      if (timer) clearInterval(timer);
      await unsubscribe?.();
      await claiming;
      for (const s of sessions.values()) s.poke();
      await Promise.allSettled([...sessions.values()].map((s) => s.done));
    },
    async syncNow() {
      const before = [...sessions.values()];
      const rounds = before.map((s) => s.nextRound());
      for (const s of before) s.poke();
      await claimAndStart();
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

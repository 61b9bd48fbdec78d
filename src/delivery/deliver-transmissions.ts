// The delivery job: due transmissions, claimed under a lease by the lease runner
// (workers/lease-runner.ts: slots, finish batching, renewal, wake-ups, outages, stop). One
// transmission, as its steps:
//
//   crashed    its holders died with it MAX_HOLDER_DEATHS times in a row: failed, WORKER_CRASHED,
//              nothing loaded, composed or sent (domain/holder-deaths.ts); its `failed` event names
//              what is read without the message's payload (which may be what killed them)
//   load       the message's context (loaded once per claimed batch: delivery/message-contexts.ts)
//   recipient  a deliverable address, or failed
//   suppressed on the project's suppression list: failed, not sent
//   route      relay | transport map | MX (delivery/routes.ts); a message accepted in sandbox mode has no route
//   compose    the MIME, once per message where it allows (tracking makes it per transmission)
//   send       pooled, pipelined SMTP (delivery/smtp-client.ts), or the sandbox's answer; once a
//              connection is free, and only if this process still holds the transmission (the
//              lease runner's fence: it may have been presumed dead while it stalled)
//   decide     the new state, its event and message: pure (domain/transmission-outcome.ts)
//   finish     attempt row + transmission state + bounce + event, batched, under the lease
//   count      metrics and the attempt's log line (observability/attempts.ts), webhooks woken
//
// Every send may happen twice (a lease can end under a slow send, a process can die after the 250
// and before the finish): the Message-ID is fixed at acceptance so receivers can de-duplicate.
//
// A transmission released twice in a row from a dead holder (a suspect) is claimed on its own and
// worked while no other suspect is held here, so that a message that crashes its process is pinned
// down without the rows around it (domain/holder-deaths.ts).
import { performance } from 'node:perf_hooks';
import { classifySmtpReply, type OutcomeKind, type SmtpExchange } from '../domain/classify-smtp-reply.ts';
import { addressedMime, envelopeAddress } from '../domain/compose-mime.ts';
import { buildEventPayload } from '../domain/events.ts';
import { HeaderValueError } from '../domain/headers.ts';
import { MAX_HOLDER_DEATHS, SUSPECT_AFTER_DEATHS, WORKER_CRASHED, workerCrashedMessage } from '../domain/holder-deaths.ts';
import { generateWorkerId } from '../domain/keys.ts';
import { parseRetrySchedule, type RetryPolicy } from '../domain/retry-policy.ts';
import { formatIsoTime } from '../domain/time.ts';
import { decideTransmissionOutcome } from '../domain/transmission-outcome.ts';
import { TemplateRenderError } from '../domain/variables.ts';
import { returnPathFor, verpTagKey } from '../domain/verp.ts';
import { transmissionExtensionNeeds } from '../domain/smtp-extensions.ts';
import { observeSmtpConnections, recordDeliveryAttempt, type DeliveryAttemptRecord } from '../observability/attempts.ts';
import type { ProcessLiveness, Services } from '../services.ts';
import {
  claimDueTransmissions,
  claimSuspectTransmission,
  finishTransmissions,
  releaseTransmissions,
  transmissionsHeldBy,
  renewLeases,
  type ClaimedTransmission,
  type FinishInput,
} from '../storage/delivery-queue.ts';
import { recordEvent } from '../storage/events.ts';
import { readMessageSubject } from '../storage/messages.ts';
import type { Tx } from '../storage/store.ts';
import { findActiveSuppression, recordBounce, recordComplaint } from '../storage/suppressions.ts';
import { setFirstTrackingTime } from '../storage/transmissions.ts';
import { LeaseRunner, type LeaseJob, type UnitContext } from '../workers/lease-runner.ts';
import { DnsResolver } from './dns-resolver.ts';
import { MessageContexts, type MessageContext } from './message-contexts.ts';
import { Router } from './routes.ts';
import { sandboxReply } from './sandbox.ts';
import { SmtpClient } from './smtp-client.ts';

/** The result of one delivery attempt, as a value. */
export interface DeliveryOutcome {
  kind: OutcomeKind;
  resultCode: string;
  resultMessage: string;
  /** counts against the address on the suppression list */
  bounce: 'hard' | 'soft' | null;
  /** the host talked to, null when none was */
  host: string | null;
  durationMs: number;
  /** whether the SMTP session used TLS; null or absent when no session was set up */
  tls?: boolean | null;
  /** the sandbox's complaint address: a `spammed` event follows the delivery (delivery/sandbox.ts) */
  complaint?: boolean;
}

/** What one delivery leaves to record. */
interface DeliveryFinish {
  finish: FinishInput;
  /** the writes that go with it in the same transaction (bounce, events), given the new attempt count */
  alongside: (trx: Tx, attempts: number) => Promise<void>;
  /** the attempt as metrics and the log line see it */
  attempt: DeliveryAttemptRecord;
}

/**
 * What an event says of its message: from the message's context, or, for a transmission failed
 * WORKER_CRASHED, read without the payload (no global variables, no recipient override).
 */
interface EventMessage {
  id: number;
  uid: string;
  uniqueId: string;
  projectUid: string;
  accountId: number;
  recipientOverride: string | null | undefined;
  sendAt: number | null | undefined;
  /** accepted in sandbox mode (docs/sandbox.md) */
  sandbox: boolean;
}

/** Seams for tests, not configuration. */
export interface DeliveryOptions {
  /** the port MX hosts are contacted on (25); tests point it at a peer on 127.0.0.1 */
  mxPort?: number;
  /** how long stop() waits for deliveries in flight (default STOP_GRACE_MS) */
  stopGraceMs?: number;
  /** the process's registry id (workers/process-registry.ts); a fresh one when absent */
  workerId?: string;
  /** the process's standing in the registry, for the fence before each send (workers/lease-runner.ts) */
  liveness?: ProcessLiveness;
}

export type DeliveryWorker = LeaseRunner<ClaimedTransmission, DeliveryFinish>;

/** How long stop() waits for deliveries in flight before giving their rows back. */
const STOP_GRACE_MS = 10_000;
/**
 * Finishes wait at most this long to be written together. Where the store commits a turn's writes
 * together (SQLite) the batch shares a commit whatever its size and the claim refilling its slots
 * joins it: a short wait keeps the slots turning. Elsewhere (PostgreSQL) a batch is a transaction
 * of its own, a fixed handful of statements: a longer wait makes it bigger, and the statements per
 * message fewer (docs/decisions/0003-performance.md).
 */
const FINISH_BATCH_MS = { groupCommitted: 10, ownTransaction: 25 };
const FINISH_BATCH_MAX = 256;
/** While no suspect is held, a claim also looks for a due one, at most once per this interval. */
const SUSPECT_CLAIM_MS = 1000;

/** The delivery worker of this process: the delivery job under the lease runner. */
export function createDeliveryWorker(services: Services, options: DeliveryOptions = {}): DeliveryWorker {
  const { config, log, store, clock } = services;
  const delays = parseRetrySchedule(config.retrySchedule);
  if (!delays) throw new Error(`--retry-schedule must be durations separated by commas, like "1m,5m,1h", got "${config.retrySchedule}"`);
  const policy: RetryPolicy = { delaysMs: delays, maxRetryAgeMs: config.maxRetryAgeMs };
  const contexts = new MessageContexts(services);
  const dns = new DnsResolver({ servers: config.dnsServers, clock, timeoutMs: Math.min(config.connectTimeoutMs, 5000) });
  const router = new Router(dns, config, options.mxPort ?? 25);
  const smtp = new SmtpClient({
    ehloName: config.ehloName,
    requireTls: config.requireTls,
    logAddresses: config.logAddresses,
    maxConnectionsPerDestination: config.maxConnectionsPerDestination,
    maxConnections: config.maxConnections,
    connectTimeoutMs: config.connectTimeoutMs,
    greetingTimeoutMs: config.greetingTimeoutMs,
    socketTimeoutMs: config.socketTimeoutMs,
    dataDoneTimeoutMs: config.dataDoneTimeoutMs,
    log,
  });
  const unobserveSmtp = observeSmtpConnections(services, () => smtp.openConnections());
  const workerId = options.workerId ?? generateWorkerId();

  /** The contexts of the latest claimed batch, loading (one read feeds the batch). */
  const loading = new Map<number, Promise<Map<number, MessageContext>>>();
  /** the suspect this process works (at most one at a time), and when to look for one next */
  let suspect: number | null = null;
  let nextSuspectLookMs = 0;

  /** load: from the batch's read, or alone when the batch's read failed or missed it. */
  async function load(t: ClaimedTransmission): Promise<MessageContext> {
    const batch = loading.get(t.id);
    loading.delete(t.id);
    let context = batch ? (await batch.catch(() => null))?.get(t.message_id) : undefined;
    // One bad message must not fail the others of its batch: load this one alone.
    context ??= (await contexts.load([t])).get(t.message_id);
    if (!context) throw new Error(`message ${t.message_id} of transmission ${t.id} not found`);
    return context;
  }

  /** recipient -> suppressed -> route -> compose -> send: the attempt's outcome. */
  async function attempt(t: ClaimedTransmission, context: MessageContext, started: number, unit: UnitContext<ClaimedTransmission>): Promise<DeliveryOutcome> {
    // The address as written (the API's form), and as the envelope carries it (the domain in ASCII).
    const written = context.payload.recipientOverride ?? t.recipient;
    const recipient = envelopeAddress(written);
    if (!recipient) return localOutcome('failed', 'INVALID_RECIPIENT', `not a deliverable address: ${t.recipient}`, started);

    const suppression = await findActiveSuppression(store.db, t.project_id, written, clock.now());
    if (suppression) {
      const why = suppression.status === 'rejected' ? 'on the suppression list' : `suppressed until ${formatIsoTime(suppression.blocked_until)}`;
      return localOutcome('failed', 'SUPPRESSED', `${written} is ${why} (${suppression.suppression_state})`, started);
    }

    // A message accepted in sandbox mode (its own, not the project's setting now; docs/sandbox.md):
    // no routing, and the sandbox adapter answers instead of SMTP.
    const route = context.sandbox ? null : await router.route(recipient.domain);
    if (route && route.kind !== 'route') return localOutcome(route.kind, route.resultCode, route.resultMessage, started);

    let composed;
    try {
      composed = await contexts.compose(context, t);
    } catch (error) {
      // A header value made invalid by variable substitution (domain/headers.ts), or content that
      // cannot be rendered with this recipient's variables (domain/variables.ts): no retry can fix it.
      if (error instanceof HeaderValueError) return localOutcome('failed', 'INVALID_HEADER', error.message, started);
      if (error instanceof TemplateRenderError) return localOutcome('failed', 'RENDER_FAILED', error.message, started);
      throw error;
    }
    if (route === null) {
      const reply = sandboxReply(recipient.address, t.attempts);
      return replyOutcome(reply, reply.host, started, null, reply.complaint);
    }
    // The To line names the recipient as written, its domain in the ASCII form the envelope uses
    // (docs/delivery.md, "SMTP"): an IDN domain needs no SMTPUTF8 in the header either.
    const toAddress = written === t.recipient ? recipient.address : (envelopeAddress(t.recipient)?.address ?? t.recipient);
    const raw = addressedMime(composed, toAddress, t.recipient_name);
    const from = returnPathFor(config.bounceDomain, t.id, verpTagKey(services));
    const needs = transmissionExtensionNeeds(composed.needs, from, recipient.address, composed.addressed ? null : toAddress);
    const envelope = { from, to: recipient.address, smtpUtf8: needs.smtpUtf8, eightBitMime: needs.eightBitMime };
    const sent = await smtp.sendVia(route.destinations, envelope, raw, composed.dkim, () => unit.stillHeld(t));
    // The runner records no finish for a claim it found lost: the new holder sends it.
    if (sent.fenced) return localOutcome('deferred', 'CLAIM_LOST', 'not sent: this process no longer held the transmission (stopping: given back; or presumed dead, or its lease ran out)', started);
    return replyOutcome(sent, sent.host || null, started, sent.tls ?? null, false);
  }

  /** What the event of a delivery attempt says of its message. */
  function eventMessage(context: MessageContext): EventMessage {
    return {
      id: context.id,
      uid: context.uid,
      uniqueId: context.uniqueId,
      projectUid: context.projectUid,
      accountId: context.accountId,
      recipientOverride: context.payload.recipientOverride,
      sendAt: context.payload.sendAt,
      sandbox: context.sandbox,
    };
  }

  /**
   * crashed: what the WORKER_CRASHED failure's event says of its message, read without its payload
   * (parsing it, or composing it, may be what killed the holders); null when the message is gone.
   */
  async function crashedMessage(t: ClaimedTransmission): Promise<EventMessage | null> {
    const row = await readMessageSubject(store.db, t.message_id);
    if (!row) return null;
    return {
      id: Number(row.id),
      uid: row.uid,
      uniqueId: row.unique_id,
      projectUid: row.project_uid,
      accountId: Number(row.account_id),
      recipientOverride: null,
      sendAt: null,
      sandbox: row.sandbox === 1,
    };
  }

  /** decide: the new state, the event and the attempt, from the outcome (pure but for the clock). */
  function decide(t: ClaimedTransmission, message: EventMessage | null, outcome: DeliveryOutcome, startedAt: number): DeliveryFinish {
    const now = clock.now();
    // The retry deadline and the delivery latency count from when the copy was due to be sent first:
    // acceptance, or send_at for a scheduled message.
    const dueAt = Math.max(t.created_at, message?.sendAt ?? 0);
    const decided = decideTransmissionOutcome(policy, outcome, { createdAt: dueAt, attemptsBefore: t.attempts }, now);
    const { state, resultMessage, kind, eventType } = decided;
    const address = message?.recipientOverride ?? t.recipient;
    const alongside = async (trx: Tx, attempts: number): Promise<void> => {
      if (outcome.bounce) {
        await recordBounce(trx, { projectId: t.project_id, address, kind: outcome.bounce, message: `${outcome.resultCode} ${outcome.resultMessage}`, now, transmissionId: t.id });
      }
      if (!message) return;
      const payload = buildEventPayload(
        {
          transmissionId: t.id,
          messageId: message.id,
          messageUid: message.uid,
          uniqueId: message.uniqueId,
          projectUid: message.projectUid,
          recipient: t.recipient,
          sandbox: message.sandbox,
        },
        {
          kind: eventType,
          deliveredTo: address,
          status: state.status,
          outcome: kind,
          resultCode: outcome.resultCode,
          resultMessage,
          host: outcome.host,
          attempts,
          createdAt: t.created_at,
          nextAttemptAt: state.status === 'retry' ? state.nextAttemptAt : null,
        },
        now,
      );
      await recordEvent(trx, { accountId: message.accountId, projectId: t.project_id, type: eventType, payload, now });
      // The sandbox's complaint address: the recipient reports the delivered message as spam. As
      // for a real complaint: the transmission's spammed_at (get_metrics' `spammed`), the address
      // suppressed, a `spammed` event.
      if (outcome.complaint && eventType === 'delivered') {
        await setFirstTrackingTime(trx, t.id, 'spammed_at', now);
        await recordComplaint(trx, { projectId: t.project_id, address, message: 'the recipient reported the message as spam (sandbox simulator)', now });
        await recordEvent(trx, { accountId: message.accountId, projectId: t.project_id, type: 'spammed', payload, now });
      }
    };
    return {
      finish: {
        id: t.id,
        worker: workerId,
        now,
        state,
        resultCode: outcome.resultCode,
        resultMessage,
        attempt: { startedAt, durationMs: Math.round(outcome.durationMs), mxHost: outcome.host, outcome: outcome.kind, tls: outcome.tls ?? null },
      },
      alongside,
      attempt: {
        transmissionId: t.id,
        messageId: t.message_id,
        projectId: t.project_id,
        recipient: address,
        outcome: outcome.kind,
        resultCode: outcome.resultCode,
        resultMessage,
        mxHost: outcome.host,
        durationMs: outcome.durationMs,
        attempt: t.attempts + 1,
        dueAt,
        status: state.status,
        tls: outcome.tls ?? null,
        sandbox: message?.sandbox === true,
      },
    };
  }

  /** Extends the leases of `ids`; answers those this worker still holds (the runner's fence). */
  function renewHeld(worker: string, ids: number[]): Promise<number[]> {
    return store.write((trx) => renewLeases(trx, worker, ids, clock.now(), config.leaseMs));
  }

  const job: LeaseJob<ClaimedTransmission, DeliveryFinish> = {
    name: 'delivery',
    wakeOn: 'transmissions',
    slots: Math.max(1, config.workers),
    leaseMs: config.leaseMs,
    pollMs: config.pollMs,
    stopGraceMs: options.stopGraceMs ?? STOP_GRACE_MS,
    finishBatchMs: store.commitsTurnsTogether ? FINISH_BATCH_MS.groupCommitted : FINISH_BATCH_MS.ownTransaction,
    finishBatchMax: FINISH_BATCH_MAX,
    claimWithFinishes: true,

    async claim(worker, limit) {
      const now = clock.now();
      let claimed: ClaimedTransmission[];
      if (suspect === null && performance.now() >= nextSuspectLookMs) {
        // A due suspect first, in the same transaction as the rest: both claimed, or neither.
        nextSuspectLookMs = performance.now() + SUSPECT_CLAIM_MS;
        claimed = await store.write(async (trx) => {
          const alone = await claimSuspectTransmission(trx, { worker, now, leaseMs: config.leaseMs });
          const rest = limit > alone.length ? await claimDueTransmissions(trx, { worker, now, leaseMs: config.leaseMs, limit: limit - alone.length }) : [];
          return [...alone, ...rest];
        });
        suspect = claimed.find((t) => t.holder_deaths >= SUSPECT_AFTER_DEATHS)?.id ?? null;
      } else {
        claimed = await store.writeStatement((db) => claimDueTransmissions(db, { worker, now, leaseMs: config.leaseMs, limit }));
      }
      // The batch's messages are read and parsed now, but not for a transmission to be failed for
      // the deaths of its holders: reading its message may be what killed them.
      const worked = claimed.filter((t) => t.holder_deaths < MAX_HOLDER_DEATHS);
      if (worked.length > 0) {
        const batch = contexts.load(worked);
        batch.catch(() => {}); // each transmission handles a failed batch read itself (load)
        for (const t of worked) loading.set(t.id, batch);
      }
      return claimed;
    },
    idOf: (t) => t.id,

    async work(t: ClaimedTransmission, unit: UnitContext<ClaimedTransmission>): Promise<DeliveryFinish> {
      const { outage, signal } = unit;
      const startedAt = clock.now();
      const started = performance.now();
      let message: EventMessage | null = null;
      let outcome: DeliveryOutcome;
      try {
        for (;;) {
          try {
            if (t.holder_deaths >= MAX_HOLDER_DEATHS) {
              // Whichever step killed the holders (loading the message, composing it, sending it),
              // the failure and its event need none of them: the event names what is read
              // without the payload.
              message = await crashedMessage(t);
              outcome = localOutcome('failed', WORKER_CRASHED, workerCrashedMessage(t.holder_deaths), started);
              break;
            }
            const context = await load(t);
            message = eventMessage(context);
            outcome = await attempt(t, context, started, unit);
            break;
          } catch (error) {
            // Every database read comes before the SMTP conversation: while the database is away
            // nothing was sent yet, so the attempt waits and starts over.
            if (signal.aborted || !outage.failed(error)) throw error;
            await outage.waitToRetry(() => signal.aborted);
          }
        }
      } catch (error) {
        // A throw past the adapters is a defect: log it, defer the transmission, record it.
        log.error({ err: error, transmission: t.id }, 'delivery defect');
        loading.delete(t.id);
        outcome = localOutcome('deferred', 'INTERNAL_ERROR', 'internal error during delivery (logged)', started);
      }
      return decide(t, message, outcome, startedAt);
    },

    // ONE store.write per batch: guarded UPDATEs, a multi-row attempts INSERT, bounces and events.
    async finish(_worker, finishes) {
      // Each finish names this runner's worker id already (decide).
      const inputs = finishes.map((f) => f.finish);
      return store.write(async (trx) => {
        const attempts = await finishTransmissions(trx, inputs);
        for (let i = 0; i < finishes.length; i++) {
          const n = attempts[i];
          if (n !== null) await finishes[i].alongside(trx, n);
        }
        return attempts.map((n) => n !== null);
      });
    },
    finished(t, f) {
      if (t.id === suspect) {
        suspect = null;
        nextSuspectLookMs = 0;
      }
      // One line and one count per attempt (docs/operations.md, "Logs"), recorded or not.
      recordDeliveryAttempt(services, f.attempt);
    },
    renew: renewHeld,
    confirm: renewHeld,
    release: (worker, ids) => store.write((trx) => releaseTransmissions(trx, worker, ids, clock.now())),
    heldBy: (worker) => transmissionsHeldBy(store.db, worker),
    stopped() {
      loading.clear();
      suspect = null;
      smtp.close();
      unobserveSmtp();
    },
  };
  return new LeaseRunner(services, job, workerId, options.liveness);
}

function elapsed(started: number): number {
  return performance.now() - started;
}

// Outcomes are written out field by field, one shape for all, never as `{ ...classification,
// host }`: on Node 20 a spread followed by a new key gives every object a hidden class of its own
// (docs/decisions/0003-performance.md, "Object spreads").

function localOutcome(kind: OutcomeKind, resultCode: string, resultMessage: string, started: number): DeliveryOutcome {
  return { kind, resultCode, resultMessage, bounce: null, host: null, durationMs: elapsed(started), tls: null, complaint: false };
}

/** The outcome of a reply (SMTP or the sandbox's): its classification, who answered, how long it took. */
function replyOutcome(reply: SmtpExchange, host: string | null, started: number, tls: boolean | null, complaint: boolean): DeliveryOutcome {
  const { kind, resultCode, resultMessage, bounce } = classifySmtpReply(reply);
  return { kind, resultCode, resultMessage, bounce, host, durationMs: elapsed(started), tls, complaint };
}

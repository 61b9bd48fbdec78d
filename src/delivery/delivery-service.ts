// The delivery worker: claims due transmissions under a lease, delivers each one outside any
// transaction, and finishes it under the lease. Per transmission the policy reads as a list:
//
//   load message -> suppressed? -> route (relay | transport map | MX) -> compose -> SMTP -> record
//
// Concurrency: at most config.workers transmissions between claim and recorded outcome. Claims
// are batched (one statement feeds many deliveries). Outcomes wait up to FINISH_BATCH_MS and are
// written together (finishSoon), and the claim that refills the freed slots joins the same
// commit: on SQLite one fsync covers a whole batch of finishes and the next claim. The worker wakes
// on store.wake('transmissions') (new mail) and polls every config.pollMs for retries coming due
// and leases expiring.
//
// Every send may happen twice (a lease can expire under a slow send, a process can die after the
// 250 and before the finish): the Message-ID is fixed at acceptance so receivers can de-duplicate.
import { performance } from 'node:perf_hooks';
import type { BackgroundService } from '../background.ts';
import { classifySmtpReply, type OutcomeKind } from '../domain/classify-smtp-reply.ts';
import { parseRetrySchedule, type RetryPolicy } from '../domain/retry-policy.ts';
import { decideTransmissionOutcome } from '../domain/transmission-outcome.ts';
import { generateWorkerId } from '../domain/keys.ts';
import { formatIsoTime } from '../domain/time.ts';
import type { Services } from '../services.ts';
import {
  claimDueTransmissions,
  finishTransmission,
  finishTransmissions,
  releaseTransmissions,
  renewLeases,
  type ClaimedTransmission,
  type FinishInput,
  type FinishState,
} from '../storage/delivery-queue.ts';
import { buildEventPayload, type OutcomeEventKind } from '../domain/events.ts';
import { recordEvent } from '../storage/events.ts';
import { isStoreUnavailable, type Tx } from '../storage/store.ts';
import { findActiveSuppression, recordBounce } from '../storage/suppressions.ts';
import { addressedMime, envelopeAddress } from '../domain/compose-mime.ts';
import { HeaderValueError } from '../domain/headers.ts';
import { DnsResolver } from './dns-resolver.ts';
import { MessageContexts, type MessageContext } from './message-contexts.ts';
import { Router } from './routes.ts';
import { sandboxReply } from './sandbox.ts';
import { SmtpClient } from './smtp-client.ts';
import { OutageWatch } from '../workers/outage.ts';
import { returnPathFor, verpTagKey } from '../domain/verp.ts';
import { observeSmtpConnections, recordDeliveryAttempt } from '../observability/attempts.ts';

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

/** An outcome waiting to be written (see finishSoon). */
interface QueuedFinish {
  finish: FinishInput;
  /** the writes that go with it in the same transaction (bounce, event), given the new attempt count */
  alongside: (trx: Tx, attempts: number) => Promise<void>;
  resolve: (recorded: boolean) => void;
  reject: (error: unknown) => void;
}

/** Seams for tests, not configuration. */
export interface DeliveryOptions {
  /** the port MX hosts are contacted on (25); tests point it at a peer on 127.0.0.1 */
  mxPort?: number;
  /** how long stop() waits for deliveries in flight (default STOP_GRACE_MS) */
  stopGraceMs?: number;
  /** the process's registry id (workers/process-registry.ts); a fresh one when absent */
  workerId?: string;
}

/** Largest claim in one statement. */
const MAX_CLAIM = 500;
/** How long stop() waits for deliveries in flight before giving their rows back. */
const STOP_GRACE_MS = 10_000;
/** Finishes wait at most this long to share a commit with others (see finishSoon). */
const FINISH_BATCH_MS = 10;
const FINISH_BATCH_MAX = 256;
/** Webhook wake-ups are coalesced to at most one per this interval. */
const EVENTS_WAKE_MS = 20;

export class DeliveryService implements BackgroundService {
  readonly name = 'delivery';
  readonly workerId: string;
  private readonly policy: RetryPolicy;
  private readonly contexts: MessageContexts;
  private readonly router: Router;
  private readonly smtp: SmtpClient;
  /** removes this client's connections from posthorn_smtp_connections_open */
  private readonly unobserveSmtp: () => void;
  /** every claimed transmission until its outcome is recorded (what stop() waits for) */
  private readonly inFlight = new Map<number, Promise<void>>();
  /**
   * Delivery slots in use: claimed transmissions whose outcome is not known yet. A slot is freed
   * when the SMTP work is done, before the outcome is committed, so that the claim refilling it can
   * share the commit of the finishes (see flushFinishes).
   */
  private sending = 0;
  private claiming = false;
  /** the last claim was full, or a wake-up came since: there may be more due rows */
  private moreDue = true;
  private wokeDuringClaim = false;
  private stopping = false;
  private pollTimer: NodeJS.Timeout | null = null;
  private renewTimer: NodeJS.Timeout | null = null;
  private unlisten: (() => Promise<void>) | null = null;
  private eventsWakeTimer: NodeJS.Timeout | null = null;
  private readonly stopGraceMs: number;
  private finishQueue: QueuedFinish[] = [];
  private finishTimer: NodeJS.Timeout | null = null;
  private readonly outage: OutageWatch;

  constructor(
    private readonly services: Services,
    options: DeliveryOptions = {},
  ) {
    const { config, log } = services;
    const delays = parseRetrySchedule(config.retrySchedule);
    if (!delays) throw new Error(`--retry-schedule must be durations separated by commas, like "1m,5m,1h", got "${config.retrySchedule}"`);
    this.policy = { delaysMs: delays, maxRetryAgeMs: config.maxRetryAgeMs };
    this.stopGraceMs = options.stopGraceMs ?? STOP_GRACE_MS;
    this.workerId = options.workerId ?? generateWorkerId();
    this.contexts = new MessageContexts(services);
    this.outage = new OutageWatch(log, 'delivery');
    const dns = new DnsResolver({ servers: config.dnsServers, clock: services.clock, timeoutMs: Math.min(config.connectTimeoutMs, 5000) });
    this.router = new Router(dns, config, options.mxPort ?? 25);
    this.smtp = new SmtpClient({
      ehloName: config.ehloName,
      requireTls: config.requireTls,
      maxConnectionsPerDestination: config.maxConnectionsPerDestination,
      maxConnections: config.maxConnections,
      connectTimeoutMs: config.connectTimeoutMs,
      greetingTimeoutMs: config.greetingTimeoutMs,
      socketTimeoutMs: config.socketTimeoutMs,
      log,
    });
    this.unobserveSmtp = observeSmtpConnections(services, () => this.smtp.openConnections());
  }

  async start(): Promise<void> {
    this.unlisten = await this.services.store.onWake('transmissions', () => this.wake());
    this.pollTimer = setInterval(() => this.wake(), Math.max(10, this.services.config.pollMs));
    this.pollTimer.unref();
    // Leases are renewed at a third of their length while their deliveries run.
    this.renewTimer = setInterval(() => void this.renewLeases().catch((err) => this.outage.failed(err) || this.services.log.error({ err }, 'renewing leases failed')), Math.max(1000, Math.floor(this.services.config.leaseMs / 3)));
    this.renewTimer.unref();
    this.wake();
  }

  /** Extends the lease of every transmission this worker has in flight; returns how many. */
  async renewLeases(): Promise<number> {
    const ids = [...this.inFlight.keys()];
    if (ids.length === 0) return 0;
    const { store, clock, config } = this.services;
    return store.write((trx) => renewLeases(trx, this.workerId, ids, clock.now(), config.leaseMs));
  }

  async stop(): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    if (this.pollTimer) clearInterval(this.pollTimer);
    if (this.renewTimer) clearInterval(this.renewTimer);
    await this.unlisten?.();
    const drained = Promise.allSettled([...this.inFlight.values()]);
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([drained, new Promise((resolve) => (timer = setTimeout(resolve, this.stopGraceMs)))]);
    clearTimeout(timer);
    if (this.inFlight.size > 0) {
      // Give the rows still in flight back so the next process need not wait for their leases. A
      // send that completes after this may be repeated: the fixed Message-ID lets receivers tell.
      const ids = [...this.inFlight.keys()];
      this.services.log.warn({ inFlight: ids.length }, 'delivery stopped with transmissions in flight; releasing them');
      await this.services.store.write((trx) => releaseTransmissions(trx, this.workerId, ids, this.services.clock.now())).catch(() => {});
    }
    if (this.eventsWakeTimer) {
      clearTimeout(this.eventsWakeTimer);
      this.services.store.wake('events');
    }
    this.smtp.close();
    this.unobserveSmtp();
  }

  /** New work may be due: claim if there are free slots. */
  wake(): void {
    this.moreDue = true;
    if (this.claiming) this.wokeDuringClaim = true;
    else void this.fill();
  }

  /**
   * Claims what is due now (up to the free slots), delivers it and waits for those deliveries.
   * Tests drive the worker with this and a ManualClock instead of sleeping.
   */
  async runOnce(): Promise<number> {
    const claimed = await this.claim(this.services.config.workers - this.sending - this.finishQueue.length);
    await Promise.all(claimed.map((t) => this.launch(t)));
    return claimed.length;
  }

  /**
   * Claims while slots are free and rows are due. Outside the finish flushes a claim waits for a
   * quarter of the slots to be free (unless nothing is in flight), so one statement feeds many
   * deliveries; in a finish flush any free slot is refilled (`minBatch` 1), as the claim then costs
   * no commit of its own.
   */
  private async fill(minBatch?: number): Promise<void> {
    if (this.claiming || this.stopping) return;
    // While the database is away, tries are spaced out (workers/outage.ts); the poll brings the next.
    if (this.outage.holdingOff()) return;
    this.claiming = true;
    try {
      const workers = Math.max(1, this.services.config.workers);
      const batchThreshold = minBatch ?? Math.max(1, Math.floor(workers / 4));
      while (!this.stopping && this.moreDue) {
        // Outcomes waiting in the finish queue still count: a new claim can only start deliveries
        // once they are committed, so at most `workers` sent transmissions are ever unrecorded
        // (what a crash can make us send twice).
        const busy = this.sending + this.finishQueue.length;
        const free = workers - busy;
        if (free <= 0 || (busy > 0 && free < batchThreshold)) break;
        this.wokeDuringClaim = false;
        const limit = Math.min(free, MAX_CLAIM);
        const claimed = await this.claim(limit);
        this.outage.succeeded();
        for (const t of claimed) void this.launch(t);
        if (claimed.length < limit && !this.wokeDuringClaim) this.moreDue = false;
      }
    } catch (error) {
      if (!this.outage.failed(error)) this.services.log.error({ err: error }, 'claiming transmissions failed');
    } finally {
      this.claiming = false;
    }
  }

  private async claim(limit: number): Promise<ClaimedTransmission[]> {
    if (limit <= 0) return [];
    const { store, config, clock } = this.services;
    const claimed = await store.write((trx) =>
      claimDueTransmissions(trx, { worker: this.workerId, now: clock.now(), leaseMs: config.leaseMs, limit }),
    );
    if (claimed.length > 0) this.pendingContexts = this.contexts.load(claimed);
    return claimed;
  }

  /** The contexts of the latest claimed batch, loading. */
  private pendingContexts: Promise<Map<number, MessageContext>> = Promise.resolve(new Map());

  private launch(t: ClaimedTransmission): Promise<void> {
    const contexts = this.pendingContexts;
    this.sending++;
    let slotHeld = true;
    const releaseSlot = () => {
      if (slotHeld) this.sending--;
      slotHeld = false;
    };
    const delivery = this.deliverAndRecord(t, contexts, releaseSlot).finally(() => {
      releaseSlot();
      this.inFlight.delete(t.id);
      if (this.moreDue && !this.stopping) void this.fill();
    });
    this.inFlight.set(t.id, delivery);
    return delivery;
  }

  private async deliverAndRecord(t: ClaimedTransmission, contexts: Promise<Map<number, MessageContext>>, releaseSlot: () => void): Promise<void> {
    const startedAt = this.services.clock.now();
    const started = performance.now();
    let context: MessageContext | undefined;
    let outcome: DeliveryOutcome;
    try {
      for (;;) {
        try {
          context = (await contexts.catch(() => null))?.get(t.message_id);
          if (!context) {
            // The batch load failed (one bad message must not fail the others) or missed it: load
            // this one alone.
            context = (await this.contexts.load([t])).get(t.message_id);
          }
          if (!context) throw new Error(`message ${t.message_id} of transmission ${t.id} not found`);
          outcome = await this.deliver(t, context, started);
          break;
        } catch (error) {
          // Every database read of deliver() comes before the SMTP conversation: while the
          // database is away nothing was sent yet, so the attempt waits and starts over.
          if (this.stopping || !this.outage.failed(error)) throw error;
          await this.outage.waitToRetry(() => this.stopping);
          contexts = Promise.resolve(new Map());
        }
      }
    } catch (error) {
      // A throw past the adapters is a defect: log it, defer the transmission, record it.
      this.services.log.error({ err: error, transmission: t.id }, 'delivery defect');
      outcome = { kind: 'deferred', resultCode: 'INTERNAL_ERROR', resultMessage: 'internal error during delivery (logged)', bounce: null, host: null, durationMs: elapsed(started) };
    }
    releaseSlot();
    try {
      for (;;) {
        try {
          await this.record(t, context, outcome, startedAt);
          break;
        } catch (error) {
          // The outcome is known (the mail may be sent): keep it until the database takes it,
          // rather than leave the row to be sent again when its lease ends.
          if (this.stopping || !this.outage.failed(error)) throw error;
          await this.outage.waitToRetry(() => this.stopping);
        }
      }
    } catch (error) {
      // The lease still holds the row; it is retried when the lease expires. After stop() gave
      // the row back (and the store may be closed) this is expected, not an error.
      if (this.stopping) this.services.log.debug({ err: error, transmission: t.id }, 'outcome not recorded: delivery stopped');
      else this.services.log.error({ err: error, transmission: t.id }, 'recording a delivery outcome failed');
    }
  }

  /** The policy of one transmission, step by step. */
  private async deliver(t: ClaimedTransmission, context: MessageContext, started: number): Promise<DeliveryOutcome> {
    const { services } = this;
    const recipient = envelopeAddress(context.payload.recipientOverride ?? t.recipient);
    if (!recipient) return localOutcome('failed', 'INVALID_RECIPIENT', `not a deliverable address: ${t.recipient}`, started);

    const suppression = await findActiveSuppression(services.store.db, t.project_id, recipient.address, services.clock.now());
    if (suppression) {
      const why = suppression.status === 'rejected' ? 'on the suppression list' : `suppressed until ${formatIsoTime(suppression.blocked_until)}`;
      return localOutcome('failed', 'SUPPRESSED', `${recipient.address} is ${why} (${suppression.suppression_state})`, started);
    }

    // A sandbox project (docs/sandbox.md): no routing, and the sandbox adapter answers instead of SMTP.
    const route = context.sandbox ? null : await this.router.route(recipient.domain);
    if (route && route.kind !== 'route') return localOutcome(route.kind, route.resultCode, route.resultMessage, started);

    let composed;
    try {
      composed = await this.contexts.compose(context, t);
    } catch (error) {
      // A header value made invalid by variable substitution (domain/headers.ts): no retry can fix it.
      if (error instanceof HeaderValueError) return localOutcome('failed', 'INVALID_HEADER', error.message, started);
      throw error;
    }
    if (route === null) {
      const reply = sandboxReply(recipient.address, t.attempts);
      return { ...classifySmtpReply(reply), host: reply.host, durationMs: elapsed(started), complaint: reply.complaint };
    }
    const raw = addressedMime(composed, t.recipient, t.recipient_name);
    const envelope = { from: returnPathFor(services.config.bounceDomain, t.id, verpTagKey(services)), to: recipient.address };
    const sent = await this.smtp.sendVia(route.destinations, envelope, raw, composed.dkim);
    return { ...classifySmtpReply(sent), host: sent.host || null, durationMs: elapsed(started), tls: sent.tls ?? null };
  }

  /** Attempt row + transmission state + bounce + event, in one transaction, under the lease. */
  private async record(t: ClaimedTransmission, context: MessageContext | undefined, outcome: DeliveryOutcome, startedAt: number): Promise<void> {
    const { services } = this;
    const now = services.clock.now();
    // The new state, its event and message: pure (docs/delivery.md, "Retries").
    // The retry deadline counts from acceptance, or from send_at for a scheduled message.
    const decided = decideTransmissionOutcome(this.policy, outcome, { createdAt: Math.max(t.created_at, context?.payload.sendAt ?? 0), attemptsBefore: t.attempts }, now);
    const state: FinishState = decided.state;
    const { resultMessage, kind } = decided;
    const eventType: OutcomeEventKind = decided.eventType;
    const address = context?.payload.recipientOverride ?? t.recipient;
    const finish: FinishInput = {
      id: t.id,
      worker: this.workerId,
      now,
      state,
      resultCode: outcome.resultCode,
      resultMessage,
      attempt: { startedAt, durationMs: Math.round(outcome.durationMs), mxHost: outcome.host, outcome: outcome.kind, tls: outcome.tls ?? null },
    };
    // What goes with the new state in the same transaction: the bounce and the event.
    const alongside = async (trx: Tx, attempts: number): Promise<void> => {
      if (outcome.bounce) {
        await recordBounce(trx, { projectId: t.project_id, address, kind: outcome.bounce, message: `${outcome.resultCode} ${outcome.resultMessage}`, now, transmissionId: t.id });
      }
      if (context) {
        const payload = buildEventPayload(
          {
            transmissionId: t.id,
            messageId: context.id,
            messageUid: context.uid,
            uniqueId: context.uniqueId,
            projectUid: context.projectUid,
            recipient: t.recipient,
            globalVariables: context.payload.variables,
            recipientVariables: t.variables,
          },
          {
            kind: eventType,
            deliveredTo: address,
            status: state.status,
            outcome: kind,
            resultCode: outcome.resultCode,
            resultMessage: resultMessage,
            host: outcome.host,
            attempts,
            createdAt: t.created_at,
            nextAttemptAt: state.status === 'retry' ? state.nextAttemptAt : null,
          },
          now,
        );
        await recordEvent(trx, { accountId: context.accountId, projectId: t.project_id, type: eventType, payload, now });
        // The sandbox's complaint address: the recipient reports the delivered message as spam.
        if (outcome.complaint && eventType === 'delivered') {
          await recordEvent(trx, { accountId: context.accountId, projectId: t.project_id, type: 'spammed', payload, now });
        }
      }
    };
    const recorded = await this.finishSoon({ finish, alongside });
    recordDeliveryAttempt(services, {
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
      acceptedAt: t.created_at,
      status: state.status,
      tls: outcome.tls ?? null,
    });
    if (!recorded) {
      services.log.warn({ transmission: t.id, outcome: outcome.kind }, 'lease lost before the outcome was recorded; the new holder owns the transmission');
      return;
    }
    this.wakeEvents();
  }

  /**
   * Queues a finish. Finishes wait up to FINISH_BATCH_MS (or until half the slots wait) and are
   * then written together: ONE store.write whose guarded UPDATEs, one multi-row attempts INSERT,
   * bounces and events cover the whole batch, so a batch costs one commit (one fsync, which blocks
   * the event loop on SQLite) and no per-finish savepoints. If the batch fails as a whole, each
   * finish is retried in its own store.write, so one bad finish never takes the others with it.
   */
  private finishSoon(item: Omit<QueuedFinish, 'resolve' | 'reject'>): Promise<boolean> {
    return new Promise<boolean>((resolve, reject) => {
      this.finishQueue.push({ ...item, resolve, reject });
      // Waiting outcomes hold their slots: flush early once half the slots wait, so a small
      // --workers never idles on the timer.
      const limit = Math.max(1, Math.min(FINISH_BATCH_MAX, Math.floor(this.services.config.workers / 2)));
      if (this.finishQueue.length >= limit) this.flushFinishes();
      else this.finishTimer ??= setTimeout(() => this.flushFinishes(), FINISH_BATCH_MS);
    });
  }

  private flushFinishes(): void {
    if (this.finishTimer) clearTimeout(this.finishTimer);
    this.finishTimer = null;
    const batch = this.finishQueue;
    this.finishQueue = [];
    if (batch.length > 0) {
      // One transaction where writes are group-committed (SQLite: one fsync for the batch). Where
      // each write commits on its own pooled connection (PostgreSQL, which groups fsyncs itself),
      // one transaction per finish keeps the pool's connections working in parallel: measured
      // faster there than one long transaction per batch or per pool connection.
      const size = this.services.store.writeBatchSize(batch.length);
      for (let i = 0; i < batch.length; i += size) void this.writeFinishes(batch.slice(i, i + size));
    }
    // Refill the slots these deliveries freed in the same turn: the claim joins this group commit.
    if (this.moreDue && !this.stopping) void this.fill(1);
  }

  private async writeFinishes(batch: QueuedFinish[]): Promise<void> {
    const { store } = this.services;
    let results: boolean[];
    try {
      results = await store.write(async (trx) => {
        const attempts = await finishTransmissions(trx, batch.map((b) => b.finish));
        for (let i = 0; i < batch.length; i++) {
          const n = attempts[i];
          if (n !== null) await batch[i].alongside(trx, n);
        }
        return attempts.map((n) => n !== null);
      });
    } catch (error) {
      if (batch.length === 1 || this.stopping || isStoreUnavailable(error)) {
        for (const b of batch) b.reject(error);
        return;
      }
      this.services.log.warn({ err: error, finishes: batch.length }, 'a batch of finishes failed; writing them one by one');
      await Promise.all(
        batch.map((b) =>
          store
            .write(async (trx) => {
              const n = await finishTransmission(trx, b.finish);
              if (n === null) return false;
              await b.alongside(trx, n);
              return true;
            })
            .then(b.resolve, b.reject),
        ),
      );
      return;
    }
    batch.forEach((b, i) => b.resolve(results[i]));
  }

  private wakeEvents(): void {
    if (this.eventsWakeTimer) return;
    this.eventsWakeTimer = setTimeout(() => {
      this.eventsWakeTimer = null;
      this.services.store.wake('events');
    }, EVENTS_WAKE_MS);
    this.eventsWakeTimer.unref();
  }
}

function elapsed(started: number): number {
  return performance.now() - started;
}

function localOutcome(kind: OutcomeKind, resultCode: string, resultMessage: string, started: number): DeliveryOutcome {
  return { kind, resultCode, resultMessage, bounce: null, host: null, durationMs: elapsed(started) };
}

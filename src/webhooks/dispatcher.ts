// The outbound dispatcher: turns events into webhook requests (fan-out) and posts every due
// outbound request (webhooks and postbacks) with a lease.
//
//   1. fan out:  claim undispatched events (one UPDATE ... RETURNING stamps them) and, in the same
//                transaction, insert one request per matching endpoint. Never in delivery's
//                transaction: delivery writes exactly one events row per outcome and nothing more.
//   2. claim:    one UPDATE ... RETURNING sets the lease on due requests.
//   3. post:     outside any transaction: URL policy (resolve, check, pin the address), sign, POST
//                with a timeout, no redirects.
//   4. finish:   under the lease: attempt row + delivered | pending (backoff) | failed.
//
// A crash between 2 and 4 loses nothing: the lease expires and the request is sent again with the
// same X-Posthorn-Event-Id, which receivers de-duplicate on.
import type { BackgroundService } from '../background.ts';
import { generateWorkerId } from '../domain/keys.ts';
import { eventIdOf, mailboxUidOfRef, postbackRefOf } from '../domain/outbound-refs.ts';
import { formatIsoTime } from '../domain/time.ts';
import type { Services } from '../services.ts';
import {
  claimDueOutbound,
  finishOutbound,
  hasDueOutbound,
  holdBackDestination,
  insertOutboundAttempt,
  insertOutboundMany,
  pruneOutbound,
  type DestinationHold,
  type NewOutboundRow,
  type OutboundFinish,
} from '../storage/outbound.ts';
import { hasUndispatchedEvents } from '../storage/events.ts';
import { listPostbackUrls } from '../storage/mailboxes.ts';
import type { OutboundAttempt, OutboundRequest, Webhook } from '../storage/outbound-schema.ts';
import { claimUndispatchedEvents, findProjectUids, findWebhooksByIds, listActiveWebhooksOf, type ClaimedEvent } from '../storage/webhooks.ts';
import { postOnce, type PostOutcome } from './http-post.ts';
import { nextOutboundAttemptAt, parseWebhookRetrySchedule } from './retry-schedule.ts';
import { OutageWatch } from '../workers/outage.ts';
import { signWebhook } from '../domain/signatures.ts';
import { parseOutboundUrl, resolveOutboundAddress } from './url-policy.ts';
import { recordOutboundAttempt } from '../observability/attempts.ts';

/** Requests in flight per process. */
const CONCURRENCY = 32;
/** Events fanned out per transaction; a tick does at most FAN_OUT_ROUNDS of them. */
const FAN_OUT_BATCH = 500;
const FAN_OUT_ROUNDS = 20;
const USER_AGENT = 'Posthorn-Webhooks/1';
/** How long finished requests wait to be recorded together. */
const FINISH_BATCH_MS = 5;
/** How long finished requests stay listed by list_webhook_deliveries. */
export const DELIVERED_RETENTION_MS = 7 * 86_400_000;
export const FAILED_RETENTION_MS = 30 * 86_400_000;
const PRUNE_EVERY_MS = 3600_000;
/** Keys of the webhook body that the event payload may not override. */
const RESERVED = new Set(['event', 'event_id', 'project_uid', 'occurred_at']);

export interface OutboundDispatcher extends BackgroundService {
  /** Runs fan-out and dispatch until nothing is due and nothing is in flight (tests, CLI). */
  drain(): Promise<void>;
}

export function createOutboundDispatcher(services: Services, workerId?: string): OutboundDispatcher {
  const { store, config, clock, log } = services;
  const worker = workerId ?? generateWorkerId();
  // The lease must outlast one request: its timeout plus the time to resolve and record.
  const leaseMs = Math.max(config.webhookTimeoutMs * 3, 30_000);
  const inFlight = new Set<Promise<void>>();
  let stopped = false;
  let running: Promise<void> | null = null;
  let again = false;
  let timer: NodeJS.Timeout | null = null;
  let unsubscribe: (() => Promise<void>) | null = null;
  const outage = new OutageWatch(log, 'webhooks');
  const retryDelaysMs = parseWebhookRetrySchedule(config.webhookRetrySchedule);

  /** Events may be waiting (a wake-up or the poll timer); a finished request only frees a slot. */
  let fanOutWanted = true;

  function kick(reason: 'events' | 'slot' = 'events'): void {
    if (stopped) return;
    if (reason === 'events') fanOutWanted = true;
    // While the database is away, tries are spaced out (workers/outage.ts); the poll brings the next.
    if (outage.holdingOff()) return;
    if (running) {
      again = true;
      return;
    }
    running = (async () => {
      try {
        do {
          again = false;
          await pruneIfDue();
          if (fanOutWanted) {
            fanOutWanted = false;
            await fanOut();
          }
          await dispatchDue();
          outage.succeeded();
        } while (again && !stopped);
      } catch (error) {
        if (outage.failed(error)) fanOutWanted = true;
        else log.error({ err: error }, 'webhook dispatcher tick failed');
      } finally {
        running = null;
      }
    })();
  }

  let prunedAt = Number.NEGATIVE_INFINITY;
  /** Hourly: forget requests delivered a week ago or failed a month ago (bounded per run). */
  async function pruneIfDue(): Promise<void> {
    const now = clock.now();
    if (now - prunedAt < PRUNE_EVERY_MS) return;
    prunedAt = now;
    for (let round = 0; round < 10; round++) {
      const n = await store.write((trx) => pruneOutbound(trx, { deliveredBefore: now - DELIVERED_RETENTION_MS, failedBefore: now - FAILED_RETENTION_MS, limit: 1000 }));
      if (n < 1000) return;
    }
  }

  async function fanOut(): Promise<number> {
    let total = 0;
    for (let round = 0; round < FAN_OUT_ROUNDS && !stopped; round++) {
      const now = clock.now();
      const count = await store.write(async (trx) => {
        const events = await claimUndispatchedEvents(trx, { now, limit: FAN_OUT_BATCH });
        if (events.length === 0) return 0;
        const accounts = [...new Set(events.map((e) => e.account_id))];
        const hooks = await listActiveWebhooksOf(trx, accounts);
        const projects = await findProjectUids(trx, [...new Set(events.map((e) => e.project_id).filter((p): p is number => p !== null))]);
        const rows: NewOutboundRow[] = [];
        for (const event of events) {
          for (const hook of hooks) {
            if (!endpointWants(hook, event)) continue;
            rows.push(webhookRequestRow(hook, event, projects, now));
          }
        }
        await insertOutboundMany(trx, rows);
        return events.length;
      });
      total += count;
      if (count < FAN_OUT_BATCH) break;
    }
    return total;
  }

  /**
   * Claims due requests into the free slots, once a quarter of the slots are free (or none is
   * busy), so that a stream of completions costs one claim per batch rather than one per request.
   */
  async function dispatchDue(): Promise<void> {
    while (!stopped) {
      const free = CONCURRENCY - inFlight.size;
      if (free <= 0) return;
      if (inFlight.size > 0 && free < CONCURRENCY / 4) return;
      const now = clock.now();
      const claimed = await store.write((trx) =>
        claimDueOutbound(trx, { worker, now, leaseUntil: now + leaseMs, limit: free }),
      );
      // One read for the endpoints of the whole batch (signing needs each one's current secret).
      const hookIds = [...new Set(claimed.map((r) => r.webhook_id).filter((id): id is number => id !== null))];
      const hooks = new Map((await findWebhooksByIds(store.db, hookIds)).map((h) => [Number(h.id), h]));
      const postbackUrls = await findPostbackUrls(store.db, claimed);
      for (const request of claimed) {
        const hook = request.webhook_id === null ? undefined : hooks.get(request.webhook_id);
        // Requests go where their endpoint (or mailbox) points now: fixing a wrong URL also fixes
        // the retries of what was already queued for it.
        const url = hook ? hook.url : (postbackUrls.get(`${request.account_id}:${request.ref}`) ?? request.url);
        const job: Promise<void> = deliver({ ...request, url }, hook)
          .catch((error) => log.error({ err: error, request: request.id }, 'outbound request failed unexpectedly'))
          .finally(() => {
            inFlight.delete(job);
            kick('slot');
          });
        inFlight.add(job);
      }
      if (claimed.length < free) return;
    }
  }

  // Outcomes are recorded in small batches: requests finish at scattered moments, and one
  // transaction (one fsync on SQLite) per request capped dispatch at a few hundred a second
  // (bench/webhooks.ts). A crash inside the window only means a re-send, as with any crash.
  interface FinishItem {
    attempt: Omit<OutboundAttempt, 'id'>;
    finish: OutboundFinish;
    /** set when the attempt failed: the destination's other due requests wait too */
    holdBack: DestinationHold | null;
  }
  const pendingFinishes: Array<FinishItem & { resolve: (kept: boolean) => void; reject: (e: unknown) => void }> = [];
  let finishTimer: NodeJS.Timeout | null = null;

  function recordFinish(item: FinishItem): Promise<boolean> {
    return new Promise<boolean>((resolve, reject) => {
      pendingFinishes.push({ ...item, resolve, reject });
      finishTimer ??= setTimeout(flushFinishes, FINISH_BATCH_MS);
    });
  }

  async function flushFinishes(): Promise<void> {
    finishTimer = null;
    const batch = pendingFinishes.splice(0);
    try {
      const kept = await store.write(async (trx) => {
        const out: boolean[] = [];
        for (const item of batch) {
          await insertOutboundAttempt(trx, item.attempt);
          out.push(await finishOutbound(trx, item.finish));
          if (item.holdBack) await holdBackDestination(trx, item.holdBack);
        }
        return out;
      });
      batch.forEach((item, i) => item.resolve(kept[i]));
    } catch (error) {
      for (const item of batch) item.reject(error);
    }
  }

  async function deliver(request: OutboundRequest, hook: Webhook | undefined): Promise<void> {
    const startedAt = clock.now();
    const outcome = await attempt(request, hook);
    const now = clock.now();
    let state: 'pending' | 'delivered' | 'failed' = 'delivered';
    let nextAttemptAt = now;
    if (!outcome.ok) {
      const next = nextOutboundAttemptAt(retryDelaysMs, request.attempts, now);
      if (next === null) state = 'failed';
      else {
        state = 'pending';
        nextAttemptAt = next;
      }
    }
    const finishItem: FinishItem = {
      attempt: { request_id: request.id, started_at: startedAt, duration_ms: outcome.durationMs, status_code: outcome.statusCode, error: outcome.error, worker },
      finish: { id: request.id, worker, now, state, nextAttemptAt, statusCode: outcome.statusCode, error: outcome.error, url: request.url },
      // A failing destination is backed off as a whole: its other due requests (not yet tried
      // this round) wait for the same moment instead of each spending a slot on a likely failure,
      // so one dead endpoint cannot starve the others. They are not charged an attempt.
      holdBack:
        state === 'pending'
          ? { accountId: request.account_id, webhookId: request.webhook_id, url: request.webhook_id === null ? request.url : null, until: nextAttemptAt, now }
          : null,
    };
    let kept: boolean;
    for (;;) {
      try {
        kept = await recordFinish(finishItem);
        break;
      } catch (error) {
        // The request went out: keep its outcome until the database takes it, rather than post
        // it again when its lease ends.
        if (stopped || !outage.failed(error)) throw error;
        await outage.waitToRetry(() => stopped);
      }
    }
    if (!kept) log.warn({ request: request.id }, 'outbound lease lost before the result was recorded; another worker retries it');
    if (state !== 'delivered') log.info({ request: request.id, kind: request.kind, state, status: outcome.statusCode, error: outcome.error }, 'outbound request not delivered');
    // One line and one count per attempt (docs/operations.md, "Logs"), delivered or not.
    recordOutboundAttempt(services, {
      requestId: request.id,
      kind: request.kind,
      outcome: state === 'pending' ? 'retry' : state,
      statusCode: outcome.statusCode,
      error: outcome.error,
      durationMs: outcome.durationMs,
      url: request.url,
      attempt: request.attempts + 1,
      eventType: request.event_type,
      webhookId: request.webhook_id,
    });
    if (kept && request.kind === 'postback' && state !== 'pending') store.wake('mailboxes');
  }

  /** Opened endpoint secrets by their sealed form: a rotation changes the sealed form. */
  const openedSecrets = new Map<string, string>();
  function openSecret(sealed: string): string {
    let secret = openedSecrets.get(sealed);
    if (secret === undefined) {
      if (openedSecrets.size >= 1000) openedSecrets.clear();
      secret = services.secrets.open(sealed);
      openedSecrets.set(sealed, secret);
    }
    return secret;
  }

  async function attempt(request: OutboundRequest, hook: Webhook | undefined): Promise<PostOutcome> {
    const failed = (error: string): PostOutcome => ({ ok: false, statusCode: null, error, durationMs: 0 });
    const parsed = parseOutboundUrl(request.url);
    if (!parsed.ok) return failed(`URL ${parsed.reason}`);
    const checked = await resolveOutboundAddress(parsed.url, { allowPrivate: config.allowPrivateWebhooks, dnsServers: config.dnsServers });
    if (!checked.ok) return failed(`refused: ${checked.reason}`);
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      'user-agent': USER_AGENT,
      ...(JSON.parse(request.headers) as Record<string, string>),
    };
    if (request.kind === 'webhook') {
      // Signed with the endpoint's current secret at every attempt, so a rotation applies to
      // retries too and the timestamp is fresh.
      if (!hook) return failed('the webhook endpoint was deleted');
      const secret = openSecret(hook.secret);
      const timestamp = Math.floor(clock.now() / 1000);
      headers['x-posthorn-timestamp'] = String(timestamp);
      headers['x-posthorn-signature'] = signWebhook(secret, timestamp, request.body);
    }
    return postOnce({ url: parsed.url, address: checked.address, family: checked.family, headers, body: request.body, timeoutMs: config.webhookTimeoutMs });
  }

  return {
    name: 'webhooks',
    async start() {
      unsubscribe = await store.onWake('events', () => kick('events'));
      timer = setInterval(() => kick('events'), Math.max(50, config.pollMs));
      timer.unref();
      kick();
    },
    async stop() {
      stopped = true;
      if (timer) clearInterval(timer);
      await unsubscribe?.();
      await running;
      // Requests in flight end within their timeout; let them record their outcome.
      await Promise.allSettled([...inFlight]);
    },
    async drain() {
      // Everything goes through the one tick loop, so claims never run side by side (on
      // PostgreSQL, SKIP LOCKED would let two concurrent claims overfill the slots).
      for (let i = 0; i < 10_000 && !stopped; i++) {
        kick('events');
        while (running) await running;
        if (inFlight.size > 0) {
          await Promise.race([...inFlight]);
          continue;
        }
        const now = clock.now();
        const due = await hasDueOutbound(store.db, now);
        const undispatched = await hasUndispatchedEvents(store.db);
        if (!due && !undispatched) return;
      }
    },
  };
}

/** Current postback URLs of the mailboxes the claimed postbacks came from (ref "mailbox:<uid>"). */
async function findPostbackUrls(db: Services['store']['db'], requests: OutboundRequest[]): Promise<Map<string, string>> {
  const wanted = requests.filter((r) => r.kind === 'postback' && mailboxUidOfRef(r.ref) !== null);
  const out = new Map<string, string>();
  if (wanted.length === 0) return out;
  const rows = await listPostbackUrls(db, [...new Set(wanted.map((r) => r.account_id))], [...new Set(wanted.map((r) => mailboxUidOfRef(r.ref)!))]);
  for (const row of rows) out.set(`${Number(row.account_id)}:${postbackRefOf(row.uid)}`, row.postback_url);
  return out;
}

function endpointWants(hook: Webhook, event: ClaimedEvent): boolean {
  if (Number(hook.account_id) !== event.account_id) return false;
  // An endpoint hears of what happens after it exists, not of the backlog before it.
  if (Number(hook.created_at) > event.created_at) return false;
  if (hook.project_id !== null && Number(hook.project_id) !== event.project_id) return false;
  const wanted = JSON.parse(hook.events) as string[];
  return wanted.includes(event.type);
}

function webhookRequestRow(hook: Webhook, event: ClaimedEvent, projects: Map<number, string>, now: number): NewOutboundRow {
  let payload: Record<string, unknown> = {};
  try {
    const parsed = JSON.parse(event.payload) as unknown;
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) payload = parsed as Record<string, unknown>;
  } catch {
    // A payload that is not JSON is a producer's bug; the event is still reported, without it.
  }
  const rest = Object.fromEntries(Object.entries(payload).filter(([key]) => !RESERVED.has(key)));
  const body = JSON.stringify({
    event: event.type,
    event_id: eventIdOf(event.id),
    project_uid: event.project_id === null ? null : (projects.get(event.project_id) ?? null),
    occurred_at: formatIsoTime(event.created_at),
    ...rest,
  });
  return {
    account_id: event.account_id,
    project_id: event.project_id,
    kind: 'webhook',
    webhook_id: Number(hook.id),
    event_id: event.id,
    event_type: event.type,
    url: hook.url,
    headers: JSON.stringify({ 'x-posthorn-event-id': eventIdOf(event.id), 'x-posthorn-event': event.type }),
    ref: null,
    state: 'pending',
    attempts: 0,
    next_attempt_at: now,
    created_at: now,
    updated_at: now,
    body,
  };
}

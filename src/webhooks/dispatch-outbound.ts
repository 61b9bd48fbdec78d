// The dispatch job: due outbound requests (webhooks and mailbox postbacks), claimed under a lease
// by the lease runner (workers/lease-runner.ts: slots, finish batching, renewal, wake-ups on
// 'outbound', outages, stop). One request, as its steps:
//
//   claim      one UPDATE ... RETURNING leases a batch (and charges the attempt); one read finds
//              the batch's endpoints and mailboxes, so each request goes where its endpoint points
//              now: fixing a wrong URL also fixes the retries of what was already queued for it;
//              the requests of events get their `variables` from their message and transmission
//              (webhooks/event-variables.ts: stored once, not per request)
//   crashed    its holders died with it MAX_HOLDER_DEATHS times in a row: failed, WORKER_CRASHED,
//              not posted (domain/holder-deaths.ts); from SUSPECT_AFTER_DEATHS it is claimed alone
//              and posted while no other suspect is held here, so that the next crash is pinned on it
//   check      the URL policy: resolve, refuse private addresses unless allowed, pin the address
//              (webhooks/url-policy.ts, the SSRF guard)
//   sign       a webhook with its endpoint's current secret at every attempt (a rotation applies
//              to retries, the timestamp is fresh); a postback was signed when enqueued
//   fence      only if this process still holds the request (the lease runner's fence: it may have
//              been presumed dead, or its lease may have run out, while it stalled); else nothing is
//              posted nor recorded: its new holder posts it
//   post       with a timeout, no redirects (webhooks/http-post.ts)
//   finish     attempt row + delivered | pending (backoff, --webhook-retry-schedule) | failed,
//              batched, under the lease; a failing destination's other due requests wait too
//   count      one log line and one count per attempt (observability/attempts.ts)
//
// A crash between claim and finish loses nothing: the request is posted again with the same
// X-Posthorn-Event-Id, which receivers de-duplicate on.
import { performance } from 'node:perf_hooks';
import { MAX_HOLDER_DEATHS, SUSPECT_AFTER_DEATHS, WORKER_CRASHED, workerCrashedRequestMessage } from '../domain/holder-deaths.ts';
import { generateWorkerId } from '../domain/keys.ts';
import { withFields } from '../domain/objects.ts';
import { mailboxUidOfRef, postbackRefOf } from '../domain/outbound-refs.ts';
import { signWebhook } from '../domain/signatures.ts';
import { recordOutboundAttempt } from '../observability/attempts.ts';
import type { ProcessLiveness, Services } from '../services.ts';
import { listPostbackUrls } from '../storage/mailboxes.ts';
import {
  claimDueOutbound,
  finishOutbound,
  holdBackDestination,
  insertOutboundAttempt,
  outboundHeldBy,
  releaseOutbound,
  renewOutboundLeases,
  type DestinationHold,
  type OutboundFinish,
} from '../storage/outbound.ts';
import type { OutboundAttempt, OutboundRequest, Webhook } from '../storage/outbound-schema.ts';
import { findWebhooksByIds } from '../storage/webhooks.ts';
import { LeaseRunner, type LeaseJob, type UnitContext } from '../workers/lease-runner.ts';
import { EventVariables } from './event-variables.ts';
import { postOnce, type PostOutcome } from './http-post.ts';
import { nextOutboundAttemptAt, parseWebhookRetrySchedule } from './retry-schedule.ts';
import { parseOutboundUrl, resolveOutboundAddress } from './url-policy.ts';

/** Requests in flight per process. */
const CONCURRENCY = 32;
const USER_AGENT = 'Posthorn-Webhooks/1';
/** How long finished requests wait to be recorded together. */
const FINISH_BATCH_MS = 5;
/** While no suspect is held, a claim also looks for a due one, at most once per this interval. */
const SUSPECT_CLAIM_MS = 1000;

/** A claimed request with where it goes now and, for a webhook, its endpoint. */
interface OutboundUnit {
  request: OutboundRequest;
  hook: Webhook | undefined;
}

interface OutboundFinishItem {
  attempt: Omit<OutboundAttempt, 'id' | 'worker'>;
  finish: Omit<OutboundFinish, 'worker'>;
  /** set when the attempt failed: the destination's other due requests wait too */
  holdBack: DestinationHold | null;
  outcome: PostOutcome;
  /** not posted: the fence found the request taken (nothing is recorded for it) */
  fenced: boolean;
}

/** What post() came to: an outcome, or nothing posted because the request was taken meanwhile. */
type PostResult = PostOutcome | 'fenced';

export type DispatchWorker = LeaseRunner<OutboundUnit, OutboundFinishItem>;

/**
 * @param workerId the process's registry id (workers/process-registry.ts); a fresh one when absent
 * @param liveness the process's standing in the registry, for the fence before each post
 */
export function createDispatchWorker(services: Services, workerId?: string, liveness?: ProcessLiveness): DispatchWorker {
  const { store, config, clock, log } = services;
  // The lease must outlast one request: its timeout plus the time to resolve and record.
  const leaseMs = Math.max(config.webhookTimeoutMs * 3, 30_000);
  const retryDelaysMs = parseWebhookRetrySchedule(config.webhookRetrySchedule);

  const eventVariables = new EventVariables();

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

  /** the suspect this process posts (at most one at a time), and when to look for one next */
  let suspect: number | null = null;
  let nextSuspectLookMs = 0;

  /**
   * fence: whether this process still holds the request, right before it is posted. While the
   * database is away nothing can be confirmed: it waits for it, as the delivery job does.
   */
  async function stillHeld(unit: OutboundUnit, context: UnitContext<OutboundUnit>): Promise<boolean> {
    for (;;) {
      try {
        return await context.stillHeld(unit);
      } catch (error) {
        if (context.signal.aborted || !context.outage.failed(error)) throw error;
        await context.outage.waitToRetry(() => context.signal.aborted);
      }
    }
  }

  /** check -> sign -> fence -> post. */
  async function post(unit: OutboundUnit, context: UnitContext<OutboundUnit>): Promise<PostResult> {
    const { request, hook } = unit;
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
      if (!hook) return failed('the webhook endpoint was deleted');
      const timestamp = Math.floor(clock.now() / 1000);
      headers['x-posthorn-timestamp'] = String(timestamp);
      headers['x-posthorn-signature'] = signWebhook(openSecret(hook.secret), timestamp, request.body);
    }
    // After the resolution, where a stalled process may have spent its stall.
    if (!(await stillHeld(unit, context))) return 'fenced';
    return postOnce({ url: parsed.url, address: checked.address, family: checked.family, headers, body: request.body, timeoutMs: config.webhookTimeoutMs });
  }

  /** Renews the leases of `ids`; answers those this worker still holds (the runner's fence). */
  function renewHeld(worker: string, ids: number[]): Promise<number[]> {
    return store.write((trx) => renewOutboundLeases(trx, worker, ids, clock.now() + leaseMs));
  }

  const job: LeaseJob<OutboundUnit, OutboundFinishItem> = {
    name: 'webhooks',
    wakeOn: 'outbound',
    slots: CONCURRENCY,
    leaseMs,
    pollMs: Math.max(50, config.pollMs),
    // Requests in flight end within their timeout; let them record their outcome.
    stopGraceMs: config.webhookTimeoutMs + 2000,
    finishBatchMs: FINISH_BATCH_MS,
    finishBatchMax: CONCURRENCY,

    async claim(worker, limit) {
      const now = clock.now();
      const leaseUntil = now + leaseMs;
      let claimed: OutboundRequest[];
      if (suspect === null && performance.now() >= nextSuspectLookMs) {
        // A due suspect first, in the same transaction as the rest: both claimed, or neither.
        nextSuspectLookMs = performance.now() + SUSPECT_CLAIM_MS;
        claimed = await store.write(async (trx) => {
          const alone = await claimDueOutbound(trx, { worker, now, leaseUntil, limit: 1, suspects: true });
          const rest = limit > alone.length ? await claimDueOutbound(trx, { worker, now, leaseUntil, limit: limit - alone.length }) : [];
          return [...alone, ...rest];
        });
        suspect = claimed.find((r) => r.holder_deaths >= SUSPECT_AFTER_DEATHS)?.id ?? null;
      } else {
        claimed = await store.writeStatement((db) => claimDueOutbound(db, { worker, now, leaseUntil, limit }));
      }
      if (claimed.length === 0) return [];
      // One read for the endpoints of the whole batch (signing needs each one's current secret).
      const hookIds = [...new Set(claimed.map((r) => r.webhook_id).filter((id): id is number => id !== null))];
      const hooks = new Map((await findWebhooksByIds(store.db, hookIds)).map((h) => [Number(h.id), h]));
      const postbackUrls = await findPostbackUrls(store.db, claimed);
      const bodies = await eventVariables.bodiesOf(store.db, claimed);
      return claimed.map((request) => {
        const hook = request.webhook_id === null ? undefined : hooks.get(request.webhook_id);
        const url = hook ? hook.url : (postbackUrls.get(`${request.account_id}:${request.ref}`) ?? request.url);
        return { request: { ...request, url, body: bodies.get(request.id) ?? request.body }, hook };
      });
    },
    idOf: (unit) => unit.request.id,

    async work(unit, context) {
      const { request } = unit;
      const startedAt = clock.now();
      // A request whose holders died with it MAX_HOLDER_DEATHS times in a row is not posted again.
      const crashed = request.holder_deaths >= MAX_HOLDER_DEATHS;
      let posted: PostResult | null = null;
      try {
        if (!crashed) posted = await post(unit, context);
      } catch (error) {
        // A defect (the runner logs it; the lease still holds the request): the suspect slot is free again.
        if (request.id === suspect) suspect = null;
        throw error;
      }
      const fenced = posted === 'fenced';
      const outcome: PostOutcome =
        posted === null
          ? { ok: false, statusCode: null, error: `${WORKER_CRASHED}: ${workerCrashedRequestMessage(request.holder_deaths)}`, durationMs: 0 }
          : posted === 'fenced'
            ? { ok: false, statusCode: null, error: 'not posted: this process no longer held the request (presumed dead, or its lease ran out)', durationMs: 0 }
            : posted;
      const now = clock.now();
      let state: OutboundFinish['state'] = 'delivered';
      let nextAttemptAt = now;
      if (crashed) state = 'failed';
      else if (!outcome.ok) {
        const next = nextOutboundAttemptAt(retryDelaysMs, request.attempts, now);
        if (next === null) state = 'failed';
        else {
          state = 'pending';
          nextAttemptAt = next;
        }
      }
      return {
        attempt: { request_id: request.id, started_at: startedAt, duration_ms: outcome.durationMs, status_code: outcome.statusCode, error: outcome.error },
        finish: { id: request.id, now, state, nextAttemptAt, statusCode: outcome.statusCode, error: outcome.error, url: request.url },
        // A failing destination is backed off as a whole: its other due requests (not yet tried
        // this round) wait for the same moment instead of each spending a slot on a likely
        // failure, so one dead endpoint cannot starve the others. They are not charged an attempt.
        holdBack:
          state === 'pending'
            ? { accountId: request.account_id, webhookId: request.webhook_id, url: request.webhook_id === null ? request.url : null, until: nextAttemptAt, now }
            : null,
        outcome,
        fenced,
      };
    },

    finish: (worker, items) =>
      store.write(async (trx) => {
        const kept: boolean[] = [];
        for (const item of items) {
          // withFields, not spreads: per webhook request (domain/objects.ts).
          await insertOutboundAttempt(trx, withFields(item.attempt, { worker }));
          kept.push(await finishOutbound(trx, withFields(item.finish, { worker })));
          if (item.holdBack) await holdBackDestination(trx, item.holdBack);
        }
        return kept;
      }),

    finished({ request }, { finish, outcome, fenced }, kept) {
      if (request.id === suspect) {
        suspect = null;
        nextSuspectLookMs = 0;
      }
      // Not posted, nothing recorded: its new holder posts it (the runner logged the lost claim).
      if (fenced) return;
      if (finish.state !== 'delivered') log.info({ request: request.id, kind: request.kind, state: finish.state, status: outcome.statusCode, error: outcome.error }, 'outbound request not delivered');
      // One line and one count per attempt (docs/operations.md, "Logs"), delivered or not.
      recordOutboundAttempt(services, {
        requestId: request.id,
        kind: request.kind,
        outcome: finish.state === 'pending' ? 'retry' : finish.state,
        statusCode: outcome.statusCode,
        error: outcome.error,
        durationMs: outcome.durationMs,
        url: request.url,
        // The claim charged this attempt: request.attempts counts it already.
        attempt: request.attempts,
        eventType: request.event_type,
        webhookId: request.webhook_id,
      });
      // A settled postback lets its mailbox flag the email \Seen (ingress/watch-mailboxes.ts).
      if (kept && request.kind === 'postback' && finish.state !== 'pending') store.wake('mailboxes');
    },
    renew: renewHeld,
    confirm: renewHeld,
    release: (worker, ids) => store.write((trx) => releaseOutbound(trx, worker, ids, clock.now())),
    heldBy: (worker) => outboundHeldBy(store.db, worker),
    stopped() {
      suspect = null;
    },
  };
  return new LeaseRunner(services, job, workerId ?? generateWorkerId(), liveness);
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

// The events fan-out job: every event row becomes one outbound request per webhook endpoint that
// wants it, under the sweep runner (workers/sweep-runner.ts). One batch, in ONE transaction:
//
//   claim     undispatched events (one UPDATE ... RETURNING stamps them dispatched)
//   match     the account's active endpoints: same account, the project (or account-wide), the
//             event type, and created before the event (an endpoint hears of what happens after
//             it exists, not of the backlog before it)
//   enqueue   one request per match, its body built here (docs/webhooks.md) but for the event's
//             `variables`, which the dispatcher adds when it posts (variables_of: the event's
//             transmission), and signed at send time
//
// Never in delivery's transaction: delivery writes exactly one events row per outcome and nothing
// more. The requests are posted by the dispatch job (dispatch-outbound.ts), woken on 'outbound'.
import { eventIdOf } from '../domain/outbound-refs.ts';
import { formatIsoTime } from '../domain/time.ts';
import type { Services } from '../services.ts';
import { hasUndispatchedEvents } from '../storage/events.ts';
import { insertOutboundMany, webhookRequestRow, type NewOutboundRow } from '../storage/outbound.ts';
import type { Webhook } from '../storage/outbound-schema.ts';
import { claimUndispatchedEvents, findProjectUids, listActiveWebhooksOf, type ClaimedEvent } from '../storage/webhooks.ts';
import { SweepRunner } from '../workers/sweep-runner.ts';

/** Events fanned out per transaction; a run does at most FAN_OUT_ROUNDS of them. */
const FAN_OUT_BATCH = 500;
const FAN_OUT_ROUNDS = 20;
/** Keys of the webhook body that the event payload may not override. */
const RESERVED = new Set(['event', 'event_id', 'project_uid', 'occurred_at']);

export function createFanOutJob(services: Services): SweepRunner {
  const { store, clock, config } = services;
  return new SweepRunner(services, {
    name: 'events-fan-out',
    wakeOn: 'events',
    everyMs: Math.max(50, config.pollMs),
    async sweep(shouldStop) {
      // Most wake-ups find nothing (events of accounts without endpoints are recorded dispatched,
      // storage/events.ts): one read of the small pending index instead of a write transaction.
      if (!(await hasUndispatchedEvents(store.db))) return;
      let enqueued = 0;
      for (let round = 0; round < FAN_OUT_ROUNDS && !shouldStop(); round++) {
        const now = clock.now();
        const { events, requests } = await store.write(async (trx) => {
          const claimed = await claimUndispatchedEvents(trx, { now, limit: FAN_OUT_BATCH });
          if (claimed.length === 0) return { events: 0, requests: 0 };
          const hooks = await listActiveWebhooksOf(trx, [...new Set(claimed.map((e) => e.account_id))]);
          const projects = await findProjectUids(trx, [...new Set(claimed.map((e) => e.project_id).filter((p): p is number => p !== null))]);
          const rows: NewOutboundRow[] = [];
          for (const event of claimed) {
            for (const hook of hooks) if (endpointWants(hook, event)) rows.push(requestFor(hook, event, projects, now));
          }
          await insertOutboundMany(trx, rows);
          return { events: claimed.length, requests: rows.length };
        });
        enqueued += requests;
        if (events < FAN_OUT_BATCH) break;
      }
      if (enqueued > 0) store.wake('outbound');
    },
  });
}

function endpointWants(hook: Webhook, event: ClaimedEvent): boolean {
  if (Number(hook.account_id) !== event.account_id) return false;
  if (Number(hook.created_at) > event.created_at) return false;
  if (hook.project_id !== null && Number(hook.project_id) !== event.project_id) return false;
  const wanted = JSON.parse(hook.events) as string[];
  return wanted.includes(event.type);
}

/**
 * The request of one endpoint for one event: the body an endpoint receives (docs/webhooks.md) but
 * for its `variables`. Those are added when it is posted, from the message and the transmission
 * (variables_of), so the message's global variables are stored once, not once per recipient and
 * endpoint (domain/events.ts). An event written before that holds its variables: they stay in the body.
 */
function requestFor(hook: Webhook, event: ClaimedEvent, projects: Map<number, string>, now: number): NewOutboundRow {
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
  const variablesOf = 'variables' in payload || typeof payload.transmission_id !== 'number' ? null : payload.transmission_id;
  return webhookRequestRow({
    accountId: event.account_id,
    projectId: event.project_id,
    webhookId: Number(hook.id),
    url: hook.url,
    eventId: event.id,
    eventKey: eventIdOf(event.id),
    eventType: event.type,
    body,
    variablesOf,
    now,
  });
}

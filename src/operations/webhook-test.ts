// A test event for one webhook endpoint (`posthorn webhook test`, docs/cli.md): an outbound request
// like the ones fan-out writes, with event "test", posted, signed and retried by the dispatcher of
// the running service exactly as a real event is, so it proves the endpoint, its secret and the
// path to it.
import { randomUUID } from 'node:crypto';
import { ApiError } from '../domain/errors.ts';
import { formatIsoTime } from '../domain/time.ts';
import type { Services } from '../services.ts';
import { insertOutbound, webhookRequestRow } from '../storage/outbound.ts';
import type { Account } from '../storage/schema.ts';
import { listWebhooks } from './webhooks.ts';
import { outboundStates, type OutboundState } from './outbound-requests.ts';

export interface QueuedTestEvent {
  requestId: number;
  webhookUid: string;
  url: string;
}

export async function sendWebhookTestEvent(services: Services, account: Account, webhookUid: string): Promise<QueuedTestEvent> {
  const view = (await listWebhooks(services, account)).find((w) => w.webhook.uid === webhookUid);
  if (!view) throw new ApiError('not_found', `Webhook ${webhookUid} not found.`);
  const hook = view.webhook;
  const now = services.clock.now();
  const eventId = `test-${randomUUID()}`;
  const body = JSON.stringify({ event: 'test', event_id: eventId, project_uid: view.projectUid, occurred_at: formatIsoTime(now), test: true });
  const row = webhookRequestRow({ accountId: account.id, projectId: hook.project_id, webhookId: Number(hook.id), url: hook.url, eventId: null, eventKey: eventId, eventType: 'test', body, now });
  const requestId = await services.store.write((trx) => insertOutbound(trx, row));
  services.store.wake('outbound');
  return { requestId, webhookUid: hook.uid, url: hook.url };
}

/** The state of outbound requests by id (pending, delivered, failed). */
export async function readOutboundStates(services: Services, ids: readonly number[]): Promise<Map<number, OutboundState>> {
  return outboundStates(services.store.db, ids);
}

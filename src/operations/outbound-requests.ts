// The one outbound HTTP path (docs/webhooks.md): a request row written in the caller's transaction, then
// claimed, posted, retried and recorded by the dispatch job (src/webhooks/dispatch-outbound.ts). Webhook fan-out
// and mailbox postbacks both enqueue here. After the transaction commits, the producer calls
// store.wake('outbound') so the dispatcher picks the row up at once (it also polls).
import { findOutboundStates, insertOutbound } from '../storage/outbound.ts';
import type { Tx } from '../storage/store.ts';

export interface NewOutboundRequest {
  accountId: number;
  projectId: number | null;
  /** what it is for: 'webhook' (signed at send time) or 'postback' (headers given here) */
  kind: 'webhook' | 'postback';
  url: string;
  body: string;
  /** extra headers sent as given (the postback's X-PostageApp-Signature) */
  headers: Record<string, string>;
  /** an opaque reference the producer uses to find out what became of it */
  ref: string | null;
}

export type OutboundState = 'pending' | 'delivered' | 'failed';

export async function enqueueOutbound(trx: Tx, request: NewOutboundRequest, now: number): Promise<number> {
  return insertOutbound(trx, {
    account_id: request.accountId,
    project_id: request.projectId,
    kind: request.kind,
    webhook_id: null,
    event_id: null,
    event_type: null,
    url: request.url,
    headers: JSON.stringify(request.headers),
    ref: request.ref,
    state: 'pending',
    attempts: 0,
    next_attempt_at: now,
    created_at: now,
    updated_at: now,
    body: request.body,
  });
}

export async function outboundStates(db: Tx, ids: readonly number[]): Promise<Map<number, OutboundState>> {
  const rows = await findOutboundStates(db, ids);
  return new Map(rows.map((r) => [r.id, r.state as OutboundState]));
}

// The one outbound HTTP path (issue 6): a request row written in the caller's transaction, then
// claimed, posted, retried and recorded by the dispatcher. STUB signatures: owned by the
// webhooks engineer; the inbound-mailbox postbacks use them too.
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

export async function enqueueOutbound(_trx: Tx, _request: NewOutboundRequest, _now: number): Promise<number> {
  throw new Error('outbound requests are not built yet');
}

export async function outboundStates(_db: Tx, _ids: readonly number[]): Promise<Map<number, OutboundState>> {
  return new Map();
}

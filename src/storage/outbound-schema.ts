// Row types of the tables of migration 040 (webhooks, outbound requests, inbound emails: docs/webhooks.md, docs/mailboxes.md).
// Kept beside schema.ts so that file's Database interface only names them.
import type { Generated, Selectable } from 'kysely';

export interface WebhooksTable {
  id: Generated<number>;
  account_id: number;
  /** null: every project of the account */
  project_id: number | null;
  uid: string;
  url: string;
  /** JSON array of event types */
  events: string;
  /** sealed (domain/secret-box.ts) HMAC-SHA256 key of the signatures */
  secret: string;
  /** active | disabled */
  status: string;
  created_at: number;
  updated_at: number;
}

export interface OutboundRequestsTable {
  id: Generated<number>;
  account_id: number;
  project_id: number | null;
  /** webhook (signed at send time with the endpoint's secret) | postback (headers as given) */
  kind: string;
  webhook_id: number | null;
  /** the events row a webhook request reports */
  event_id: number | null;
  event_type: string | null;
  url: string;
  /** JSON object of extra headers */
  headers: string;
  ref: string | null;
  /** pending | delivered | failed */
  state: string;
  attempts: number;
  /** due time; while claimed, the lease expiry */
  next_attempt_at: number;
  locked_by: string | null;
  locked_until: number | null;
  /** deaths of its holders in a row (migration 270, domain/holder-deaths.ts); 0 once an attempt is recorded */
  holder_deaths: Generated<number>;
  last_status_code: number | null;
  last_error: string | null;
  created_at: number;
  updated_at: number;
  delivered_at: number | null;
  failed_at: number | null;
  /**
   * A webhook request of an event (migration 300): the transmission whose variables, with its
   * message's global ones under them, the dispatcher adds to `body` as `variables` when it posts.
   * Null: `body` is sent as stored (postbacks, test events, requests written before).
   */
  variables_of: number | null;
  body: string;
}

export interface OutboundAttemptsTable {
  id: Generated<number>;
  request_id: number;
  started_at: number;
  duration_ms: number;
  /** HTTP status, null when no response came */
  status_code: number | null;
  error: string | null;
  worker: string | null;
}

export interface InboundEmailsTable {
  id: Generated<number>;
  mailbox_id: number;
  uid_validity: string;
  imap_uid: number;
  message_id: string | null;
  size: number;
  outbound_id: number;
  /** posting (postback pending) | seen (2xx, flagged \Seen) | failed (postback gave up) */
  state: string;
  created_at: number;
  updated_at: number;
}

export type Webhook = Selectable<WebhooksTable>;
export type OutboundRequest = Selectable<OutboundRequestsTable>;
export type OutboundAttempt = Selectable<OutboundAttemptsTable>;
export type InboundEmail = Selectable<InboundEmailsTable>;

// Row types of every table, as Kysely sees them. Every *_at column is epoch milliseconds (an
// integer; bigint on PostgreSQL, parsed back to a JS number). Booleans are stored as 0/1 integers
// so both dialects read them the same way. JSON is stored as text and parsed by the owning module.
import type { ColumnType, Generated, Insertable, Kysely, Selectable, Updateable } from 'kysely';

export interface AccountsTable {
  id: Generated<number>;
  uid: string;
  name: string;
  /** active | disabled */
  status: string;
  /** JSON object of account settings */
  settings: string;
  created_at: number;
  updated_at: number;
}

export interface ApiKeysTable {
  id: Generated<number>;
  account_id: number;
  /** null for an account key */
  project_id: number | null;
  /** hex SHA-256 of the key: the key itself is never stored */
  key_hash: string;
  /** first characters of the key, shown in listings so a user can tell keys apart */
  key_prefix: string;
  /** active | inactive (rotated out) */
  status: string;
  created_at: number;
  revoked_at: number | null;
}

export interface ProjectsTable {
  id: Generated<number>;
  account_id: number;
  uid: string;
  name: string;
  /** active | disabled */
  status: string;
  /** JSON object: per-project settings (tracking opt-in, ...) */
  settings: string;
  created_at: number;
  updated_at: number;
}

export interface TemplatesTable {
  id: Generated<number>;
  project_id: number;
  slug: string;
  name: string | null;
  subject: string | null;
  from_address: string | null;
  text_body: string | null;
  html_body: string | null;
  css: string | null;
  parent_slug: string | null;
  created_at: number;
  updated_at: number;
}

export interface MessagesTable {
  id: Generated<number>;
  project_id: number;
  uid: string;
  /** `<uid>@<mailer host>`, fixed at acceptance: the Message-ID without brackets, history unique_id */
  unique_id: string;
  /** template slug the message was sent with, if any */
  template: string | null;
  subject: string | null;
  from_address: string | null;
  recipient_count: number;
  /** 0 when send_message said deliver: false */
  deliver: number;
  created_at: number;
  /**
   * when a message scheduled with send_at is due (ms), later than created_at; null when it was due
   * at acceptance (migration 280)
   */
  send_at: number | null;
  /**
   * 1 when the message was accepted in sandbox mode (its project's `sandbox` setting then): its
   * copies are answered by the sandbox adapter, whatever the setting is when they are due; 0 for
   * real mail (migration 310, docs/sandbox.md). Left out of an insert: 0.
   */
  sandbox: ColumnType<number, number | undefined, number>;
  /**
   * JSON of everything needed to compose the mail, frozen at acceptance (see domain/README.md,
   * "accepted content"): later template edits never change it. Kept last: listings never read it.
   */
  payload: string;
}

export interface TransmissionsTable {
  id: Generated<number>;
  message_id: number;
  project_id: number;
  /** the address as given (lower-cased domain) */
  recipient: string;
  recipient_name: string | null;
  /** JSON object of per-recipient variables, or null */
  variables: string | null;
  /**
   * the subject this copy was sent with, where it differs from its message's (a subject rendered
   * with the recipient's own variables); else NULL (migration 200)
   */
  subject: string | null;
  /** queued | retry | completed | failed: the API's statuses */
  status: string;
  /** when it may next be claimed (ms) */
  next_attempt_at: number;
  attempts: number;
  /** the lease: the worker id holding it and until when */
  locked_by: string | null;
  locked_until: number | null;
  created_at: number;
  updated_at: number;
  completed_at: number | null;
  failed_at: number | null;
  opened_at: number | null;
  clicked_at: number | null;
  /** when the recipient reported it as spam (migration 180); NULL for nearly every row */
  spammed_at: Generated<number | null>;
  /** like SMTP_250 */
  result_code: string | null;
  result_message: string | null;
  /** dense per-project number for history paging; NULL until numbered (migration 140) */
  history_seq: Generated<number | null>;
  /** times in a row a process died holding it (migration 260, domain/holder-deaths.ts) */
  holder_deaths: Generated<number>;
}

export interface AttemptsTable {
  id: Generated<number>;
  transmission_id: number;
  started_at: number;
  duration_ms: number;
  /** the host talked to (MX, relay or transport-map target), null if none was reached */
  mx_host: string | null;
  /** sent | deferred | failed */
  outcome: string;
  result_code: string | null;
  result_message: string | null;
  worker: string | null;
  /** 1 when the SMTP session used TLS, 0 when not, null when unknown (migration 150) */
  tls: number | null;
}

export interface SuppressionsTable {
  id: Generated<number>;
  project_id: number;
  /** the entry's identity: the address's suppressionKey (domain/suppression-policy.ts), lower-cased (migration 240) */
  address: string;
  /** the address as first stored (normalizeAddress: the local part's case kept), shown; null in a row a process of the version before migration 240 wrote during a rollout */
  display_address: string | null;
  /** rejected | warning */
  status: string;
  /** hard_bounce | soft_bounce | manual | ... */
  suppression_state: string;
  blocked_until: number | null;
  message: string | null;
  soft_failures: number;
  created_at: number;
  updated_at: number;
}

/** Soft failures of an address, counted towards a suppression `warning` (migration 020). */
export interface SoftBouncesTable {
  id: Generated<number>;
  project_id: number;
  /** the address's suppressionKey, as suppressions.address */
  address: string;
  failures: number;
  first_failure_at: number;
  last_failure_at: number;
  /** the last transmission counted: repeated deferrals of one transmission count once */
  last_transmission_id: number | null;
}

export interface DomainsTable {
  id: Generated<number>;
  account_id: number;
  name: string;
  dkim_selector: string;
  /** encrypted PEM (storage/secrets.ts) */
  dkim_private_key: string;
  dkim_public_key: string;
  /** JSON of the last DNS check */
  last_check: string | null;
  checked_at: number | null;
  created_at: number;
}

export interface MailboxesTable {
  id: Generated<number>;
  account_id: number;
  uid: string;
  label: string | null;
  host: string;
  port: number;
  username: string;
  /** encrypted (storage/secrets.ts); never returned by the API */
  password: string;
  tls: number;
  postback_url: string;
  /** encrypted HMAC key of the postbacks */
  postback_secret: string;
  /** active | auth_failed | error */
  status: string;
  last_error: string | null;
  failures: number;
  next_check_at: number;
  checked_at: number | null;
  locked_by: string | null;
  locked_until: number | null;
  uid_validity: string | null;
  last_seen_uid: number | null;
  created_at: number;
  updated_at: number;
}

/** The outbox: one row per change the application may be told about, written in its transaction. */
export interface EventsTable {
  id: Generated<number>;
  account_id: number;
  project_id: number | null;
  /** delivered | failed | bounced | retry | opened | clicked | ... */
  type: string;
  /** JSON payload */
  payload: string;
  created_at: number;
  /** set by the webhook dispatcher once fanned out (migration 040); null until then */
  dispatched_at: number | null;
  /** the message the event reports, from its payload (migration 160); null for events of none */
  message_id: number | null;
}

export interface Database {
  accounts: AccountsTable;
  api_keys: ApiKeysTable;
  projects: ProjectsTable;
  templates: TemplatesTable;
  messages: MessagesTable;
  transmissions: TransmissionsTable;
  attempts: AttemptsTable;
  suppressions: SuppressionsTable;
  soft_bounces: SoftBouncesTable;
  domains: DomainsTable;
  mailboxes: MailboxesTable;
  events: EventsTable;
  webhooks: import('./outbound-schema.ts').WebhooksTable;
  outbound_requests: import('./outbound-schema.ts').OutboundRequestsTable;
  outbound_attempts: import('./outbound-schema.ts').OutboundAttemptsTable;
  inbound_emails: import('./outbound-schema.ts').InboundEmailsTable;
  dashboard_users: import('./dashboard-schema.ts').DashboardUsersTable;
  dashboard_sessions: import('./dashboard-schema.ts').DashboardSessionsTable;
  sign_in_failures: import('./dashboard-schema.ts').SignInFailuresTable;
  dashboard_form_uses: import('./dashboard-schema.ts').DashboardFormUsesTable;
  worker_processes: WorkerProcessesTable;
}

/** A live worker process (storage/worker-processes.ts); heartbeat_at is wall-clock epoch ms. */
export interface WorkerProcessesTable {
  /** the id its claims are locked_by (domain/keys.ts generateWorkerId) */
  id: string;
  /** the hostname, the boot and the pid namespace (workers/process-registry.ts hostIdentity) */
  host: string;
  pid: number;
  /** the process's start time in clock ticks since boot (/proc/<pid>/stat); NULL where unknown (migration 250) */
  pid_start: Generated<number | null>;
  started_at: number;
  heartbeat_at: number;
}

export type Account = Selectable<AccountsTable>;
export type Project = Selectable<ProjectsTable>;
export type ApiKey = Selectable<ApiKeysTable>;
export type Template = Selectable<TemplatesTable>;
export type Message = Selectable<MessagesTable>;
export type NewMessage = Insertable<MessagesTable>;
export type Transmission = Selectable<TransmissionsTable>;
export type NewTransmission = Insertable<TransmissionsTable>;
export type TransmissionUpdate = Updateable<TransmissionsTable>;
export type Suppression = Selectable<SuppressionsTable>;
export type Domain = Selectable<DomainsTable>;
export type Mailbox = Selectable<MailboxesTable>;

/**
 * The handle every storage function takes: the database, or a transaction of it (store.ts writes).
 * Declared here, with the row types, so that store.ts and the modules it uses need not import
 * each other.
 */
export type Tx = Kysely<Database>;

/** A message row as send_message writes it (every column but the id; storage/messages.ts). */
export type MessageRow = Required<Omit<NewMessage, 'id'>>;

/** A transmission as acceptance writes it: the lease, attempt and tracking columns start empty (storage/transmissions.ts). */
export type AcceptedTransmission = Required<
  Pick<
    NewTransmission,
    | 'message_id' | 'project_id' | 'recipient' | 'recipient_name' | 'variables' | 'subject' | 'status' | 'next_attempt_at'
    | 'attempts' | 'created_at' | 'updated_at' | 'completed_at' | 'result_code' | 'result_message'
  >
>;

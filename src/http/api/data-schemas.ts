// The shapes of the envelope's `data`, one per presentation (what the method files' present*
// functions build and the report operations answer). They describe answers for the OpenAPI
// document and for the tests, which check every real answer against its method's schema; they
// are never used to filter an answer.
import { Type, type TSchema } from '@sinclair/typebox';

/** A value or null. */
export function nullable<T extends TSchema>(schema: T) {
  return Type.Union([schema, Type.Null()]);
}

const Count = Type.Integer({ minimum: 0 });

// The two ways the API writes a time (domain/time.ts). Each time field declares its format as a
// pattern, so the tests, which check every answer against its method's schema, fail when a field
// is answered in the other format than its schema and description say.
export const ISO_TIME_PATTERN = '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}Z$';
export const API_TIME_PATTERN = '^\\d{4}-\\d{2}-\\d{2} \\d{2}:\\d{2}:\\d{2}$';

/** A time as formatIsoTime writes it ("2026-03-14T09:30:00Z"), or null; `what` says what it is. */
export function isoTime(what?: string) {
  return nullable(Type.String({ pattern: ISO_TIME_PATTERN, description: `ISO 8601 in UTC, written YYYY-MM-DDTHH:MM:SSZ${what ? `; ${what}` : ''}` }));
}

/** A time as formatApiTime writes it ("2026-03-14 09:30:00", UTC), or null; `what` says what it is. */
export function apiTime(what?: string) {
  return nullable(Type.String({ pattern: API_TIME_PATTERN, description: `UTC, written YYYY-MM-DD HH:MM:SS${what ? `; ${what}` : ''}` }));
}

/** An ISO 8601 time (UTC) or null when it has not happened. */
export const IsoTime = isoTime();
/** The API's "YYYY-MM-DD HH:MM:SS" UTC time of the transmission reports and history, or null. */
export const ApiTime = apiTime();

export const AccountData = Type.Object({
  uid: Type.String(),
  name: Type.String(),
  status: Type.String(),
  settings: Type.Record(Type.String(), Type.Unknown(), { description: 'free-form settings, merged key by key' }),
  created_at: IsoTime,
  updated_at: IsoTime,
});

export const ProjectData = Type.Object({
  uid: Type.String(),
  name: Type.String(),
  url: Type.String(),
  status: Type.Union([Type.Literal('active'), Type.Literal('disabled')]),
  settings: Type.Object({
    tracking: Type.Boolean(),
    sandbox: Type.Boolean({ description: 'nothing leaves the machine (docs/sandbox.md)' }),
    default_from: nullable(Type.String({ description: 'the From of a message that names none; null: noreply@<--mailer-host>, taken when the message is accepted' })),
    retention_days: Type.Optional(Type.Integer({ description: 'days messages are kept (0: forever); absent: the server default' })),
  }),
  key_prefix: nullable(Type.String({ description: 'the first characters of the active key' })),
  created_at: IsoTime,
  updated_at: IsoTime,
});

export const ProjectWithKeyData = Type.Composite([ProjectData, Type.Object({ api_key: Type.String({ description: 'shown this once' }) })]);

export const MailboxData = Type.Object({
  uid: Type.String(),
  label: nullable(Type.String()),
  host: Type.String(),
  port: Type.Integer(),
  username: Type.String(),
  tls: Type.Boolean(),
  postback_url: Type.String(),
  status: Type.String(),
  last_error: nullable(Type.String()),
  failures: Count,
  checked_at: IsoTime,
  next_check_at: IsoTime,
  created_at: IsoTime,
  updated_at: IsoTime,
});

export const MailboxWithSecretData = Type.Composite([MailboxData, Type.Object({ postback_secret: Type.String({ description: 'shown this once' }) })]);

export const TemplateSummaryData = Type.Object({
  project_uid: Type.String(),
  slug: Type.String(),
  name: nullable(Type.String()),
  subject: nullable(Type.String()),
  from: nullable(Type.String()),
  parent: nullable(Type.String()),
  created_at: IsoTime,
  updated_at: IsoTime,
});

export const TemplateData = Type.Composite([
  TemplateSummaryData,
  Type.Object({ text: nullable(Type.String()), html: nullable(Type.String()), css: nullable(Type.String()) }),
]);

const DnsRecord = Type.Object({ type: Type.Union([Type.Literal('TXT'), Type.Literal('MX')]), name: Type.String(), value: Type.String(), note: Type.String() });
const RecordCheck = Type.Object({ status: Type.Union(['ok', 'missing', 'mismatch', 'error'].map((s) => Type.Literal(s))), found: Type.Array(Type.String()) });
const byPurpose = <T extends TSchema>(s: T) => Type.Object({ dkim: s, spf: s, return_path: s });

export const DomainData = Type.Object({
  name: Type.String(),
  dkim_selector: Type.String(),
  created_at: IsoTime,
  dns_records: byPurpose(DnsRecord),
  last_check: nullable(Type.Object({ status: Type.Union([Type.Literal('ok'), Type.Literal('incomplete')]), records: byPurpose(RecordCheck) })),
  checked_at: IsoTime,
});

export const SuppressionEntry = Type.Object({
  status: Type.String({ description: 'rejected (permanent) | warning (blocked until blocked_until)' }),
  suppression_state: Type.String({ description: 'hard_bounce | soft_bounce | manual | ...' }),
  blocked_until: IsoTime,
  message: nullable(Type.String()),
});

export const WebhookData = Type.Object({
  uid: Type.String(),
  url: Type.String(),
  events: Type.Array(Type.String()),
  project_uid: nullable(Type.String()),
  status: Type.Union([Type.Literal('active'), Type.Literal('disabled')]),
  created_at: IsoTime,
  updated_at: IsoTime,
});

export const WebhookWithSecretData = Type.Composite([WebhookData, Type.Object({ secret: Type.String({ description: 'shown this once' }) })]);

export const DeliveryData = Type.Object({
  id: Type.Integer(),
  kind: Type.Union([Type.Literal('webhook'), Type.Literal('postback')]),
  webhook_uid: nullable(Type.String()),
  mailbox_uid: nullable(Type.String()),
  event: nullable(Type.String()),
  event_id: nullable(Type.String()),
  url: Type.String(),
  status: Type.Union([Type.Literal('pending'), Type.Literal('delivered'), Type.Literal('failed')]),
  attempts: Count,
  last_status_code: nullable(Type.Integer()),
  last_error: nullable(Type.String()),
  created_at: IsoTime,
  next_attempt_at: IsoTime,
  delivered_at: IsoTime,
  failed_at: IsoTime,
  attempt_log: Type.Array(
    Type.Object({ started_at: IsoTime, duration_ms: nullable(Type.Integer()), status_code: nullable(Type.Integer()), error: nullable(Type.String()) }),
  ),
});

export const MessageRef = Type.Object({ id: Type.Integer(), url: Type.String() });

export const TransmissionReport = Type.Object({
  status: Type.String(),
  created_at: ApiTime,
  failed_at: ApiTime,
  opened_at: ApiTime,
  clicked_at: ApiTime,
  result_code: nullable(Type.String()),
  result_message: nullable(Type.String()),
  error_message: nullable(Type.String({ description: 'the same text as result_message' })),
  delivered_to: Type.String({ description: 'where the copy really went: the recipient_override, or the recipient' }),
});

const HistoryRecordFields = {
  unique_id: Type.String(),
  message_id: Type.Integer(),
  uid: Type.String(),
  recipient: Type.String(),
  status: Type.String(),
  created_at: ApiTime,
};

export const HistoryPageData = Type.Object({
  date_range: Type.Array(nullable(Type.String({ pattern: '^\\d{4}-\\d{2}-\\d{2}$' })), { minItems: 2, maxItems: 2, description: '[from, to] as YYYY-MM-DD, null where open' }),
  messages_history: Type.Array(
    Type.Object({
      ...HistoryRecordFields,
      result_code: Type.Optional(nullable(Type.String())),
      result_message: Type.Optional(nullable(Type.String())),
      completed_at: Type.Optional(ApiTime),
      failed_at: Type.Optional(ApiTime),
      opened_at: Type.Optional(ApiTime),
      clicked_at: Type.Optional(ApiTime),
      attempts: Type.Optional(Count),
    }),
  ),
  page: Type.Integer({ minimum: 1 }),
  per_page: Type.Integer({ minimum: 1 }),
  has_more: Type.Boolean(),
});

export const MessageListing = Type.Object({
  project_id: Type.Integer(),
  template: nullable(Type.String()),
  transmissions_total: Count,
  transmissions_failed: Count,
  transmissions_completed: Count,
  created_at: IsoTime,
  will_purge_at: IsoTime,
  send_at: isoTime('when a message scheduled with send_at is due; null when it was due at acceptance'),
});

const MetricValue = Type.Object({
  current_value: Type.Number(),
  previous_value: Type.Number(),
  current_percent: Type.Number(),
  previous_percent: Type.Number(),
  diff_percent: Type.Number(),
});
const MetricsOfPeriod = Type.Object(
  Object.fromEntries(['delivered', 'opened', 'clicked', 'failed', 'rejected', 'spammed', 'created', 'queued'].map((n) => [n, MetricValue])),
);
export const MetricsData = Type.Object({
  metrics: Type.Object({ hour: MetricsOfPeriod, date: MetricsOfPeriod, week: MetricsOfPeriod, month: MetricsOfPeriod }),
});

export const UsageInfo = Type.Object({
  uid: Type.String(),
  name: Type.String(),
  url: Type.String(),
  transmissions: Type.Object({ today: Count, this_month: Count, overall: Count }),
  users: Type.Record(Type.String(), Type.String(), { description: 'always {}: access is by API key alone' }),
});

// What Posthorn reports about a transmission, defined once (docs/webhooks.md, "Events"): every
// event kind as a JSON Schema (TypeBox) and its type, and the one function that builds the payload
// an event row stores. Producers (delivery, bounces, cancellation, tracking, the sandbox) pass what
// they know to buildEventPayload and never assemble a payload by hand; the fan-out adds the envelope
// fields (event, event_id, project_uid, occurred_at), and the dispatcher the `variables` when it
// posts one.
//
// An event row stores no variables: the message row holds the global ones once and each
// transmission its own, and the body's `variables` (the two merged, eventVariables) are added when
// a request is posted (webhooks/dispatch-outbound.ts). A copy per event would cost recipients x
// variables in storage and in the transaction that writes the events (docs/webhooks.md, "How it
// works"). Rows written before that still hold `variables`, and are posted with them.
//
// EVENT_SCHEMAS describes the body an endpoint receives, per kind; the OpenAPI document lists them
// under `webhooks`, and test/domain/events.test.ts checks every kind that a real flow produces
// against them. Receivers must ignore fields they do not know: new ones may be added.
import { Type, type Static, type TSchema } from '@sinclair/typebox';
import { parsePayload } from './message-payload.ts';
import { formatIsoTime } from './time.ts';
import { mergeVariables, type Variables } from './variables.ts';

/** Every kind of event, in the order docs/webhooks.md lists them. */
export const EVENT_KINDS = ['delivered', 'retry', 'failed', 'bounced', 'cancelled', 'spammed', 'opened', 'clicked'] as const;
export type EventKind = (typeof EVENT_KINDS)[number];

/** The kinds that report a delivery outcome of a transmission (the others report a reader's action). */
export const OUTCOME_EVENT_KINDS = ['delivered', 'retry', 'failed', 'bounced', 'cancelled', 'spammed'] as const;
export type OutcomeEventKind = (typeof OUTCOME_EVENT_KINDS)[number];

// ---------------------------------------------------------------------------------------------
// Schemas

/** ISO-8601 in UTC without fractions, as formatIsoTime writes it. */
const IsoTime = Type.String({ pattern: '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}Z$', description: 'ISO-8601, UTC' });
const Id = Type.Integer({ minimum: 1 });

/** The transmission status after the event, as the API shows it. */
const TransmissionStatus = Type.Union([Type.Literal('queued'), Type.Literal('retry'), Type.Literal('completed'), Type.Literal('failed')]);

const envelopeFields = (kind: EventKind) => ({
  event: Type.Literal(kind),
  event_id: Type.String({ pattern: '^evt_\\d+$', description: 'unique per event, the same on every retry: de-duplicate on it' }),
  project_uid: Type.Union([Type.String(), Type.Null()]),
  occurred_at: IsoTime,
});

const subjectFields = {
  transmission_id: Id,
  message_id: Id,
  message_uid: Type.String(),
  unique_id: Type.String({ description: 'the Message-ID without brackets' }),
  recipient: Type.String({ description: 'the recipient as given to send_message' }),
  variables: Type.Record(Type.String(), Type.Unknown(), { description: "the message's global variables with the recipient's own over them" }),
  sandbox: Type.Optional(Type.Literal(true, { description: 'the message was accepted in sandbox mode: nothing was sent (docs/sandbox.md); absent for real mail' })),
};

const outcomeFields = {
  delivered_to: Type.String({ description: 'where the copy really went (after recipient_override)' }),
  status: TransmissionStatus,
  outcome: Type.String({ description: 'what the attempt came to: sent, deferred, failed, cancelled' }),
  result_code: Type.Union([Type.String(), Type.Null()], { description: 'SMTP_250, SMTP_550, ...' }),
  result_message: Type.Union([Type.String(), Type.Null()]),
  host: Type.Union([Type.String(), Type.Null()], { description: 'the server that answered; null when none was talked to' }),
  attempts: Type.Integer({ minimum: 0 }),
  created_at: IsoTime,
  next_attempt_at: Type.Union([IsoTime, Type.Null()], { description: 'the next attempt, for retry' }),
};

const bounceFields = {
  bounce_type: Type.Optional(Type.Union([Type.Literal('hard'), Type.Literal('soft')])),
  source: Type.Optional(Type.String({ description: 'what reported the bounce: the SMTP reply, or a bounce message (dsn, ...)' })),
  previous_status: Type.Optional(TransmissionStatus),
};

const readerFields = {
  user_agent: Type.Union([Type.String(), Type.Null()], { description: "the reader's User-Agent" }),
};

function outcomeSchema(kind: OutcomeEventKind, description: string) {
  return Type.Object({ ...envelopeFields(kind), ...subjectFields, ...outcomeFields, ...(kind === 'bounced' ? bounceFields : {}) }, { title: `${kind} event`, description });
}

export const EVENT_SCHEMAS = {
  delivered: outcomeSchema('delivered', "the recipient's server accepted the message (2xx)"),
  retry: outcomeSchema('retry', 'a temporary failure; another attempt is scheduled (next_attempt_at)'),
  failed: outcomeSchema('failed', 'a permanent failure, a suppressed address, or the retry period ran out'),
  bounced: outcomeSchema('bounced', 'a hard bounce: a 5xx reply saying the recipient does not exist, or a bounce message that arrived later'),
  cancelled: outcomeSchema('cancelled', 'the transmission was cancelled (cancel_message) before it was sent'),
  spammed: outcomeSchema('spammed', 'the recipient reported the message as spam'),
  opened: Type.Object({ ...envelopeFields('opened'), ...subjectFields, ...readerFields }, { title: 'opened event', description: 'the first load of the tracking pixel' }),
  clicked: Type.Object(
    { ...envelopeFields('clicked'), ...subjectFields, ...readerFields, url: Type.String({ description: 'the link followed' }) },
    { title: 'clicked event', description: 'the first click on a tracked link' },
  ),
} satisfies Record<EventKind, TSchema>;

/** The body an endpoint receives for one kind of event. */
export type EventBody<K extends EventKind = EventKind> = Static<(typeof EVENT_SCHEMAS)[K]>;

/** What an event row stores: the body without the envelope the fan-out adds and the variables the dispatcher adds. */
export type EventPayload<K extends EventKind = EventKind> = K extends EventKind ? Omit<EventBody<K>, 'event' | 'event_id' | 'variables'> : never;

// ---------------------------------------------------------------------------------------------
// The one builder

/** The transmission an event is about. */
export interface EventSubject {
  transmissionId: number;
  messageId: number;
  messageUid: string;
  uniqueId: string;
  projectUid: string | null;
  recipient: string;
  /** the message was accepted in sandbox mode (messages.sandbox): the payload says `sandbox: true` */
  sandbox?: boolean;
}

export type TransmissionStatusName = Static<typeof TransmissionStatus>;

/** What a delivery outcome event (delivered, retry, failed, bounced, cancelled, spammed) says. */
export interface OutcomeDetails {
  kind: OutcomeEventKind;
  deliveredTo: string;
  status: TransmissionStatusName;
  outcome: string;
  resultCode: string | null;
  resultMessage: string | null;
  host: string | null;
  attempts: number;
  /** when the message was accepted (epoch ms) */
  createdAt: number;
  /** the next attempt (epoch ms), for retry */
  nextAttemptAt: number | null;
  /** bounced: what the bounce said */
  bounce?: { type: 'hard' | 'soft'; source: string; previousStatus: TransmissionStatusName };
}

/** What an open or a click says. */
export type ReaderDetails = { kind: 'opened'; userAgent: string | null } | { kind: 'clicked'; userAgent: string | null; url: string };

export type EventDetails = OutcomeDetails | ReaderDetails;

/** The payload of one event row, for any kind: the only place a payload is assembled. */
export function buildEventPayload(subject: EventSubject, details: EventDetails, occurredAtMs: number): EventPayload {
  // One literal, then the kind's own fields by assignment, in the order of the schema: not
  // `{ ...common, more }`, which on Node 20 gives every payload a hidden class of its own and
  // made building and serialising one ~10x slower (docs/decisions/0003-performance.md, "Object spreads").
  const payload: Record<string, unknown> = {
    project_uid: subject.projectUid,
    occurred_at: formatIsoTime(occurredAtMs)!,
    transmission_id: subject.transmissionId,
    message_id: subject.messageId,
    message_uid: subject.messageUid,
    unique_id: subject.uniqueId,
    recipient: subject.recipient,
  };
  switch (details.kind) {
    case 'opened':
      payload.user_agent = details.userAgent;
      break;
    case 'clicked':
      payload.user_agent = details.userAgent;
      payload.url = details.url;
      break;
    default:
      payload.delivered_to = details.deliveredTo;
      payload.status = details.status;
      payload.outcome = details.outcome;
      payload.result_code = details.resultCode;
      payload.result_message = details.resultMessage;
      payload.host = details.host;
      payload.attempts = details.attempts;
      payload.created_at = formatIsoTime(details.createdAt)!;
      payload.next_attempt_at = formatIsoTime(details.nextAttemptAt);
      if (details.bounce) {
        payload.bounce_type = details.bounce.type;
        payload.source = details.bounce.source;
        payload.previous_status = details.bounce.previousStatus;
      }
  }
  // Last, and only for a sandboxed message: real mail's payloads keep their shape and their bytes.
  if (subject.sandbox === true) payload.sandbox = true;
  return payload as EventPayload;
}

/** What an event needs of the message's accepted payload (stored JSON): its global variables and recipient override. */
export function readAcceptedPayload(payloadJson: string): { globalVariables: Variables | null; recipientOverride: string | null } {
  try {
    const payload = parsePayload(payloadJson);
    return { globalVariables: payload.variables ?? null, recipientOverride: payload.recipientOverride ?? null };
  } catch {
    return { globalVariables: null, recipientOverride: null };
  }
}

/**
 * The `variables` of an event's body (docs/webhooks.md): the message's global variables with the
 * recipient's own (as stored, JSON text, or parsed) over them. Absent or unreadable counts as none.
 */
export function eventVariables(globalVariables: Variables | null | undefined, recipientVariables: Variables | string | null | undefined): Variables {
  return mergeVariables(globalVariables ?? {}, readVariables(recipientVariables));
}

/**
 * A webhook body as the fan-out stored it (a JSON object without `variables`) with `variables`
 * (their JSON text) added as its last field, where docs/webhooks.md shows it. Text is spliced, not
 * parsed and written again: the variables may be megabytes, and one message's serve all its
 * recipients that have none of their own.
 */
export function withEventVariables(bodyJson: string, variablesJson: string): string {
  const body = bodyJson.trimEnd();
  if (!body.startsWith('{') || !body.endsWith('}')) return bodyJson;
  const empty = body.slice(1, -1).trim() === '';
  return `${body.slice(0, -1)}${empty ? '' : ','}"variables":${variablesJson}}`;
}

/** A recipient's variables as stored (JSON object text) or given; anything else counts as none. */
function readVariables(value: Variables | string | null | undefined): Variables | null {
  if (value === null || value === undefined || value === '') return null;
  if (typeof value !== 'string') return value;
  try {
    const parsed = JSON.parse(value) as unknown;
    return parsed && typeof parsed === 'object' && !Array.isArray(parsed) ? (parsed as Variables) : null;
  } catch {
    return null;
  }
}

/** The transmission status name of a stored status ('queued', 'retry', 'completed', 'failed'; anything else reads as queued). */
export function transmissionStatusName(status: string): TransmissionStatusName {
  return status === 'retry' || status === 'completed' || status === 'failed' ? status : 'queued';
}

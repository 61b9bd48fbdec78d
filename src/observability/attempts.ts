// What every delivery attempt and every outbound request attempt leaves behind besides its rows:
// one structured log line and the counters of /metrics (docs/operations.md, "Logs"). Called by the
// job that finished the attempt, once per outcome, after the outcome is known.
//
// Privacy: a log line names the recipient's domain, never the address, unless the operator sets
// --log-addresses, and addresses inside a peer's text (a reply) are masked likewise. An outbound request is named by its host, never its full URL (paths and query
// strings carry tokens). No secret is ever passed here.
import type { Logger } from 'pino';
import { maskAddresses } from '../domain/mask-addresses.ts';
import type { Services } from '../services.ts';
import { domainGroup, httpStatusClass, metricsOf, smtpCodeClass } from './metrics.ts';

/**
 * The attempt lines are built here field by field and carry nothing secret, so they skip the
 * logger's redaction (log.ts), a safety net for objects logged by mistake whose wildcard paths
 * cost several times the rest of writing a line (~25 µs against ~5 µs per line with pino 9 on the
 * bench machine: a few percent of a draining worker).
 */
const attemptLoggers = new WeakMap<Logger, Logger>();
function attemptLog(services: Services): Logger {
  let log = attemptLoggers.get(services.log);
  if (!log) attemptLoggers.set(services.log, (log = services.log.child({}, { redact: { paths: [] } })));
  return log;
}

export interface DeliveryAttemptRecord {
  transmissionId: number;
  messageId?: number | null;
  projectId?: number | null;
  /** the envelope recipient */
  recipient: string;
  /** sent | deferred | failed */
  outcome: string;
  /** SMTP_250, TIMEOUT, SUPPRESSED, ... */
  resultCode: string;
  resultMessage?: string | null;
  /** the host talked to, null when none was */
  mxHost?: string | null;
  durationMs: number;
  /** which attempt this was, counting from 1 */
  attempt?: number;
  /** when the copy was due to be sent first (epoch ms): its send_at, else acceptance; the delivery latency is measured from it */
  dueAt?: number | null;
  /** the state the transmission was left in (completed, retry, failed) */
  status?: string | null;
  /** whether the SMTP session was encrypted, when a server was reached */
  tls?: boolean | null;
  /** the message was accepted in sandbox mode: the sandbox answered, nothing was sent (docs/sandbox.md) */
  sandbox?: boolean;
}

/** Free text from a peer as a log line holds it: addresses masked unless --log-addresses. */
export function peerText(services: Pick<Services, 'config'>, text: string): string {
  return services.config.logAddresses ? text : maskAddresses(text);
}

/** The domain part of an address, lower-cased; '' for an address without one. */
export function recipientDomain(address: string): string {
  const at = address.lastIndexOf('@');
  return at === -1 ? '' : address.slice(at + 1).toLowerCase().replace(/>$/, '');
}

export function recordDeliveryAttempt(services: Services, a: DeliveryAttemptRecord): void {
  const metrics = metricsOf(services);
  const domain = recipientDomain(a.recipient);
  // A sandbox attempt is no delivery: counted apart, and kept out of the delivery attempts, their
  // durations and the latency, so the delivery alerts (deploy/prometheus/) see real mail only.
  if (a.sandbox === true) metrics.sandboxAttempts.inc({ outcome: a.outcome });
  else {
    metrics.deliveryAttempts.inc({ outcome: a.outcome, code_class: smtpCodeClass(a.resultCode), domain_group: domainGroup(domain, a.mxHost) });
    metrics.deliveryAttemptDuration.observe({ outcome: a.outcome }, Math.max(0, a.durationMs) / 1000);
    if (a.outcome === 'sent' && typeof a.dueAt === 'number') {
      metrics.deliveryLatency.observe(Math.max(0, services.clock.now() - a.dueAt) / 1000);
    }
    if (typeof a.tls === 'boolean') metrics.smtpDeliveriesByTls.inc({ tls: String(a.tls) });
  }
  const line: Record<string, unknown> = {
    event: 'delivery_attempt',
    transmission: a.transmissionId,
    message: a.messageId ?? undefined,
    project: a.projectId ?? undefined,
    domain,
    mx: a.mxHost ?? null,
    outcome: a.outcome,
    code: a.resultCode,
    status: a.status ?? undefined,
    attempt: a.attempt,
    duration_ms: Math.round(a.durationMs),
  };
  if (a.sandbox === true) line.sandbox = true;
  if (services.config.logAddresses) line.recipient = a.recipient;
  // The server's text names the recipient more often than not ("5.1.1 <bob@example.com>: ...").
  if (a.outcome !== 'sent' && a.resultMessage) line.reply = peerText(services, a.resultMessage.slice(0, 300));
  attemptLog(services).info(line, 'delivery attempt');
}

export interface OutboundAttemptRecord {
  requestId: number;
  /** webhook | postback */
  kind: string;
  /** delivered | retry | failed (given up) */
  outcome: string;
  /** the HTTP status, null when no response came */
  statusCode: number | null;
  error?: string | null;
  durationMs: number;
  /** the request's URL: only its host is logged */
  url?: string | null;
  attempt?: number;
  eventType?: string | null;
  webhookId?: number | null;
}

function hostOf(url: string | null | undefined): string | null {
  if (!url) return null;
  try {
    return new URL(url).host;
  } catch {
    return null;
  }
}

export function recordOutboundAttempt(services: Services, a: OutboundAttemptRecord): void {
  const metrics = metricsOf(services);
  metrics.outboundAttempts.inc({ kind: a.kind, outcome: a.outcome, status_class: httpStatusClass(a.statusCode) });
  metrics.outboundAttemptDuration.observe({ kind: a.kind }, Math.max(0, a.durationMs) / 1000);
  attemptLog(services).info(
    {
      event: 'outbound_attempt',
      request: a.requestId,
      kind: a.kind,
      webhook: a.webhookId ?? undefined,
      event_type: a.eventType ?? undefined,
      host: hostOf(a.url),
      outcome: a.outcome,
      code: a.statusCode,
      error: a.error ? peerText(services, a.error.slice(0, 300)) : undefined,
      attempt: a.attempt,
      duration_ms: Math.round(a.durationMs),
    },
    'outbound attempt',
  );
}

/**
 * One composition of a message's content by delivery (delivery/message-contexts.ts): `composed`, or
 * `failed` when the content cannot be composed with these variables (RENDER_FAILED, INVALID_HEADER:
 * found once per content and variables, and the failure reused by every other copy).
 */
export function recordComposition(services: Services, result: 'composed' | 'failed'): void {
  metricsOf(services).compositions.inc({ result });
}

/** A send_message that stored a message and its transmissions (not a repeated uid). */
export function recordMessageAccepted(services: Services, recipients: number): void {
  const metrics = metricsOf(services);
  metrics.messagesAccepted.inc();
  metrics.recipientsAccepted.inc(recipients);
}

/**
 * Makes an SMTP client's open-connection count part of posthorn_smtp_connections_open; returns
 * the function that removes it (the client closed).
 */
export function observeSmtpConnections(services: Services, countOpen: () => number): () => void {
  const sources = metricsOf(services).smtpConnectionSources;
  sources.add(countOpen);
  return () => sources.delete(countOpen);
}

/** Rows the retention purge deleted, by table. */
export function recordPurgedRows(services: Services, counts: Readonly<Record<string, number>>): void {
  const metrics = metricsOf(services);
  for (const [table, n] of Object.entries(counts)) if (n > 0) metrics.purgedRows.inc({ table }, n);
}

// The one place that reads process.env and argv. Every setting is declared once in OPTIONS
// (flag, environment variable, type, default, documentation); parseConfig() turns argv + env into
// a frozen Config. `posthorn help` prints the same table, and docs/configuration.md mirrors it.
//
// Every value is checked here, for every command, so a mistake is one line naming the option
// before anything starts (docs/configuration.md, "Validation"): numbers and their ranges (a port
// is 0-65535, a timeout is positive), durations, the retry schedule, enumerations, URLs, and the
// forms of DATABASE_URL. Keep this module light: `posthorn help` loads it.
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { parseRetrySchedule } from './domain/retry-policy.ts';
import { isPostgresUrl } from './domain/database-url.ts';
import { parseRelayUrl, parseTransportMap } from './delivery/routes.ts';
import { parseRateLimit } from './domain/rate-limit.ts';

/** string | int (whole number, with min/max) | port (0-65535) | bool | list (repeatable, comma-separated) */
type Kind = 'string' | 'int' | 'port' | 'bool' | 'list';

interface OptionSpec {
  /** camelCase key in Config. */
  key: keyof Config;
  /** --kebab-flag */
  flag: string;
  env?: string;
  kind: Kind;
  doc: string;
  /** int: smallest accepted value (default 0) */
  min?: number;
  /** int: largest accepted value (default Number.MAX_SAFE_INTEGER) */
  max?: number;
  /** the converted value's problem, as the end of "--flag <problem>", or null when it is fine */
  check?: (value: never) => string | null;
}

export interface Config {
  port: number;
  host: string;
  data: string;
  databaseUrl: string | null;
  tlsCert: string | null;
  tlsKey: string | null;
  mailerHost: string;
  publicUrl: string;
  role: 'all' | 'api' | 'worker';
  /** serve --role all: how many processes (1 = everything in one); null = by the database (docs/operations.md) */
  processes: number | null;
  /** serve --role all or api: how many API processes share --port; null = by the database and the cores (docs/operations.md) */
  apiProcesses: number | null;
  /** serve's supervisor: a process of its own silent this long is killed and restarted; 0 never (docs/operations.md) */
  watchdogMs: number;
  logLevel: string;
  secretKey: string | null;
  maxBodyBytes: number;
  maxRecipients: number;
  /** how far ahead send_message's send_at may be (domain/send-at.ts) */
  maxScheduleAheadMs: number;
  maxPerPage: number;
  dbPoolSize: number;
  dbTimeoutMs: number;
  // delivery
  workers: number;
  leaseMs: number;
  pollMs: number;
  relay: string | null;
  transportMap: string[];
  dnsServers: string[];
  ehloName: string;
  requireTls: boolean;
  maxConnectionsPerDestination: number;
  maxConnections: number;
  connectTimeoutMs: number;
  greetingTimeoutMs: number;
  socketTimeoutMs: number;
  dataDoneTimeoutMs: number;
  retrySchedule: string;
  maxRetryAgeMs: number;
  bounceDomain: string;
  bouncePort: number | null;
  bounceHost: string;
  // SMTP submission (docs/smtp-submission.md)
  submissionPort: number | null;
  submissionTlsPort: number | null;
  submissionHost: string;
  submissionTlsCert: string | null;
  submissionTlsKey: string | null;
  submissionAllowPlaintext: boolean;
  submissionMaxBytes: number;
  submissionMaxMessagesPerConnection: number;
  submissionMaxClients: number;
  submissionMaxConnectionsPerIp: number;
  submissionIdleTimeoutMs: number;
  submissionTotalTimeoutMs: number;
  // listener limits (src/listener-limits.ts, docs/reliability.md)
  httpHeadersTimeoutMs: number;
  httpRequestTimeoutMs: number;
  httpKeepAliveTimeoutMs: number;
  maxConnectionsPerIp: number;
  bounceIdleTimeoutMs: number;
  bounceSessionTimeoutMs: number;
  // webhooks / ingress / tracking
  allowPrivateWebhooks: boolean;
  webhookTimeoutMs: number;
  webhookRetrySchedule: string;
  mailboxPollMs: number;
  mailboxCaFile: string | null;
  tracking: boolean;
  // operations (docs/operations.md)
  opsPort: number;
  opsHost: string;
  accessLog: boolean;
  logAddresses: boolean;
  retentionDays: number;
  /** "N/window" per API key (operations/rate-limits.ts), or null: off */
  rateLimitPerKey: string | null;
}

export const OPTIONS: readonly OptionSpec[] = [
  { key: 'port', flag: 'port', env: 'PORT', kind: 'port', doc: 'HTTP(S) API port (default 8080).' },
  { key: 'host', flag: 'host', env: 'POSTHORN_HOST', kind: 'string', doc: 'Address the API listens on (default 127.0.0.1).' },
  { key: 'data', flag: 'data', env: 'POSTHORN_DATA', kind: 'string', doc: 'Directory of the SQLite database and secret key file (default ./data).' },
  { key: 'databaseUrl', flag: 'database-url', env: 'DATABASE_URL', kind: 'string', doc: 'sqlite:///path/file.db or postgres://... (overrides --data for the database).', check: checkDatabaseUrl },
  { key: 'tlsCert', flag: 'tls-cert', env: 'POSTHORN_TLS_CERT', kind: 'string', doc: 'PEM certificate file: serve HTTPS.' },
  { key: 'tlsKey', flag: 'tls-key', env: 'POSTHORN_TLS_KEY', kind: 'string', doc: 'PEM private key file for --tls-cert.' },
  { key: 'mailerHost', flag: 'mailer-host', env: 'POSTHORN_MAILER_HOST', kind: 'string', doc: 'Host part of Message-IDs and history unique_id, and of noreply@HOST, the From of a message that names none in a project that sets no default_from (resolved when the message is accepted; default: the machine hostname, with .localdomain added when it has no dot). Set it to your sending host name.' },
  { key: 'publicUrl', flag: 'public-url', env: 'POSTHORN_PUBLIC_URL', kind: 'string', doc: 'Public base URL of this service (message urls, tracking links). Default http(s)://host:port, which only this machine reaches: while a project tracks opens and clicks, a process with the worker role warns at start until it is set (docs/tracking.md).', check: checkHttpUrl },
  { key: 'role', flag: 'role', env: 'POSTHORN_ROLE', kind: 'string', doc: 'all | api | worker: which parts this process runs (default all).', check: (v: string) => (ROLES.includes(v) ? null : `must be one of ${ROLES.join(', ')}, got "${v}"`) },
  { key: 'processes', flag: 'processes', env: 'POSTHORN_PROCESSES', kind: 'int', doc: 'serve --role all: 1 runs everything in one process; 2 starts and supervises a delivery process and the API processes (--api-processes) on the same database (default: 2 with 2 or more cores, else 1).', min: 1, max: 2 },
  { key: 'apiProcesses', flag: 'api-processes', env: 'POSTHORN_API_PROCESSES', kind: 'int', doc: 'serve --role all or api: how many API processes share --port, started and supervised by serve (connections handed out in turn). Default on SQLite: with --role all one per core less one, the delivery process\'s (so 1 on 2 cores; as many as the cores or more run at a lower CPU priority than the delivery process, which keeps its core when both are busy), with --role api one per core; on PostgreSQL 1 (run more behind a load balancer, or set it). With --role all, more than 1 also starts the delivery process of its own on PostgreSQL; ignored with --processes 1 and --role worker.', min: 1, max: 64 },
  { key: 'watchdogMs', flag: 'watchdog-ms', env: 'POSTHORN_WATCHDOG_MS', kind: 'int', doc: 'serve with several processes: the supervisor pings each process it started every few seconds, and one that has not answered for this long (stopped, or its event loop blocked) is logged, killed (SIGKILL) and restarted like one that died (default 60000; 0: never).', check: (v: number) => (v !== 0 && v < 1000 ? `must be 0 (never) or at least 1000, got ${v}` : null) },
  { key: 'logLevel', flag: 'log-level', env: 'LOG_LEVEL', kind: 'string', doc: 'pino log level (default info).', check: (v: string) => (LOG_LEVELS.includes(v) ? null : `must be one of ${LOG_LEVELS.join(', ')}, got "${v}"`) },
  { key: 'secretKey', flag: 'secret-key', env: 'POSTHORN_SECRET_KEY', kind: 'string', doc: 'Key that encrypts stored secrets (mailbox passwords, DKIM keys). Default: a key generated into <data>/secret.key. Set it for multi-host deployments.' },
  { key: 'maxBodyBytes', flag: 'max-body-bytes', env: 'POSTHORN_MAX_BODY_BYTES', kind: 'int', doc: 'Largest accepted request body (default 20971520 = 20 MiB); larger gets 413 payload_too_large.', min: 1 },
  { key: 'maxRecipients', flag: 'max-recipients', env: 'POSTHORN_MAX_RECIPIENTS', kind: 'int', doc: 'Most recipients in one send_message (default 1000).', min: 1 },
  { key: 'maxScheduleAheadMs', flag: 'max-schedule-ahead-ms', env: 'POSTHORN_MAX_SCHEDULE_AHEAD_MS', kind: 'int', doc: 'How far ahead send_message\'s send_at may schedule a message (default 7776000000 = 90 days); further is 406.', min: 1 },
  { key: 'maxPerPage', flag: 'max-per-page', env: 'POSTHORN_MAX_PER_PAGE', kind: 'int', doc: 'Largest per_page of listings (default 1000).', min: 1 },
  { key: 'dbPoolSize', flag: 'db-pool-size', env: 'POSTHORN_DB_POOL_SIZE', kind: 'int', doc: 'PostgreSQL connection pool size per process (default 10).', min: 1 },
  { key: 'dbTimeoutMs', flag: 'db-timeout-ms', env: 'POSTHORN_DB_TIMEOUT_MS', kind: 'int', doc: 'PostgreSQL: how long a statement waits for a pooled connection, and for the server\'s answer to each statement, before the call fails as unavailable (503, jobs paused; default 5000). The server cancels a statement 100 ms after that (statement_timeout): none runs on once no one waits for it. Migrations are not bounded.', min: 100 },
  { key: 'workers', flag: 'workers', env: 'POSTHORN_WORKERS', kind: 'int', doc: 'Delivery concurrency: transmissions in flight per process (default 128).', min: 0 },
  { key: 'leaseMs', flag: 'lease-ms', env: 'POSTHORN_LEASE_MS', kind: 'int', doc: 'How long a claimed transmission stays locked to its worker (default 300000).', min: 1 },
  { key: 'pollMs', flag: 'poll-ms', env: 'POSTHORN_POLL_MS', kind: 'int', doc: 'Idle delivery poll interval (default 1000).', min: 1 },
  { key: 'relay', flag: 'relay', env: 'POSTHORN_RELAY', kind: 'string', doc: 'smtp://user:pass@host:port or smtps://...: send every message through this smarthost.', check: checkRelayUrl },
  { key: 'transportMap', flag: 'transport-map', env: 'POSTHORN_TRANSPORT_MAP', kind: 'list', doc: 'domain=host:port, repeatable (or comma-separated in the env): route a recipient domain to a fixed server.', check: (v: string[]) => parsedBy(parseTransportMap, v) },
  { key: 'dnsServers', flag: 'dns-server', env: 'POSTHORN_DNS_SERVERS', kind: 'list', doc: 'DNS server ip[:port] for MX lookups, repeatable (default: the system resolvers).', check: checkDnsServers },
  { key: 'ehloName', flag: 'ehlo-name', env: 'POSTHORN_EHLO_NAME', kind: 'string', doc: 'Name sent in EHLO (default: --mailer-host).' },
  { key: 'requireTls', flag: 'require-tls', env: 'POSTHORN_REQUIRE_TLS', kind: 'bool', doc: 'Require STARTTLS with a verified certificate on every delivery (default: opportunistic TLS).' },
  { key: 'maxConnectionsPerDestination', flag: 'max-connections-per-destination', env: 'POSTHORN_MAX_CONNECTIONS_PER_DESTINATION', kind: 'int', doc: 'Open SMTP connections per destination host (default 10).', min: 1 },
  { key: 'maxConnections', flag: 'max-connections', env: 'POSTHORN_MAX_CONNECTIONS', kind: 'int', doc: 'Open SMTP connections in total (default 200).', min: 1 },
  { key: 'connectTimeoutMs', flag: 'connect-timeout-ms', env: 'POSTHORN_CONNECT_TIMEOUT_MS', kind: 'int', doc: 'SMTP TCP connect timeout (default 30000).', min: 1 },
  { key: 'greetingTimeoutMs', flag: 'greeting-timeout-ms', env: 'POSTHORN_GREETING_TIMEOUT_MS', kind: 'int', doc: 'SMTP greeting timeout (default 30000).', min: 1 },
  { key: 'socketTimeoutMs', flag: 'socket-timeout-ms', env: 'POSTHORN_SOCKET_TIMEOUT_MS', kind: 'int', doc: 'SMTP inactivity timeout at any later stage but the reply to the end of the message (default 120000).', min: 1 },
  { key: 'dataDoneTimeoutMs', flag: 'data-done-timeout-ms', env: 'POSTHORN_DATA_DONE_TIMEOUT_MS', kind: 'int', doc: 'How long to wait for the SMTP reply to the end of the message, once all of it is sent (default 600000 = 10 min, RFC 5321 4.5.3.2.6).', min: 1 },
  { key: 'retrySchedule', flag: 'retry-schedule', env: 'POSTHORN_RETRY_SCHEDULE', kind: 'string', doc: 'Delays between delivery attempts, e.g. "1m,5m,15m,30m,1h,2h,4h,8h" (the last repeats).', check: (v: string) => (parseRetrySchedule(v) ? null : `must be durations (a number with ms, s, m, h or d) separated by commas, like "1m,5m,1h", got "${v}"`) },
  { key: 'maxRetryAgeMs', flag: 'max-retry-age-ms', env: 'POSTHORN_MAX_RETRY_AGE_MS', kind: 'int', doc: 'Give up on a deferred transmission this long after it was accepted (default 259200000 = 72 h).', min: 1 },
  { key: 'bounceDomain', flag: 'bounce-domain', env: 'POSTHORN_BOUNCE_DOMAIN', kind: 'string', doc: 'Domain of the VERP return path (default: --mailer-host).' },
  { key: 'bouncePort', flag: 'bounce-port', env: 'POSTHORN_BOUNCE_PORT', kind: 'port', doc: 'Port of the incoming SMTP listener for bounces (default: not listening). Formerly --smtp-port, still accepted with a warning.' },
  { key: 'bounceHost', flag: 'bounce-host', env: 'POSTHORN_BOUNCE_HOST', kind: 'string', doc: 'Address of the bounce listener (default: --host). Formerly --smtp-host.' },
  { key: 'submissionPort', flag: 'submission-port', env: 'POSTHORN_SUBMISSION_PORT', kind: 'port', doc: 'Port of SMTP submission with STARTTLS, 587 by convention (default: not listening). See docs/smtp-submission.md.' },
  { key: 'submissionTlsPort', flag: 'submission-tls-port', env: 'POSTHORN_SUBMISSION_TLS_PORT', kind: 'port', doc: 'Port of SMTP submission over implicit TLS, 465 by convention (default: not listening).' },
  { key: 'submissionHost', flag: 'submission-host', env: 'POSTHORN_SUBMISSION_HOST', kind: 'string', doc: 'Address the submission listeners bind (default: --host).' },
  { key: 'submissionTlsCert', flag: 'submission-tls-cert', env: 'POSTHORN_SUBMISSION_TLS_CERT', kind: 'string', doc: 'PEM certificate of the submission listeners (default: --tls-cert).' },
  { key: 'submissionTlsKey', flag: 'submission-tls-key', env: 'POSTHORN_SUBMISSION_TLS_KEY', kind: 'string', doc: 'PEM private key for --submission-tls-cert (default: --tls-key).' },
  { key: 'submissionAllowPlaintext', flag: 'submission-allow-plaintext', env: 'POSTHORN_SUBMISSION_ALLOW_PLAINTEXT', kind: 'bool', doc: 'Accept AUTH on the submission port without TLS (default false; without a certificate it is allowed on a loopback --submission-host only).' },
  { key: 'submissionMaxBytes', flag: 'submission-max-bytes', env: 'POSTHORN_SUBMISSION_MAX_BYTES', kind: 'int', doc: 'Largest message accepted over SMTP, advertised as SIZE (default 26214400 = 25 MiB).', min: 1 },
  { key: 'submissionMaxMessagesPerConnection', flag: 'submission-max-messages-per-connection', env: 'POSTHORN_SUBMISSION_MAX_MESSAGES_PER_CONNECTION', kind: 'int', doc: 'Messages one SMTP connection may submit before it must reconnect (default 1000).', min: 1 },
  { key: 'submissionMaxClients', flag: 'submission-max-clients', env: 'POSTHORN_SUBMISSION_MAX_CLIENTS', kind: 'int', doc: 'Open submission connections per listener (default 500).', min: 1 },
  { key: 'submissionMaxConnectionsPerIp', flag: 'submission-max-connections-per-ip', env: 'POSTHORN_SUBMISSION_MAX_CONNECTIONS_PER_IP', kind: 'int', doc: 'Open submission connections from one client address (default 50).', min: 1 },
  { key: 'submissionIdleTimeoutMs', flag: 'submission-idle-timeout-ms', env: 'POSTHORN_SUBMISSION_IDLE_TIMEOUT_MS', kind: 'int', doc: 'Close a submission connection idle this long (default 60000).', min: 1 },
  { key: 'submissionTotalTimeoutMs', flag: 'submission-total-timeout-ms', env: 'POSTHORN_SUBMISSION_TOTAL_TIMEOUT_MS', kind: 'int', doc: 'Close a submission connection open this long, busy or not (default 1800000 = 30 min).', min: 1 },
  { key: 'httpHeadersTimeoutMs', flag: 'http-headers-timeout-ms', env: 'POSTHORN_HTTP_HEADERS_TIMEOUT_MS', kind: 'int', doc: 'An HTTP client must send its request line and headers within this time of connecting (or of the previous answer on a kept-alive connection) or is answered 408 and disconnected (default 10000).' },
  { key: 'httpRequestTimeoutMs', flag: 'http-request-timeout-ms', env: 'POSTHORN_HTTP_REQUEST_TIMEOUT_MS', kind: 'int', doc: 'An HTTP client must send a whole request body within this time of its headers or is answered 408 and disconnected (default 60000); the time an answer takes is not limited.' },
  { key: 'httpKeepAliveTimeoutMs', flag: 'http-keep-alive-timeout-ms', env: 'POSTHORN_HTTP_KEEP_ALIVE_TIMEOUT_MS', kind: 'int', doc: 'An idle kept-alive HTTP connection is closed after this time (default 65000, longer than the 60 s idle timeout of common load balancers).' },
  { key: 'maxConnectionsPerIp', flag: 'max-connections-per-ip', env: 'POSTHORN_MAX_CONNECTIONS_PER_IP', kind: 'int', doc: 'Open connections one client address may hold on each listener (HTTP, bounce SMTP); more are refused. 0: no limit. Raise it behind a proxy that connects from one address (default 256).' },
  { key: 'bounceIdleTimeoutMs', flag: 'bounce-idle-timeout-ms', env: 'POSTHORN_BOUNCE_IDLE_TIMEOUT_MS', kind: 'int', doc: 'The bounce listener closes a session that sends nothing for this long (default 60000).' },
  { key: 'bounceSessionTimeoutMs', flag: 'bounce-session-timeout-ms', env: 'POSTHORN_BOUNCE_SESSION_TIMEOUT_MS', kind: 'int', doc: 'The bounce listener closes a session open this long, busy or not (default 600000 = 10 min).' },
  // The key keeps its first name; the option covers every outbound address (services.ts OutboundAddressPolicy).
  { key: 'allowPrivateWebhooks', flag: 'allow-private-addresses', env: 'POSTHORN_ALLOW_PRIVATE_ADDRESSES', kind: 'bool', doc: 'Allow webhook and postback URLs and mailbox IMAP hosts that resolve to private, loopback or link-local addresses (default false). Formerly --allow-private-webhooks (POSTHORN_ALLOW_PRIVATE_WEBHOOKS), still accepted.' },
  { key: 'webhookTimeoutMs', flag: 'webhook-timeout-ms', env: 'POSTHORN_WEBHOOK_TIMEOUT_MS', kind: 'int', doc: 'Timeout of one webhook or postback request (default 10000).', min: 1 },
  { key: 'webhookRetrySchedule', flag: 'webhook-retry-schedule', env: 'POSTHORN_WEBHOOK_RETRY_SCHEDULE', kind: 'string', doc: 'Delays between the attempts of a webhook or postback, e.g. "5s,5m,30m,2h,5h,10h,10h" (the default); after the last one the request is failed.', check: (v: string) => (parseRetrySchedule(v) ? null : `must be durations (a number with ms, s, m, h or d) separated by commas, like "5s,5m,30m", got "${v}"`) },
  { key: 'mailboxPollMs', flag: 'mailbox-poll-ms', env: 'POSTHORN_MAILBOX_POLL_MS', kind: 'int', doc: 'IMAP poll interval where IDLE is not offered (default 60000).', min: 1 },
  { key: 'mailboxCaFile', flag: 'mailbox-ca-file', env: 'POSTHORN_MAILBOX_CA_FILE', kind: 'string', doc: 'PEM file of extra CA certificates trusted for IMAP TLS (a self-signed mail server); certificates are always verified (default: system CAs only).' },
  { key: 'tracking', flag: 'tracking', env: 'POSTHORN_TRACKING', kind: 'bool', doc: 'Enable open/click tracking for projects that opt in (default true).' },
  { key: 'opsPort', flag: 'ops-port', env: 'POSTHORN_OPS_PORT', kind: 'int', doc: 'Port of the operations listener (/healthz, /readyz, /metrics) of a --role worker process; other roles serve them on the API port (default 8081).' },
  { key: 'opsHost', flag: 'ops-host', env: 'POSTHORN_OPS_HOST', kind: 'string', doc: 'Address of the operations listener of a --role worker process (default: --host).' },
  { key: 'accessLog', flag: 'access-log', env: 'POSTHORN_ACCESS_LOG', kind: 'bool', doc: 'Log one line per HTTP request (method, path, status, duration, request id; never bodies or keys) (default false).' },
  { key: 'logAddresses', flag: 'log-addresses', env: 'POSTHORN_LOG_ADDRESSES', kind: 'bool', doc: 'Name full recipient addresses in delivery log lines; by default only their domain is logged (default false).' },
  { key: 'retentionDays', flag: 'retention-days', env: 'POSTHORN_RETENTION_DAYS', kind: 'int', doc: 'Days messages, their transmissions, attempts, events and outbound requests are kept before the purge deletes them; a project\'s retention_days setting overrides it; 0 keeps everything (default 90).' },
  { key: 'rateLimitPerKey', flag: 'rate-limit-per-key', env: 'POSTHORN_RATE_LIMIT_PER_KEY', kind: 'string', check: (v: string) => parsedBy(parseRateLimit, v), doc: 'Requests per API key, "N/window" such as "600/1m" or "20/s"; over it the API answers 429 too_many_requests with Retry-After (default off). Shared by the processes of one serve (each tells the others what it took every 50 ms); separate services on one PostgreSQL count each their own.' },
];

const ROLES = ['all', 'api', 'worker'];
const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

/** postgres://, postgresql:// or sqlite: with an absolute path (sqlite:///var/lib/posthorn.db, sqlite:/x.db) or :memory:. */
function checkDatabaseUrl(url: string): string | null {
  const hint = 'use postgres://user@host:5432/db or sqlite:///absolute/path/posthorn.db';
  if (isPostgresUrl(url)) {
    try {
      const parsed = new URL(url);
      return parsed.hostname || parsed.searchParams.has('host') ? null : `has no host: ${hint}`;
    } catch {
      return `is not a valid URL: ${hint}`;
    }
  }
  if (/^sqlite:/i.test(url)) {
    const file = url.replace(/^sqlite:(\/\/)?/i, '');
    if (file === ':memory:' || path.isAbsolute(file)) return null;
    return `must name an absolute path for SQLite (sqlite:///absolute/path/posthorn.db), got "${redactUrl(url)}"`;
  }
  return `must start with postgres://, postgresql:// or sqlite: (${hint}), got "${redactUrl(url)}"`;
}

function checkHttpUrl(url: string): string | null {
  try {
    const parsed = new URL(url);
    if (parsed.protocol === 'http:' || parsed.protocol === 'https:') return null;
  } catch {
    // reported below
  }
  return `must be an http:// or https:// URL, got "${url}"`;
}

function checkRelayUrl(url: string): string | null {
  try {
    const parsed = new URL(url);
    if ((parsed.protocol === 'smtp:' || parsed.protocol === 'smtps:') && parsed.hostname) return parsedBy(parseRelayUrl, url);
  } catch {
    // reported below
  }
  return `must be a URL like smtp://user:pass@host:587 or smtps://host:465, got "${redactUrl(url)}"`;
}

/**
 * The problem the parser its feature reads a value with finds in it, or null: checked here, before
 * anything starts, not when that feature starts (docs/configuration.md, "Validation"). Its message
 * names the option itself; the label is put in front of what follows it.
 */
function parsedBy<T>(parse: (value: T) => unknown, value: T): string | null {
  try {
    parse(value);
    return null;
  } catch (error) {
    return String((error as Error).message).replace(/^--[a-z-]+ /, '');
  }
}

function checkDnsServers(servers: string[]): string | null {
  for (const server of servers) {
    const m = /^\[([0-9a-f:.]+)\](?::(\d+))?$/i.exec(server) ?? /^(\d{1,3}(?:\.\d{1,3}){3})(?::(\d+))?$/.exec(server) ?? /^([0-9a-f:]*:[0-9a-f:.]*)()$/i.exec(server);
    const port = m?.[2] ? Number(m[2]) : 53;
    if (!m || !(port >= 1 && port <= 65535)) return `takes an IP address with an optional port (127.0.0.1:53, [::1]:53), got "${server}"`;
  }
  return null;
}

/** A URL with its password replaced, for messages. */
export function redactUrl(url: string): string {
  return url.replace(/^([a-z][a-z0-9+.-]*:\/\/[^:/@]*:)[^@/]*@/i, '$1***@');
}

const DEFAULTS = {
  port: 8080,
  host: '127.0.0.1',
  data: './data',
  databaseUrl: null,
  tlsCert: null,
  tlsKey: null,
  role: 'all',
  processes: null,
  apiProcesses: null,
  watchdogMs: 60_000,
  logLevel: 'info',
  secretKey: null,
  maxBodyBytes: 20 * 1024 * 1024,
  maxRecipients: 1000,
  maxScheduleAheadMs: 90 * 86_400_000,
  maxPerPage: 1000,
  dbPoolSize: 10,
  dbTimeoutMs: 5000,
  workers: 128,
  leaseMs: 300_000,
  pollMs: 1000,
  relay: null,
  transportMap: [],
  dnsServers: [],
  requireTls: false,
  maxConnectionsPerDestination: 10,
  maxConnections: 200,
  connectTimeoutMs: 30_000,
  greetingTimeoutMs: 30_000,
  socketTimeoutMs: 120_000,
  dataDoneTimeoutMs: 600_000,
  retrySchedule: '1m,5m,15m,30m,1h,2h,4h,8h',
  maxRetryAgeMs: 72 * 3600_000,
  bouncePort: null,
  submissionPort: null,
  submissionTlsPort: null,
  submissionTlsCert: null,
  submissionTlsKey: null,
  submissionAllowPlaintext: false,
  submissionMaxBytes: 25 * 1024 * 1024,
  submissionMaxMessagesPerConnection: 1000,
  submissionMaxClients: 500,
  submissionMaxConnectionsPerIp: 50,
  submissionIdleTimeoutMs: 60_000,
  submissionTotalTimeoutMs: 30 * 60_000,
  httpHeadersTimeoutMs: 10_000,
  httpRequestTimeoutMs: 60_000,
  httpKeepAliveTimeoutMs: 65_000,
  maxConnectionsPerIp: 256,
  bounceIdleTimeoutMs: 60_000,
  bounceSessionTimeoutMs: 600_000,
  allowPrivateWebhooks: false,
  webhookTimeoutMs: 10_000,
  webhookRetrySchedule: '5s,5m,30m,2h,5h,10h,10h',
  mailboxPollMs: 60_000,
  mailboxCaFile: null,
  tracking: true,
  opsPort: 8081,
  accessLog: false,
  logAddresses: false,
  retentionDays: 90,
  rateLimitPerKey: null,
} satisfies Partial<Config>;

export class ConfigError extends Error {}

/**
 * Splits argv into positional words and --flag values (repeatable flags accumulate). A flag with
 * no value (the last word, or followed by another flag) reads "true", and is named in `bare`: a
 * flag that takes a value given none is refused, not read as the word "true".
 */
export function parseArgv(argv: readonly string[]): { positional: string[]; flags: Map<string, string[]>; bare: Set<string> } {
  const positional: string[] = [];
  const flags = new Map<string, string[]>();
  const bare = new Set<string>();
  for (let i = 0; i < argv.length; i++) {
    const word = argv[i];
    if (!word.startsWith('--')) {
      positional.push(word);
      continue;
    }
    const eq = word.indexOf('=');
    const name = eq === -1 ? word.slice(2) : word.slice(2, eq);
    let value: string;
    if (eq !== -1) value = word.slice(eq + 1);
    else if (i + 1 < argv.length && !argv[i + 1].startsWith('--')) value = argv[++i];
    else {
      value = 'true';
      bare.add(name);
    }
    flags.set(name, [...(flags.get(name) ?? []), value]);
  }
  return { positional, flags, bare };
}

/** @param label how the message names the option: --flag, or --flag (VARIABLE) when it came from the environment */
function convert(spec: OptionSpec, raw: string[], label = `--${spec.flag}`): unknown {
  const last = raw[raw.length - 1];
  switch (spec.kind) {
    case 'string':
      return last;
    case 'list':
      return raw.flatMap((r) => r.split(',')).map((s) => s.trim()).filter(Boolean);
    case 'bool':
      if (/^(1|true|yes|on)$/i.test(last)) return true;
      if (/^(0|false|no|off)$/i.test(last)) return false;
      throw new ConfigError(`${label} expects true or false, got "${last}"`);
    case 'int':
    case 'port': {
      if (!/^\d+$/.test(last.trim())) throw new ConfigError(`${label} expects a whole number, got "${last}"`);
      const n = Number(last.trim());
      const [min, max] = spec.kind === 'port' ? [0, 65535] : [spec.min ?? 0, spec.max ?? Number.MAX_SAFE_INTEGER];
      if (n < min || n > max) {
        throw new ConfigError(`${label} must be ${spec.kind === 'port' ? 'a port ' : ''}between ${min} and ${max}, got ${last.trim()}`);
      }
      return n;
    }
  }
}

/**
 * Reads flags first, then the environment, then defaults. Unknown flags are refused.
 * @param commandFlags the flags of the command being run, accepted besides the options.
 * @param bare the flags given without a value (parseArgv): refused unless they are true/false.
 */
export function parseConfig(
  flags: Map<string, string[]>,
  env: NodeJS.ProcessEnv = process.env,
  commandFlags: ReadonlySet<string> = new Set(),
  bare: ReadonlySet<string> = new Set(),
): Readonly<Config> {
  ({ flags, env } = renameDeprecated(flags, env));
  const known = new Set(OPTIONS.map((o) => o.flag));
  for (const name of flags.keys()) {
    if (!known.has(name) && !commandFlags.has(name)) throw new ConfigError(`unknown option --${name} (see: posthorn help)`);
  }
  const out: Record<string, unknown> = { ...DEFAULTS };
  for (const spec of OPTIONS) {
    const fromFlag = flags.get(spec.flag);
    const fromEnv = spec.env !== undefined ? env[spec.env] : undefined;
    const label = fromFlag || spec.env === undefined ? `--${spec.flag}` : `--${spec.flag} (${spec.env})`;
    let value: unknown;
    if (fromFlag && spec.kind !== 'bool' && bare.has(spec.flag)) throw new ConfigError(`--${spec.flag} needs a value (see: posthorn help)`);
    if (fromFlag) value = convert(spec, fromFlag, label);
    else if (fromEnv !== undefined && fromEnv !== '') value = convert(spec, [fromEnv], label);
    else continue;
    const problem = spec.check?.(value as never);
    if (problem) throw new ConfigError(`${label} ${problem}`);
    out[spec.key] = value;
  }
  const config = out as unknown as Config;
  if ((config.tlsCert === null) !== (config.tlsKey === null)) throw new ConfigError('--tls-cert and --tls-key go together');
  config.data = path.resolve(config.data);
  // Message-IDs and the default From (noreply@) use this host: it must be a fully qualified name,
  // which a container's bare hostname ("vm", "a1b2c3") is not.
  config.mailerHost ??= defaultMailerHost(os.hostname());
  config.ehloName ??= config.mailerHost;
  config.opsHost ??= config.host;
  config.bounceDomain ??= config.mailerHost;
  config.bounceHost ??= config.host;
  config.submissionHost ??= config.host;
  config.submissionTlsCert ??= config.tlsCert;
  config.submissionTlsKey ??= config.tlsKey;
  if ((config.submissionTlsCert === null) !== (config.submissionTlsKey === null)) throw new ConfigError('--submission-tls-cert and --submission-tls-key go together');
  if (config.submissionTlsPort !== null && config.submissionTlsCert === null) throw new ConfigError('--submission-tls-port needs a certificate (--submission-tls-cert or --tls-cert)');
  // Passwords (API keys) in clear only on this machine's own addresses (docs/smtp-submission.md).
  if (config.submissionPort !== null && config.submissionTlsCert === null && !config.submissionAllowPlaintext && !isLoopback(config.submissionHost)) {
    throw new ConfigError(`--submission-port on ${config.submissionHost} needs a certificate (--submission-tls-cert or --tls-cert), or --submission-allow-plaintext`);
  }
  config.publicUrl ??= `${config.tlsCert ? 'https' : 'http'}://${config.host}:${config.port}`;
  config.publicUrl = config.publicUrl.replace(/\/+$/, '');
  return Object.freeze(config);
}

/** A loopback host: an address or name of this machine alone. */
export function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || (net.isIPv4(host) && host.startsWith('127.'));
}

/** Old names still accepted, with a warning: the bounce listener's options before SMTP submission existed. */
const DEPRECATED_FLAGS: Record<string, { flag: string; env: string; oldEnv: string; note?: string }> = {
  'smtp-port': { flag: 'bounce-port', env: 'POSTHORN_BOUNCE_PORT', oldEnv: 'POSTHORN_SMTP_PORT' },
  'smtp-host': { flag: 'bounce-host', env: 'POSTHORN_BOUNCE_HOST', oldEnv: 'POSTHORN_SMTP_HOST' },
  'allow-private-webhooks': { flag: 'allow-private-addresses', env: 'POSTHORN_ALLOW_PRIVATE_ADDRESSES', oldEnv: 'POSTHORN_ALLOW_PRIVATE_WEBHOOKS', note: 'it covers mailbox IMAP hosts too' },
};

function renameDeprecated(flags: Map<string, string[]>, env: NodeJS.ProcessEnv): { flags: Map<string, string[]>; env: NodeJS.ProcessEnv } {
  let outFlags = flags;
  let outEnv = env;
  for (const [old, now] of Object.entries(DEPRECATED_FLAGS)) {
    const given = flags.get(old);
    if (given) {
      if (outFlags === flags) outFlags = new Map(flags);
      outFlags.delete(old);
      if (!outFlags.has(now.flag)) outFlags.set(now.flag, given);
      process.emitWarning(`--${old} is deprecated: use --${now.flag} (${now.note ?? 'the bounce listener; SMTP submission is --submission-port'})`, 'DeprecationWarning');
    }
    const givenEnv = env[now.oldEnv];
    if (givenEnv !== undefined && givenEnv !== '') {
      if (outEnv === env) outEnv = { ...env };
      if (outEnv[now.env] === undefined || outEnv[now.env] === '') outEnv[now.env] = givenEnv;
      process.emitWarning(`${now.oldEnv} is deprecated: use ${now.env}`, 'DeprecationWarning');
    }
  }
  return { flags: outFlags, env: outEnv };
}

/** The machine's host name when fully qualified, else that name under .localdomain. */
export function defaultMailerHost(hostname: string): string {
  const name = hostname.trim().toLowerCase().replace(/\.$/, '') || 'localhost';
  return name.includes('.') ? name : `${name}.localdomain`;
}

export function describeOptions(): string {
  return OPTIONS.map((o) => `  --${o.flag.padEnd(34)} ${o.env ? `[${o.env}] ` : ''}${o.doc}`).join('\n');
}

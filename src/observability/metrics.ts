// The metric registry of one running Posthorn (docs/operations.md, "Metrics"): every named metric,
// declared once, with bounded labels only. A label never carries a recipient, a message or a URL:
// domains are reduced to a handful of groups (domainGroup), SMTP codes to their class
// (smtpCodeClass), API methods to the method table's names (the HTTP edge maps the rest to
// "other").
//
// One registry per store, not per process: tests run several apps in one process, and each app's
// /metrics must describe that app. metricsOf(services) finds or makes it, so recording functions
// take the Services every operation already receives and no type elsewhere has to change.
import { monitorEventLoopDelay } from 'node:perf_hooks';
import client from 'prom-client';
import type { Services } from '../services.ts';
import type { Store } from '../storage/store.ts';
import { addDatabaseGauges } from './database-gauges.ts';

/** Seconds buckets of API request latency: sub-millisecond ingest up to slow reports. */
const API_BUCKETS_S = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
/** Seconds buckets of one SMTP attempt (connect, TLS, dialogue). */
const ATTEMPT_BUCKETS_S = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];
/** Seconds buckets from acceptance to delivery: immediate sends to a day of retries. */
const DELIVERY_BUCKETS_S = [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 900, 3600, 14_400, 86_400];
/** Seconds buckets of a database write as its caller sees it (group wait + commit + fsync). */
const WRITE_BUCKETS_S = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5];

export const DOMAIN_GROUPS = ['gmail', 'microsoft', 'yahoo', 'apple', 'other'] as const;
export type DomainGroup = (typeof DOMAIN_GROUPS)[number];

/** Recipient-domain and MX-host suffixes of the large mailbox providers. */
const GROUP_SUFFIXES: ReadonlyArray<[DomainGroup, readonly string[]]> = [
  ['gmail', ['gmail.com', 'googlemail.com', 'google.com']],
  ['microsoft', ['outlook.com', 'hotmail.com', 'live.com', 'msn.com', 'hotmail.co.uk', 'outlook.fr', 'live.fr', 'hotmail.fr']],
  ['yahoo', ['yahoo.com', 'yahoodns.net', 'ymail.com', 'aol.com', 'yahoo.co.uk', 'yahoo.fr', 'rocketmail.com']],
  ['apple', ['icloud.com', 'me.com', 'mac.com']],
];

/** Each suffix and its dotted form, built once (domainGroup runs for every delivery attempt). */
const GROUP_MATCHERS: ReadonlyArray<[DomainGroup, ReadonlyArray<[string, string]>]> = GROUP_SUFFIXES.map(([group, suffixes]) => [group, suffixes.map((s) => [s, `.${s}`])]);

/**
 * The provider group of a destination, by its MX host when known (a company domain hosted at
 * Google counts as gmail: that is whose limits it meets) and else by the recipient's domain.
 */
export function domainGroup(domain: string | null | undefined, mxHost?: string | null): DomainGroup {
  for (const name of [mxHost, domain]) {
    if (!name) continue;
    const n = name.toLowerCase().replace(/\.$/, '');
    for (const [group, suffixes] of GROUP_MATCHERS) if (suffixes.some(([bare, dotted]) => n === bare || n.endsWith(dotted))) return group;
  }
  return 'other';
}

/** `SMTP_451` -> `4xx`; codes of outcomes without an SMTP reply (TIMEOUT, DNS_ERROR, SUPPRESSED) -> `none`. */
export function smtpCodeClass(resultCode: string | null | undefined): '2xx' | '3xx' | '4xx' | '5xx' | 'none' {
  const m = /^SMTP_([2-5])\d\d$/.exec(resultCode ?? '');
  return m ? (`${m[1]}xx` as '2xx' | '3xx' | '4xx' | '5xx') : 'none';
}

/** `404` -> `4xx`; no response -> `none`. */
export function httpStatusClass(status: number | null | undefined): string {
  return typeof status === 'number' && status >= 100 && status < 600 ? `${Math.floor(status / 100)}xx` : 'none';
}

export class PosthornMetrics {
  readonly registry = new client.Registry();

  readonly apiRequests = new client.Counter({
    name: 'posthorn_api_requests_total',
    help: 'PostageApp API requests answered, by API method and HTTP status.',
    labelNames: ['method', 'status'] as const,
    registers: [this.registry],
  });
  readonly apiRequestDuration = new client.Histogram({
    name: 'posthorn_api_request_duration_seconds',
    help: 'Time from request received to response sent, by API method.',
    labelNames: ['method'] as const,
    buckets: API_BUCKETS_S,
    registers: [this.registry],
  });
  readonly messagesAccepted = new client.Counter({
    name: 'posthorn_messages_accepted_total',
    help: 'Messages accepted (stored with their transmissions) by send_message in this process.',
    registers: [this.registry],
  });
  readonly recipientsAccepted = new client.Counter({
    name: 'posthorn_recipients_accepted_total',
    help: 'Transmissions (one per recipient) created by the accepted messages.',
    registers: [this.registry],
  });
  readonly deliveryAttempts = new client.Counter({
    name: 'posthorn_delivery_attempts_total',
    help: 'Delivery attempts finished, by outcome (sent, deferred, failed), SMTP code class and destination group.',
    labelNames: ['outcome', 'code_class', 'domain_group'] as const,
    registers: [this.registry],
  });
  readonly deliveryAttemptDuration = new client.Histogram({
    name: 'posthorn_delivery_attempt_duration_seconds',
    help: 'Duration of one delivery attempt (routing, connection, SMTP dialogue), by outcome.',
    labelNames: ['outcome'] as const,
    buckets: ATTEMPT_BUCKETS_S,
    registers: [this.registry],
  });
  readonly deliveryLatency = new client.Histogram({
    name: 'posthorn_delivery_latency_seconds',
    help: 'Time from when a transmission was due to be sent first (its message\'s send_at, else acceptance) to its delivery.',
    buckets: DELIVERY_BUCKETS_S,
    registers: [this.registry],
  });
  readonly compositions = new client.Counter({
    name: 'posthorn_compositions_total',
    help: 'Messages composed (rendered into MIME) by delivery, by result (composed, failed: content that cannot be rendered with its variables); a copy served from the cache of composed content is not counted.',
    labelNames: ['result'] as const,
    registers: [this.registry],
  });
  readonly smtpDeliveriesByTls = new client.Counter({
    name: 'posthorn_smtp_sessions_total',
    help: 'Delivery attempts that reached an SMTP server, by whether the session was encrypted (tls="true") or not.',
    labelNames: ['tls'] as const,
    registers: [this.registry],
  });
  readonly sandboxAttempts = new client.Counter({
    name: 'posthorn_sandbox_attempts_total',
    help: 'Attempts answered by the sandbox (messages accepted in sandbox mode, nothing sent), by outcome (sent, deferred, failed); never counted in posthorn_delivery_attempts_total.',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });
  readonly smtpConnectionsOpen = new client.Gauge({
    name: 'posthorn_smtp_connections_open',
    help: 'Outgoing SMTP connections open now (pooled and in use).',
    registers: [this.registry],
    collect: () => {
      let open = 0;
      for (const count of this.smtpConnectionSources) open += count();
      this.smtpConnectionsOpen.set(open);
    },
  });
  readonly outboundAttempts = new client.Counter({
    name: 'posthorn_outbound_attempts_total',
    help: 'Webhook and postback requests attempted, by kind, outcome (delivered, retry, failed) and HTTP status class.',
    labelNames: ['kind', 'outcome', 'status_class'] as const,
    registers: [this.registry],
  });
  readonly outboundAttemptDuration = new client.Histogram({
    name: 'posthorn_outbound_attempt_duration_seconds',
    help: 'Duration of one webhook or postback request, by kind.',
    labelNames: ['kind'] as const,
    buckets: API_BUCKETS_S,
    registers: [this.registry],
  });
  readonly dbWriteDuration = new client.Histogram({
    name: 'posthorn_db_write_duration_seconds',
    help: 'Time from a write being handed to the store to its durable commit (group wait, transaction, fsync).',
    buckets: WRITE_BUCKETS_S,
    registers: [this.registry],
  });
  readonly dbWriteErrors = new client.Counter({
    name: 'posthorn_db_write_errors_total',
    help: 'Store writes that failed (the unit threw, or the commit failed).',
    registers: [this.registry],
  });
  readonly purgedRows = new client.Counter({
    name: 'posthorn_purged_rows_total',
    help: 'Rows deleted by the retention purge, by table.',
    labelNames: ['table'] as const,
    registers: [this.registry],
  });
  /**
   * The supervised delivery process beside this API process, as the supervisor tells it
   * (observability/readiness.ts setDeliveryProcessState; /readyz `delivery`): one sample, labelled
   * with the state, 1 while running, else 0. Absent where no supervisor tells it (one process, a
   * worker): an alert on it never fires there.
   */
  readonly deliveryProcessUp = new client.Gauge({
    name: 'posthorn_delivery_process_up',
    help: 'The supervised delivery process of a serve, as its API processes are told: 1 while running, else 0 (state: running, starting, restarting, stopping).',
    labelNames: ['state'] as const,
    registers: [this.registry],
    // Several API processes are told the same: the figure once.
    aggregator: 'min',
  });
  readonly deliveryProcessRestarts = new client.Counter({
    name: 'posthorn_delivery_process_restarts_total',
    help: 'Times the supervised delivery process of a serve was seen restarting (it exited or was killed), as its API processes are told.',
    registers: [this.registry],
    aggregator: 'max',
  });
  readonly eventLoopDelay = new client.Gauge({
    name: 'posthorn_event_loop_delay_seconds',
    // The label is not "quantile": Prometheus keeps that name for summaries (promtool check metrics).
    help: 'Event-loop delay over the last scrape interval (monitorEventLoopDelay): its 50th and 99th percentile (stat p50, p99) and max.',
    labelNames: ['stat'] as const,
    registers: [this.registry],
    // Over several API processes (serve --api-processes): the slowest one's.
    aggregator: 'max',
    collect: () => {
      const h = this.loopDelay;
      if (h.count === 0) return;
      this.eventLoopDelay.set({ stat: 'p50' }, h.percentile(50) / 1e9);
      this.eventLoopDelay.set({ stat: 'p99' }, h.percentile(99) / 1e9);
      this.eventLoopDelay.set({ stat: 'max' }, h.max / 1e9);
      h.reset();
    },
  });

  /**
   * Where this process is one of several of one service (serve: API processes and the delivery
   * process, cli/service.ts): the other processes' metrics (prom-client's getMetricsAsJSON),
   * gathered through the supervisor, for this process's /metrics.
   */
  gatherSiblings: (() => Promise<unknown[][]>) | null = null;

  /** The last state of the supervised delivery process recorded (recordDeliveryProcessState). */
  deliveryProcessState: string | null = null;

  /**
   * The Prometheus text of /metrics: this process's registry, or, with siblings, theirs and its own
   * as one service's. Counters and histograms add up; each gauge says how it combines (its
   * `aggregator`: the database's figures are the same in every process, the event-loop delay is
   * the worst one's), the rest add up as prom-client's cluster aggregation does.
   */
  async render(): Promise<string> {
    if (!this.gatherSiblings) return this.registry.metrics();
    const [own, siblings] = await Promise.all([this.registry.getMetricsAsJSON(), this.gatherSiblings()]);
    return client.AggregatorRegistry.aggregate([own, ...(siblings as Array<typeof own>)]).metrics();
  }

  /** Sources of the open SMTP connection count (one per delivery client of this process). */
  readonly smtpConnectionSources = new Set<() => number>();
  private readonly loopDelay = monitorEventLoopDelay({ resolution: 20 });

  constructor() {
    // process_* and nodejs_* (heap, handles, GC, nodejs_eventloop_lag_seconds, ...).
    client.collectDefaultMetrics({ register: this.registry });
    this.loopDelay.enable();
  }

  /** Stops the event-loop monitor (the store is closing). */
  close(): void {
    this.loopDelay.disable();
  }
}

const byStore = new WeakMap<Store, PosthornMetrics>();

/**
 * The registry of this app (one per store), made on first use: with it, the database gauges
 * (observability/database-gauges.ts) and the timer of store writes.
 */
export function metricsOf(services: Services): PosthornMetrics {
  let metrics = byStore.get(services.store);
  if (!metrics) {
    metrics = new PosthornMetrics();
    byStore.set(services.store, metrics);
    addDatabaseGauges(metrics.registry, services);
    timeStoreWrites(services.store, metrics);
  }
  return metrics;
}

/**
 * Wraps store.write and store.acceptMessage so every write's latency, as its caller waits for it,
 * is observed: on SQLite that is the group-commit wait (or the acceptance thread's), the shared
 * transaction and the WAL fsync; on PostgreSQL a pooled connection's wait, transaction and commit
 * (or the turn's acceptance statement). Wrapped here, not in storage/store.ts, so the store
 * stays unaware of metrics; the wrapper only adds a timer and a settle handler.
 */
function timeStoreWrites(store: Store, metrics: PosthornMetrics): void {
  const timed = <T>(unit: Promise<T>): Promise<T> => {
    const end = metrics.dbWriteDuration.startTimer();
    unit.then(
      () => end(),
      () => {
        end();
        metrics.dbWriteErrors.inc();
      },
    );
    return unit;
  };
  const write = store.write.bind(store);
  store.write = <T>(fn: Parameters<Store['write']>[0]): Promise<T> => timed(write(fn) as Promise<T>);
  // Message acceptance where it is not a unit of write(): PostgreSQL's one statement per turn, the
  // SQLite acceptance thread (storage/messages.ts storeAcceptedMessage). A taken uid is a success.
  const acceptMessage = store.acceptMessage.bind(store);
  store.acceptMessage = (message, transmissions) => timed(acceptMessage(message, transmissions));
}

/**
 * The supervised delivery process's state as the supervisor tells this API process (running,
 * starting, restarting (why), stopping): posthorn_delivery_process_up and, at each change into
 * restarting, posthorn_delivery_process_restarts_total.
 */
export function recordDeliveryProcessState(services: Services, state: string): void {
  const metrics = metricsOf(services);
  const kind = state.split(' ')[0];
  const was = metrics.deliveryProcessState;
  metrics.deliveryProcessState = kind;
  if (kind === 'restarting' && was !== 'restarting') metrics.deliveryProcessRestarts.inc();
  metrics.deliveryProcessUp.reset();
  metrics.deliveryProcessUp.set({ state: kind }, kind === 'running' ? 1 : 0);
}

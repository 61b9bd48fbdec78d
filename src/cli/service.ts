// serve and migrate: running the service, and bringing its database up to date.
import { WAKE_CHANNELS, type WakeChannel } from '../domain/wake-channels.ts';
import { quietLogger } from './output.ts';
import type { Services } from '../services.ts';
import type { SupervisorMessage } from './supervisor.ts';
import type { CliCommand, CommandInput } from './types.ts';

type Command = (input: CommandInput) => Promise<number>;

const serve: Command = async ({ config }) => {
  const { planProcesses, superviseServe, API_SIBLINGS_ENV, SUPERVISED_ENV, WAKE_RELAY_ENV } = await import('./supervisor.ts');
  const plan = planProcesses(config);
  if (plan) {
    const { createLogger } = await import('../log.ts');
    return superviseServe(config, plan, createLogger(config.logLevel));
  }
  const supervised = process.env[SUPERVISED_ENV] === '1' && typeof process.send === 'function';
  let stopping = false;
  if (supervised) {
    // A child of the supervisor (cli/supervisor.ts) never outlives it: the IPC channel closes
    // however the supervisor ends, and this process then ends at once, as the whole service
    // would have in a crash (everything it held is recovered as after any crash).
    process.on('disconnect', () => {
      if (!stopping) process.kill(process.pid, 'SIGKILL');
    });
  }
  const { startApp } = await import('../app.ts');
  let app: Awaited<ReturnType<typeof startApp>>;
  try {
    // A supervised child names itself in every line it logs: the service's lines come from several.
    const { createLogger } = await import('../log.ts');
    app = await startApp(config, supervised ? { log: createLogger(config.logLevel, { pid: true }) } : {});
  } catch (error) {
    // The open IPC channel would keep this process alive after the error is printed: it no longer
    // holds the event loop, and the process ends with the error's exit code (the supervisor sees
    // the exit before ready and ends the command with it). Not disconnect(): in an API process
    // that shares the port (node:cluster), a disconnect makes Node's cluster exit with 0.
    stopping = true;
    if (supervised) process.channel?.unref();
    throw error;
  }
  const log = app.services.log;
  const background = app.background.map((b) => b.name);
  let stopSharing = () => {};
  if (supervised) {
    if (config.role === 'api') await receiveDeliveryState(app.services);
    if (process.env[WAKE_RELAY_ENV] === '1') sendWakes(app.services.store);
    if (config.role === 'worker') receiveWakes(app.services.store);
    if (process.env[API_SIBLINGS_ENV] === '1') await gatherSiblingMetrics(app.services);
    stopSharing = await shareRateLimits(app.services);
    answerPings();
    process.send!({ type: 'ready', role: config.role, url: app.url, background });
    log.info({ url: app.url, role: config.role, background }, 'posthorn process is running');
  } else {
    log.info({ url: app.url, role: config.role, background }, 'posthorn is running');
  }
  await new Promise<void>((resolve) => {
    // Signal handlers do not keep Node's event loop alive, and a worker process may hold nothing
    // else that does (unref'd poll timers, no HTTP server): this timer keeps it running until told.
    const keepAlive = setInterval(() => {}, 1 << 30);
    const stop = (signal: string) => {
      stopping = true;
      clearInterval(keepAlive);
      log.info({ signal }, 'shutting down');
      resolve();
    };
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once('SIGINT', () => stop('SIGINT'));
  });
  stopSharing();
  await app.close();
  if (supervised) process.disconnect?.();
  return 0;
};

/**
 * The supervisor's watchdog (cli/supervisor.ts, --watchdog-ms): each ping is answered from this
 * event loop, so a process whose loop is blocked, or that is stopped, does not answer, and is
 * killed and restarted (docs/operations.md, "Processes").
 */
function answerPings(): void {
  process.on('message', (raw) => {
    if ((raw as SupervisorMessage)?.type === 'ping' && process.connected) process.send!({ type: 'pong' } satisfies SupervisorMessage, () => {});
  });
}

/** The part of the store wake-ups go through (the edge names no storage module, test/architecture.test.ts). */
interface WakeBus {
  wake(channel: WakeChannel): void;
  onWake(channel: WakeChannel, listener: () => void): Promise<unknown>;
}

/**
 * An API process's wake-ups go to the supervisor, coalesced (coalesceWakes), which relays them to
 * the delivery process: SQLite has no LISTEN/NOTIFY.
 */
function sendWakes(store: WakeBus): void {
  // The supervisor may be going away (its children end with it): no 'error' event for that.
  const relay = coalesceWakes((channel) => {
    if (process.connected) process.send!({ type: 'wake', channel }, () => {});
  });
  for (const channel of WAKE_CHANNELS) void store.onWake(channel, () => relay(channel));
}

/** The delivery process's side: a relayed wake-up wakes the jobs that listen on its channel. */
function receiveWakes(store: WakeBus): void {
  process.on('message', (raw) => {
    const message = raw as { type?: string; channel?: WakeChannel };
    if (message?.type === 'wake' && message.channel) store.wake(message.channel);
  });
}

/**
 * An API process's side of the delivery process's state: what the supervisor tells it (when it is
 * ready, and at every change) is what its /readyz reports as `delivery` and its /metrics as
 * posthorn_delivery_process_up and _restarts_total (docs/operations.md, "Health", "Metrics"). Only a serve with a delivery process of its own tells it anything.
 */
async function receiveDeliveryState(services: Services): Promise<void> {
  const { setDeliveryProcessState } = await import('../observability/readiness.ts');
  const { recordDeliveryProcessState } = await import('../observability/metrics.ts');
  process.on('message', (raw) => {
    const message = raw as SupervisorMessage;
    if (message?.type === 'delivery-state' && typeof message.state === 'string') {
      setDeliveryProcessState(services, message.state);
      recordDeliveryProcessState(services, message.state);
    }
  });
}

/**
 * /metrics of a process of a serve with several (API processes, the delivery process): its own
 * metrics and the others', gathered through the supervisor, aggregated as one service's
 * (observability/metrics.ts). It answers the supervisor's requests for its own.
 */
async function gatherSiblingMetrics(services: Services): Promise<void> {
  const { metricsOf } = await import('../observability/metrics.ts');
  const { METRICS_GATHER_MS } = await import('./supervisor.ts');
  const metrics = metricsOf(services);
  const waiting = new Map<number, (parts: unknown[][]) => void>();
  let sequence = 0;
  metrics.gatherSiblings = () =>
    new Promise((resolve) => {
      const id = ++sequence;
      if (!process.connected) return resolve([]);
      // The supervisor answers within METRICS_GATHER_MS; if it cannot (it is going away), this
      // process's own metrics are answered alone.
      const timer = setTimeout(() => settle([]), METRICS_GATHER_MS + 1000);
      const settle = (parts: unknown[][]) => {
        clearTimeout(timer);
        waiting.delete(id);
        resolve(parts);
      };
      waiting.set(id, settle);
      process.send!({ type: 'metrics-request', id } satisfies SupervisorMessage, (error) => {
        if (error) settle([]);
      });
    });
  process.on('message', (raw) => {
    const message = raw as SupervisorMessage;
    if (message?.type === 'metrics-collect') {
      void metrics.registry.getMetricsAsJSON().then((own) => {
        if (process.connected) process.send!({ type: 'metrics-part', id: message.id, metrics: own } satisfies SupervisorMessage, () => {});
      });
    } else if (message?.type === 'metrics-parts') {
      waiting.get(message.id)?.(message.parts);
    }
  });
}

/**
 * --rate-limit-per-key across the processes of one serve (operations/rate-limits.ts): what this
 * process takes goes to the supervisor, which passes it to the others; what they take comes back.
 */
async function shareRateLimits(services: Services): Promise<() => void> {
  const { shareKeyTokens, takeKeyTokensTakenElsewhere } = await import('../operations/rate-limits.ts');
  const stop = shareKeyTokens(services, (taken) => {
    if (process.connected) process.send!({ type: 'rate-taken', taken } satisfies SupervisorMessage, () => {});
  });
  process.on('message', (raw) => {
    const message = raw as SupervisorMessage;
    if (message?.type === 'rate-taken' && Array.isArray(message.taken)) takeKeyTokensTakenElsewhere(services, message.taken);
  });
  return stop;
}

/** The least time between two relayed wake-ups of the processes (per process, all channels). */
export const WAKE_RELAY_EVERY_MS = 5;

/**
 * Wake-ups as the other process needs them: each channel at most once per sending, and sendings
 * at least `everyMs` apart. The first wake-up after a quiet spell goes at the end of this
 * event-loop turn; those that follow within `everyMs` go together when it has passed, so none is
 * lost and none waits longer than that. Under an ingest load an API process woke the delivery
 * process once per event-loop turn, thousands of times a second, each an IPC message through
 * the supervisor (~2.5% of the API process's CPU in profiles) and, often, a claim of its own.
 */
export function coalesceWakes(send: (channel: WakeChannel) => void, everyMs = WAKE_RELAY_EVERY_MS): (channel: WakeChannel) => void {
  const due = new Set<WakeChannel>();
  let scheduled = false;
  let lastSentAt = -Infinity;
  const flush = () => {
    scheduled = false;
    lastSentAt = performance.now();
    for (const channel of due) send(channel);
    due.clear();
  };
  return (channel) => {
    due.add(channel);
    if (scheduled) return;
    scheduled = true;
    const wait = lastSentAt + everyMs - performance.now();
    if (wait <= 0) setImmediate(flush);
    else setTimeout(flush, wait);
  };
}

const migrate: Command = async ({ config }) => {
  const { migrateDatabase } = await import('../app.ts');
  const applied = await migrateDatabase(config, await quietLogger(config));
  process.stdout.write(applied.length ? `applied: ${applied.join(', ')}\n` : 'database is up to date\n');
  return 0;
};

export const serviceCommands: CliCommand[] = [
  {
    name: 'serve',
    usage: ['serve                         run the service (HTTP API and delivery workers)'],
    description: 'Runs what --role asks for: the HTTP API (--port), the delivery, webhook and mailbox workers, and the listeners that are configured (--bounce-port, --submission-port). With --role all and 2 or more cores it starts and supervises a delivery process and the API processes (--api-processes, by default one per other core, sharing --port; as many as the cores or more at a lower CPU priority than the delivery process) on the one database (--processes 1: everything in this process); --role api on SQLite starts one API process per core alone. Stops cleanly on SIGTERM or SIGINT. Creates the database and applies migrations at start.',
    run: serve,
  },
  {
    name: 'migrate',
    usage: ['migrate                       apply database migrations and exit'],
    description: 'Applies pending migrations to the database of --database-url (or --data) and prints what was applied. serve does the same at start; run it alone before a rolling upgrade.',
    run: migrate,
  },
];

// serve on more than one core (docs/operations.md, "Processes"): the command's own process becomes
// a supervisor that forks the API processes (--role api) and a delivery process (--role worker) on
// the same database, restarts one that dies, forwards SIGTERM/SIGINT for a graceful stop, relays
// the API processes' wake-ups to the delivery process (SQLite has no LISTEN/NOTIFY: without the
// relay the delivery process would find new mail only at its next poll), gathers the API
// processes' metrics (the delivery process's with them) for /metrics, and tells the API processes
// the delivery process's state for their /readyz, and kills and restarts a process that stops
// answering (the watchdog: --watchdog-ms).
//
// Several API processes share --port as Node's cluster shares it: this process holds the listening
// socket and hands each new connection to the next API process in turn (round robin; the kernel's
// own spreading leaves most connections with one process).
//
// Invariants: a child never outlives the supervisor (each child exits at once when its IPC channel
// closes, which happens however the supervisor ends, kill -9 included); a child that fails before
// it is ready ends the command with its exit code (a port in use, a bad database), so start-up
// errors are as visible as with one process; a child that is ready answers the supervisor's pings
// from its event loop, or is killed and restarted once --watchdog-ms has passed without an answer
// (docs/operations.md, "Processes").
import { fork, type ChildProcess } from 'node:child_process';
import cluster from 'node:cluster';
import { readdirSync } from 'node:fs';
import os from 'node:os';
import type { Config } from '../config.ts';
import type { WakeChannel } from '../domain/wake-channels.ts';
import { isPostgresUrl } from '../domain/database-url.ts';
import type { Logger } from 'pino';

export type ChildRole = 'api' | 'worker';

/** What a supervised child tells the supervisor, and what the supervisor relays. */
export type SupervisorMessage =
  | { type: 'ready'; role: ChildRole; url: string | null; background: string[] }
  | { type: 'wake'; channel: WakeChannel }
  // /metrics of one API process: the others' metrics (prom-client's getMetricsAsJSON), gathered here.
  | { type: 'metrics-request'; id: number }
  | { type: 'metrics-collect'; id: number }
  | { type: 'metrics-part'; id: number; metrics: unknown[] }
  | { type: 'metrics-parts'; id: number; parts: unknown[][] }
  // --rate-limit-per-key: the tokens one process took, by key, passed to the others (operations/rate-limits.ts).
  | { type: 'rate-taken'; taken: Array<[string, number]> }
  // To each API process, whenever it changes and when the API process is ready: the delivery
  // process's state as /readyz reports it (observability/readiness.ts, docs/operations.md "Health").
  | { type: 'delivery-state'; state: string }
  // The watchdog: every watchdogPingMs to each ready child, answered from its event loop.
  | { type: 'ping' }
  | { type: 'pong' };

/** The environment variable a supervised child is started with. */
export const SUPERVISED_ENV = 'POSTHORN_SUPERVISED';
/**
 * Set for every process of a serve with more than one: its /metrics gathers the others' too (the
 * delivery process's among them), so /metrics on --port is the whole service's, and it answers
 * their requests for its own.
 */
export const API_SIBLINGS_ENV = 'POSTHORN_API_SIBLINGS';
/**
 * Set for an API process beside a supervised delivery process on SQLite: it sends its wake-ups
 * here, to be relayed to that process. Only the delivery process listens for them (its jobs);
 * without one (--role api) they would go nowhere, at an IPC message every few milliseconds under
 * load, and on PostgreSQL they would double the NOTIFY the delivery process hears.
 */
export const WAKE_RELAY_ENV = 'POSTHORN_WAKE_RELAY';
/** How long /metrics waits for the other processes' parts (one that hangs does not answer; one that exits is not waited for). */
export const METRICS_GATHER_MS = 2000;

/**
 * Node's options for a child: the supervisor's own, and V8's young generation capped at 8 MiB
 * semi-spaces (Node's default on a large machine is 16), as the operator has not chosen one
 * (NODE_OPTIONS or the command line). The processes of one machine add up: with the default the
 * three held ~50 MiB more at peak under load (figure 7a of bench/, 473-490 against 417-437 MiB),
 * with no difference in throughput or CPU per message above the noise (docs/decisions/0003-performance.md).
 */
export function childExecArgv(): string[] {
  const chosen = [...process.execArgv, process.env.NODE_OPTIONS ?? ''].some((arg) => arg.includes('semi-space-size'));
  return chosen ? process.execArgv : [...process.execArgv, `--max-semi-space-size=${CHILD_SEMI_SPACE_MIB}`];
}
const CHILD_SEMI_SPACE_MIB = 8;

/**
 * The processes `serve` starts and supervises, or null to run in this one process:
 *
 * - --role all: split with 2 or more cores (--processes 2 on one, --processes 1 never) into a
 *   delivery process and the API processes, on SQLite and PostgreSQL alike (on PostgreSQL end to
 *   end +17% on 2 cores: docs/decisions/0003-performance.md, "PostgreSQL: serve splits too");
 * - --role api: the API processes alone, where there are more than one;
 * - --role worker: one process (more add nothing on one SQLite file; on PostgreSQL run several).
 *
 * API processes: --api-processes; by default on SQLite, with --role all one per core less one,
 * the delivery process's (a third process on 2 cores took ~110 MiB more and no more end to end:
 * docs/decisions/0003-performance.md, "Every core for accepting"), and with --role api one per core
 * (its worker is a service of its own, whose share of the cores its operator sets:
 * docs/operations.md, "Processes"). One on PostgreSQL (run more behind a load balancer).
 *
 * lowerApi: where serve starts the delivery process beside as many API processes as there are
 * cores or more, the API processes run at a lower CPU priority (API_NICENESS), so that the
 * delivery process keeps its core when both have work. With fewer (the default) they do not
 * crowd it, and run at its priority.
 *
 * relayWakes: API processes beside a supervised delivery process send their wake-ups through the
 * supervisor to it on SQLite, which has no LISTEN/NOTIFY; on PostgreSQL it hears their NOTIFY.
 */
export function planProcesses(config: Readonly<Config>): ProcessPlan | null {
  const postgres = isPostgresUrl(config.databaseUrl);
  const cores = os.availableParallelism();
  const api = config.apiProcesses ?? (postgres ? 1 : config.role === 'api' ? cores : Math.max(1, cores - 1));
  if (config.role === 'api') return api > 1 ? { api, worker: false, lowerApi: false, relayWakes: false } : null;
  if (config.role !== 'all' || config.processes === 1) return null;
  const split = config.processes === 2 || api > 1 || cores >= 2;
  return split ? { api, worker: true, lowerApi: api >= cores, relayWakes: !postgres } : null;
}

export interface ProcessPlan {
  api: number;
  worker: boolean;
  lowerApi: boolean;
  relayWakes: boolean;
}

/**
 * How many steps of niceness below the delivery process the API processes run where they are as
 * many as the cores (5: a weight about a third of the delivery process's). When only the API has
 * work it takes every core all the same; when both have, the delivery process gets its core and
 * the API processes share the others, as one API process per other core would.
 */
export const API_NICENESS = 5;

/**
 * Lowers the CPU priority of every thread of a process by `steps`. On Linux niceness belongs to
 * each thread, and setpriority(2) on a pid changes its main thread alone: so each thread of
 * /proc/PID/task (V8's, libuv's, the acceptance and checkpoint threads); a thread started later
 * takes the niceness of the thread that starts it. Elsewhere, the process as a whole.
 */
function lowerPriority(pid: number, steps: number): void {
  let threads: number[];
  try {
    threads = readdirSync(`/proc/${pid}/task`).map(Number);
  } catch {
    threads = [pid];
  }
  for (const thread of threads) {
    try {
      os.setPriority(thread, Math.min(19, os.getPriority(thread) + steps));
    } catch {
      // A thread that ended meanwhile.
    }
  }
}

/**
 * How often the supervisor pings each ready child for a watchdog of `watchdogMs`: a few times within
 * the bound (so one late answer is not a miss), at most every 5 s (60 s: every 5 s, twelve chances).
 */
export function watchdogPingMs(watchdogMs: number): number {
  return Math.max(100, Math.min(5_000, Math.floor(watchdogMs / 4)));
}

const RESTART_FIRST_MS = 500;
const RESTART_MAX_MS = 30_000;
/** A child up this long has its restart delay reset to the first. */
const HEALTHY_AFTER_MS = 60_000;

interface Slot {
  role: ChildRole;
  child: ChildProcess | null;
  ready: boolean;
  startedAt: number;
  restartDelayMs: number;
  /** how its last process ended ("exit code 1", "killed by SIGKILL") until its next one is ready */
  lastExit: string | null;
  /** when its process last answered a ping (or became ready), performance.now() */
  answeredAt: number;
  /** its process stopped answering and was killed by the watchdog: it is restarting, not running */
  silenced: boolean;
}

/**
 * A process's state as /readyz names it (docs/operations.md, "Health"): running once it said it is
 * ready; while it is not, restarting (and how the last one ended) after one ended, else starting;
 * stopping once the service stops.
 */
function describeChildState(slot: Pick<Slot, 'child' | 'ready' | 'lastExit' | 'silenced'>, stopping: boolean): string {
  if (stopping) return 'stopping';
  if (slot.child && slot.ready && !slot.silenced) return 'running';
  return slot.lastExit === null ? 'starting' : `restarting (${slot.lastExit})`;
}

export async function superviseServe(config: Readonly<Config>, plan: ProcessPlan, log: Logger): Promise<number> {
  // The supervisor loads none of the service (it stays a few tens of MiB). The first API process
  // starts first and applies the migrations (and is the first to log its url); the others start
  // once it is ready, so two processes never race to migrate one database.
  const roles: ChildRole[] = [...(plan.worker ? (['worker'] as const) : []), ...Array.from({ length: plan.api }, () => 'api' as const)];
  const slots: Slot[] = roles.map((role) => ({ role, child: null, ready: false, startedAt: 0, restartDelayMs: RESTART_FIRST_MS, lastExit: null, answeredAt: 0, silenced: false }));
  const firstApi = slots.find((s) => s.role === 'api')!;
  const shareApiPort = plan.api > 1;
  let stopping = false;
  let announced = false;
  let settle!: (code: number) => void;
  const finished = new Promise<number>((resolve) => (settle = resolve));
  let exitCode = 0;
  let apiUrl: string | null = null;
  let workerBackground: string[] = [];

  const childArgs = (role: ChildRole) => [
    ...process.argv.slice(2),
    // Appended: the last value of an option wins (config.ts).
    '--role', role, '--processes', '1', '--api-processes', '1',
    // The worker's operations listener on a free port: /healthz, /readyz and /metrics of the
    // service as a whole are on the API port, as with one process.
    ...(role === 'worker' ? ['--ops-port', '0'] : []),
  ];
  if (shareApiPort) {
    cluster.schedulingPolicy = cluster.SCHED_RR;
    cluster.setupPrimary({ exec: process.argv[1], args: childArgs('api'), execArgv: childExecArgv() });
  }

  const liveChildren = () => slots.flatMap((s) => (s.child ? [s.child] : []));
  // Only ready ones: a process still starting could not answer, and its share would be 0 anyway.
  const readyChildren = () => slots.flatMap((s) => (s.ready && s.child?.connected ? [s.child] : []));
  const restartTimers = new Set<NodeJS.Timeout>();
  /**
   * /metrics requests being gathered, by the supervisor's own id (two children may use the same
   * one), each with the API processes whose parts it still waits for.
   */
  const gathers = new Map<number, { requester: ChildProcess; requestId: number; parts: unknown[][]; waiting: Set<ChildProcess>; timer: NodeJS.Timeout }>();
  let gatherSequence = 0;
  // The delivery process's state, to the API processes that are ready (one that is not yet is told
  // when it is).
  const deliverySlot = slots.find((s) => s.role === 'worker');
  const tellDeliveryState = (to: readonly Slot[]) => {
    if (!deliverySlot) return;
    const message = { type: 'delivery-state', state: describeChildState(deliverySlot, stopping) } satisfies SupervisorMessage;
    for (const slot of to) if (slot.role === 'api' && slot.ready && slot.child?.connected) slot.child.send(message, () => {});
  };
  const sendParts = (id: number) => {
    const gather = gathers.get(id);
    if (!gather) return;
    gathers.delete(id);
    clearTimeout(gather.timer);
    if (gather.requester.connected) gather.requester.send({ type: 'metrics-parts', id: gather.requestId, parts: gather.parts } satisfies SupervisorMessage, () => {});
  };

  const start = (slot: Slot) => {
    const env = {
      ...process.env,
      [SUPERVISED_ENV]: '1',
      ...(slots.length > 1 ? { [API_SIBLINGS_ENV]: '1' } : {}),
      ...(plan.relayWakes && slot.role === 'api' ? { [WAKE_RELAY_ENV]: '1' } : {}),
    };
    let child: ChildProcess;
    if (shareApiPort && slot.role === 'api') {
      const worker = cluster.fork(env);
      // The cluster's Worker re-emits its process's errors (a connection handed to a process that
      // is going away): without a listener one would end the supervisor. Its 'exit' does the rest.
      worker.on('error', (error) => log.warn({ role: slot.role, err: error }, 'posthorn process channel error'));
      child = worker.process;
    } else {
      child = fork(process.argv[1], childArgs(slot.role), { env, execArgv: childExecArgv() });
    }
    slot.child = child;
    slot.ready = false;
    slot.silenced = false;
    slot.startedAt = Date.now();
    child.on('message', (raw) => {
      const message = raw as SupervisorMessage;
      if (message?.type === 'pong') {
        if (slot.child === child) slot.answeredAt = performance.now();
      } else if (message?.type === 'ready') {
        slot.ready = true;
        slot.lastExit = null;
        slot.answeredAt = performance.now();
        tellDeliveryState(slot.role === 'worker' ? slots : [slot]);
        // Once it is ready, so that every thread it starts with is there to be lowered.
        if (slot.role === 'api' && plan.lowerApi && child.pid !== undefined) lowerPriority(child.pid, API_NICENESS);
        if (slot === firstApi) apiUrl = message.url;
        if (message.role === 'worker') workerBackground = message.background;
        if (slot === firstApi && !announced && !stopping) for (const other of slots) if (!other.child) start(other);
        if (!announced && slots.every((s) => s.ready)) {
          announced = true;
          log.info({ url: apiUrl, role: config.role, background: workerBackground, processes: slots.map((s) => ({ role: s.role, pid: s.child?.pid })) }, 'posthorn is running');
        } else if (announced) {
          log.info({ role: slot.role, pid: child.pid }, 'posthorn process restarted');
        }
      } else if (message?.type === 'wake') {
        // To the delivery process, the only one that listens. It may be going away while the wake
        // is relayed (EPIPE): it is restarted and claims on start, so the wake is not needed
        // there; the callback keeps the error off the child's 'error' event.
        for (const other of slots) if (other.role === 'worker' && other.child?.connected) other.child.send(message, () => {});
      } else if (message?.type === 'rate-taken') {
        for (const other of slots) if (other.child && other.child !== child && other.ready && other.child.connected) other.child.send(message, () => {});
      } else if (message?.type === 'metrics-request') {
        const id = ++gatherSequence;
        const others = readyChildren().filter((other) => other !== child);
        gathers.set(id, { requester: child, requestId: message.id, parts: [], waiting: new Set(others), timer: setTimeout(() => sendParts(id), METRICS_GATHER_MS) });
        if (others.length === 0) sendParts(id);
        for (const other of others) other.send({ type: 'metrics-collect', id } satisfies SupervisorMessage, () => {});
      } else if (message?.type === 'metrics-part') {
        const gather = gathers.get(message.id);
        if (!gather || !gather.waiting.delete(child)) return;
        gather.parts.push(message.metrics);
        if (gather.waiting.size === 0) sendParts(message.id);
      }
    });
    // Failing to fork, or a message to a child that just died: its 'exit' (if any) does the rest.
    child.on('error', (error) => log.warn({ role: slot.role, err: error }, 'posthorn process channel error'));
    child.once('exit', (code, signal) => {
      slot.child = null;
      slot.ready = false;
      slot.lastExit = slot.silenced ? 'not answering' : code !== null ? `exit code ${code}` : `killed by ${signal}`;
      if (slot === deliverySlot) tellDeliveryState(slots);
      // A gather waits for no part of a process that has gone (its /metrics is answered with the
      // others' at once, not after METRICS_GATHER_MS), and answers no process that has gone.
      for (const [id, gather] of gathers) {
        if (gather.requester === child) {
          clearTimeout(gather.timer);
          gathers.delete(id);
        } else if (gather.waiting.delete(child) && gather.waiting.size === 0) sendParts(id);
      }
      if (stopping) {
        if (code !== 0 && code !== null) exitCode = code;
        if (liveChildren().length === 0) settle(exitCode);
        return;
      }
      if (!slot.ready && !announced) {
        // Failed while starting: the command fails as one process would.
        log.error({ role: slot.role, code, signal }, 'a posthorn process failed to start');
        exitCode = code ?? 1;
        stopAll();
        return;
      }
      const upMs = Date.now() - slot.startedAt;
      if (upMs > HEALTHY_AFTER_MS) slot.restartDelayMs = RESTART_FIRST_MS;
      log.error({ role: slot.role, code, signal, restartInMs: slot.restartDelayMs }, 'a posthorn process exited; restarting it');
      const delay = slot.restartDelayMs;
      slot.restartDelayMs = Math.min(RESTART_MAX_MS, slot.restartDelayMs * 2);
      const timer = setTimeout(() => {
        restartTimers.delete(timer);
        if (!stopping) start(slot);
      }, delay);
      restartTimers.add(timer);
    });
  };

  /**
   * The watchdog (--watchdog-ms): every ready child is pinged, and answers from its event loop; one
   * that has not answered for watchdogMs (stopped, its event loop blocked, wedged in a native call)
   * delivers and answers nothing, and nothing else would notice: /readyz on --port stays ready by
   * design. It is logged once and killed; its 'exit' restarts it as any dead child. A supervisor
   * that was itself held up (stopped, the machine suspended) judges no one for that time: the
   * answers it could not read were not missed.
   */
  const watchdogMs = config.watchdogMs;
  const pingEveryMs = watchdogPingMs(watchdogMs);
  let lastTickAt = performance.now();
  const watchdog = watchdogMs > 0 ? setInterval(() => {
    const now = performance.now();
    const heldUp = now - lastTickAt > pingEveryMs + watchdogMs / 2;
    lastTickAt = now;
    if (stopping) return;
    for (const slot of slots) {
      const child = slot.child;
      if (!child || !slot.ready || slot.silenced || !child.connected) continue;
      if (heldUp) slot.answeredAt = now;
      const silentMs = now - slot.answeredAt;
      if (silentMs < watchdogMs) {
        child.send({ type: 'ping' } satisfies SupervisorMessage, () => {});
        continue;
      }
      slot.silenced = true;
      slot.lastExit = 'not answering';
      log.warn({ role: slot.role, pid: child.pid, silentMs: Math.round(silentMs), watchdogMs }, 'a posthorn process stopped answering; killing it to restart it');
      if (slot === deliverySlot) tellDeliveryState(slots);
      child.kill('SIGKILL');
    }
  }, pingEveryMs) : null;
  watchdog?.unref();

  const stopAll = () => {
    if (stopping) return;
    stopping = true;
    tellDeliveryState(slots);
    for (const timer of restartTimers) clearTimeout(timer);
    const live = liveChildren();
    if (live.length === 0) settle(exitCode);
    for (const child of live) child.kill('SIGTERM');
  };
  const onSignal = (signal: NodeJS.Signals) => {
    log.info({ signal }, 'shutting down');
    stopAll();
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  start(firstApi);
  try {
    return await finished;
  } finally {
    if (watchdog) clearInterval(watchdog);
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
    for (const gather of gathers.values()) clearTimeout(gather.timer);
  }
}

// serve on more than one core (docs/operations.md, "Processes"): the command's own process becomes
// a supervisor that forks an API process (--role api) and a delivery process (--role worker) on
// the same database, restarts one that dies, forwards SIGTERM/SIGINT for a graceful stop, and
// relays wake-ups between them (SQLite has no LISTEN/NOTIFY: without the relay the delivery
// process would find new mail only at its next poll).
//
// Invariants: a child never outlives the supervisor (each child exits at once when its IPC channel
// closes, which happens however the supervisor ends, kill -9 included); a child that fails before
// it is ready ends the command with its exit code (a port in use, a bad database), so start-up
// errors are as visible as with one process.
import { fork, type ChildProcess } from 'node:child_process';
import os from 'node:os';
import type { Config } from '../config.ts';
import type { WakeChannel } from '../domain/wake-channels.ts';
import type { Logger } from 'pino';

export type ChildRole = 'api' | 'worker';

/** What a supervised child tells the supervisor, and what the supervisor relays. */
export type SupervisorMessage =
  | { type: 'ready'; role: ChildRole; url: string | null; background: string[] }
  | { type: 'wake'; channel: WakeChannel };

/** The environment variable a supervised child is started with. */
export const SUPERVISED_ENV = 'POSTHORN_SUPERVISED';

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

/** How many processes `serve` runs: the option, else 2 for --role all on SQLite with 2+ cores. */
export function chooseProcessCount(config: Readonly<Config>): number {
  if (config.role !== 'all') return 1;
  if (config.processes !== null) return config.processes;
  const postgres = config.databaseUrl !== null && /^postgres(ql)?:\/\//i.test(config.databaseUrl);
  return !postgres && os.availableParallelism() >= 2 ? 2 : 1;
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
}

export async function superviseServe(config: Readonly<Config>, log: Logger): Promise<number> {
  // The supervisor loads none of the service (it stays a few tens of MiB). The API process
  // starts first and applies the migrations (and is the first to log its url); the delivery
  // process starts once it is ready, so two processes never race to migrate one database.
  const slots: Slot[] = (['worker', 'api'] as const).map((role) => ({ role, child: null, ready: false, startedAt: 0, restartDelayMs: RESTART_FIRST_MS }));
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
    '--role', role, '--processes', '1',
    // The worker's operations listener on a free port: /healthz, /readyz and /metrics of the
    // service as a whole are on the API port, as with one process.
    ...(role === 'worker' ? ['--ops-port', '0'] : []),
  ];

  const liveChildren = () => slots.flatMap((s) => (s.child ? [s.child] : []));

  const start = (slot: Slot) => {
    const child = fork(process.argv[1], childArgs(slot.role), { env: { ...process.env, [SUPERVISED_ENV]: '1' }, execArgv: childExecArgv() });
    slot.child = child;
    slot.ready = false;
    slot.startedAt = Date.now();
    child.on('message', (raw) => {
      const message = raw as SupervisorMessage;
      if (message?.type === 'ready') {
        slot.ready = true;
        if (message.role === 'api') apiUrl = message.url;
        if (message.role === 'worker') workerBackground = message.background;
        const worker = slots.find((s) => s.role === 'worker')!;
        if (message.role === 'api' && !worker.child && !announced && !stopping) start(worker);
        if (!announced && slots.every((s) => s.ready)) {
          announced = true;
          log.info({ url: apiUrl, role: 'all', background: workerBackground, processes: slots.map((s) => ({ role: s.role, pid: s.child?.pid })) }, 'posthorn is running');
        } else if (announced) {
          log.info({ role: slot.role, pid: child.pid }, 'posthorn process restarted');
        }
      } else if (message?.type === 'wake') {
        // A child may be going away while the wake is relayed (EPIPE): it is restarted and
        // claims on start, so the wake is not needed there; the callback keeps the error off the
        // child's 'error' event.
        for (const other of liveChildren()) if (other !== child && other.connected) other.send(message, () => {});
      }
    });
    // Failing to fork, or a message to a child that just died: its 'exit' (if any) does the rest.
    child.on('error', (error) => log.warn({ role: slot.role, err: error }, 'posthorn process channel error'));
    child.once('exit', (code, signal) => {
      slot.child = null;
      slot.ready = false;
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
      setTimeout(() => {
        if (!stopping) start(slot);
      }, delay);
    });
  };

  const stopAll = () => {
    if (stopping) return;
    stopping = true;
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
  start(slots.find((s) => s.role === 'api')!);
  try {
    return await finished;
  } finally {
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
  }
}

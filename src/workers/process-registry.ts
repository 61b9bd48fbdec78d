// This process in the registry of live workers (docs/decisions/0008-lease-runner.md; the rule of
// death: docs/reliability.md, "When a process is dead").
//
//   register      one row: id (what every claim of this process is locked_by), host (hostname, boot
//                 and pid namespace), pid and the pid's start time
//   heartbeat     every HEARTBEAT_MS; a missing row (another process presumed us dead and released
//                 our claims) is re-inserted: what we still hold fails its lease guards, and the lease
//                 runner's fence (UnitContext.stillHeld) keeps us from sending it
//   reap          at start and after every heartbeat. On this host a process is dead when its pid is
//                 gone, or now names another process (another start time), or a zombie: seen at once,
//                 whatever its heartbeat, so a process that is only slow (a long stall of its event
//                 loop, SIGSTOP, a loaded machine) is never declared dead by its neighbours, and a
//                 restart, or a sibling on the same host, resumes a SIGKILLed process's work within one
//                 heartbeat. On another host only the heartbeat tells: dead when this process has
//                 watched its heartbeat stay the same for DEAD_AFTER_MS (its own monotonic time, so
//                 the hosts' clocks need not agree, and an outage of the database, during which no
//                 one beats, starts the watch again). The release is guarded by the heartbeat seen
//                 (storage/worker-processes.ts), the jobs woken.
//   fresh/confirm what the lease runner asks before an irreversible step: whether no other process
//   lives         can have presumed us dead since our last heartbeat (recorded less than
//                 DEAD_AFTER_MS / 2 ago), and, when that is not so, a heartbeat now; and how many
//                 times we found ourselves presumed dead (a claim older than the last time is
//                 confirmed against the database before it is trusted)
//   unregister    at a graceful stop, after the jobs gave their claims back
//
// While the database is away the heartbeat fails quietly (the jobs log the outage); the registry
// resumes when it returns.
import fs from 'node:fs';
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import { generateWorkerId } from '../domain/keys.ts';
import type { ProcessLiveness, Services } from '../services.ts';
import { isStoreUnavailable } from '../storage/store.ts';
import { listWorkerProcesses, recordHeartbeat, registerWorkerProcess, releaseClaimsOf, unregisterWorkerProcess, type DeadProcess, type WorkerProcess } from '../storage/worker-processes.ts';

/** How often a live process says so. */
export const HEARTBEAT_MS = 2000;
/** A process on another host whose heartbeat stays the same this long is dead. */
export const DEAD_AFTER_MS = 10_000;

export interface RegistryOptions {
  heartbeatMs?: number;
  deadAfterMs?: number;
  /** the host identity recorded and compared (tests stand for a process on another host) */
  host?: string;
}

export class ProcessRegistry implements ProcessLiveness {
  readonly name = 'registry';
  /** the id this process's claims are locked_by */
  readonly id = generateWorkerId();
  private readonly host: string;
  private readonly heartbeatMs: number;
  private readonly deadAfterMs: number;
  private timer: NodeJS.Timeout | null = null;
  private beating: Promise<boolean> | null = null;
  private stopped = false;
  private failing = false;
  /** why the last heartbeat failed, while it is failing */
  private failure: unknown = null;
  /** the last heartbeat value written (it only grows: a changed value is a new heartbeat) */
  private heartbeatAt = 0;
  /**
   * When (performance.now()) the last heartbeat was known recorded. A process on another host
   * releases our claims only after watching a heartbeat of ours stay the same for DEAD_AFTER_MS,
   * and only if it is still the one it watched: none can have done so for a while after this.
   */
  private confirmedAt = -Infinity;
  /** how many times a heartbeat found this process presumed dead */
  private presumedDead = 0;
  /** Other processes' heartbeats as this one last saw them, and since when (performance.now()). */
  private readonly seen = new Map<string, { heartbeatAt: number; since: number }>();

  constructor(
    private readonly services: Services,
    options: RegistryOptions = {},
  ) {
    this.heartbeatMs = options.heartbeatMs ?? HEARTBEAT_MS;
    this.deadAfterMs = options.deadAfterMs ?? DEAD_AFTER_MS;
    this.host = options.host ?? hostIdentity();
  }

  async start(): Promise<void> {
    await this.register();
    // Before any job claims: a restart releases its dead predecessor's work first.
    await this.reap();
    this.timer = setInterval(() => void this.beat(), this.heartbeatMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    await this.beating;
    await this.services.store.write((trx) => unregisterWorkerProcess(trx, this.id)).catch(() => {});
  }

  /** Whether no process can have presumed this one dead since its last heartbeat (ProcessLiveness). */
  fresh(): boolean {
    return performance.now() - this.confirmedAt < this.deadAfterMs / 2;
  }

  /** ProcessLiveness.lives. */
  lives(): number {
    return this.presumedDead;
  }

  /**
   * A heartbeat now (or the one in progress); resolves to false when this process had been presumed
   * dead (its claims were released; it is registered again), true otherwise. Throws when the
   * database is away: nothing is confirmed then.
   */
  async confirm(): Promise<boolean> {
    const alive = await this.beat();
    if (this.failing) throw this.failure;
    return alive;
  }

  private nextHeartbeat(): number {
    this.heartbeatAt = Math.max(Date.now(), this.heartbeatAt + 1);
    return this.heartbeatAt;
  }

  private async register(): Promise<void> {
    const now = this.nextHeartbeat();
    const row = { id: this.id, host: this.host, pid: process.pid, pid_start: processStart(process.pid)?.start ?? null, started_at: now, heartbeat_at: now };
    await this.services.store.write((trx) => registerWorkerProcess(trx, row));
    this.confirmedAt = performance.now();
  }

  /**
   * One heartbeat and one look for dead processes; never overlapping, never throwing. Resolves to
   * false when the heartbeat found this process presumed dead.
   */
  beat(): Promise<boolean> {
    this.beating ??= (async () => {
      let alive = true;
      try {
        const at = this.nextHeartbeat();
        alive = await this.services.store.write((trx) => recordHeartbeat(trx, this.id, at));
        if (alive) this.confirmedAt = performance.now();
        else if (!this.stopped) {
          this.presumedDead++;
          this.services.log.warn({ worker: this.id }, 'this process was presumed dead (no heartbeat recorded for a while); registering again');
          await this.register();
        }
        await this.reap();
        if (this.failing) this.services.log.info('worker registry: heartbeat recorded again');
        this.failing = false;
        this.failure = null;
      } catch (error) {
        if (!this.failing && !this.stopped) {
          this.services.log.warn({ err: isStoreUnavailable(error) ? { message: (error as Error).message } : error }, 'worker registry: heartbeat failed; retrying');
        }
        this.failing = true;
        this.failure = error;
        // Heartbeats seen before the gap prove nothing about silence across it: no one could beat.
        this.seen.clear();
      } finally {
        this.beating = null;
      }
      return alive;
    })();
    return this.beating;
  }

  /** Releases the claims of every process seen dead; returns the ids of those forgotten. */
  async reap(): Promise<string[]> {
    const { store, clock, log } = this.services;
    let processes: WorkerProcess[];
    try {
      processes = await listWorkerProcesses(store.db);
    } catch (error) {
      this.seen.clear();
      throw error;
    }
    const now = performance.now();
    const listed = new Set<string>();
    const dead: DeadProcess[] = [];
    for (const p of processes) {
      listed.add(p.id);
      if (p.id === this.id) continue;
      let seen = this.seen.get(p.id);
      if (!seen || seen.heartbeatAt !== p.heartbeat_at) this.seen.set(p.id, (seen = { heartbeatAt: p.heartbeat_at, since: now }));
      if (this.isDead(p, now - seen.since)) dead.push({ id: p.id, heartbeat_at: p.heartbeat_at });
    }
    for (const id of this.seen.keys()) if (!listed.has(id)) this.seen.delete(id);
    if (dead.length === 0) return [];
    const released = await store.write((trx) => releaseClaimsOf(trx, dead, clock.now()));
    if (released.processes.length === 0) return [];
    log.warn({ processes: released.processes, released: { transmissions: released.transmissions, outbound: released.outbound, mailboxes: released.mailboxes } }, 'released the claims of dead worker processes');
    if (released.transmissions > 0) store.wake('transmissions');
    if (released.outbound > 0) store.wake('outbound');
    if (released.mailboxes > 0) store.wake('mailboxes');
    return released.processes;
  }

  /** @param silentMs how long this process has seen the other's heartbeat stay the same */
  private isDead(p: WorkerProcess, silentMs: number): boolean {
    // On this host the kernel knows: alive however old the heartbeat (a stall, SIGSTOP).
    if (p.host === this.host) return !isProcessAlive(p.pid, p.pid_start);
    return silentMs >= this.deadAfterMs;
  }
}

/**
 * The host as far as pids go: the hostname, the boot (a pid seen before a reboot names nothing now)
 * and the pid namespace. Containers sharing a hostname (host networking) have their own pid
 * namespaces, so a pid seen there is never looked up here.
 */
export function hostIdentity(): string {
  let namespace = '';
  let boot = '';
  try {
    namespace = fs.readlinkSync('/proc/self/ns/pid');
    boot = fs.readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
  } catch {
    // No /proc (not Linux): the hostname alone.
  }
  return [os.hostname(), boot, namespace].filter(Boolean).join(' ');
}

/**
 * A process's start time (clock ticks since boot) and state letter, from /proc/<pid>/stat; null
 * when it cannot be read (no such process, no /proc, or another user's under hidepid).
 */
export function processStart(pid: number): { start: number; state: string } | null {
  let stat: string;
  try {
    stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return null;
  }
  // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so read after the last ')'.
  // After it, the state is the 3rd field and the start time the 22nd.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const start = Number(fields[19]);
  return Number.isSafeInteger(start) ? { start, state: fields[0] } : null;
}

/**
 * Whether the registered process runs on this host: its pid exists (EPERM: it does, as another
 * user), is not a zombie (dead, not yet reaped by its parent), and, where its start time was
 * recorded, started then (else the pid was reused by another process).
 */
export function isProcessAlive(pid: number, pidStart: number | null): boolean {
  if (pid === process.pid) return true;
  try {
    process.kill(pid, 0);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  const stat = processStart(pid);
  // Exists but unreadable: nothing says it is another process.
  if (!stat) return true;
  if (stat.state === 'Z' || stat.state === 'X') return false;
  return pidStart === null || stat.start === pidStart;
}

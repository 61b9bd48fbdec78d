// This process in the registry of live workers (docs/decisions/0008-lease-runner.md).
//
//   register      one row: id (what every claim of this process is locked_by), host, pid
//   heartbeat     every HEARTBEAT_MS; a missing row (another process presumed us dead and released
//                 our claims) is re-inserted: what we still hold fails its lease guards, at worst a
//                 re-send of what was in flight, as with any crash
//   reap          at start and after every heartbeat: a process is dead when its heartbeat is older
//                 than DEAD_AFTER_MS, or when it ran on this host and its pid is gone (seen at once,
//                 so a restart, or a sibling on the same host, resumes a SIGKILLed process's work
//                 within one heartbeat). Its claims are released (storage/worker-processes.ts) and
//                 the jobs woken.
//   unregister    at a graceful stop, after the jobs gave their claims back
//
// While the database is away the heartbeat fails quietly (the jobs log the outage); the registry
// resumes when it returns.
import fs from 'node:fs';
import os from 'node:os';
import { generateWorkerId } from '../domain/keys.ts';
import type { Services } from '../services.ts';
import { isStoreUnavailable } from '../storage/store.ts';
import { listWorkerProcesses, recordHeartbeat, registerWorkerProcess, releaseClaimsOf, unregisterWorkerProcess, type WorkerProcess } from '../storage/worker-processes.ts';

/** How often a live process says so. */
export const HEARTBEAT_MS = 2000;
/** A process silent this long is dead (covers other hosts; same-host deaths are seen by pid). */
export const DEAD_AFTER_MS = 10_000;

export interface RegistryOptions {
  heartbeatMs?: number;
  deadAfterMs?: number;
}

export class ProcessRegistry {
  readonly name = 'registry';
  /** the id this process's claims are locked_by */
  readonly id = generateWorkerId();
  private readonly host = hostIdentity();
  private readonly heartbeatMs: number;
  private readonly deadAfterMs: number;
  private timer: NodeJS.Timeout | null = null;
  private beating: Promise<void> | null = null;
  private stopped = false;
  private failing = false;
  /**
   * Since when this process's heartbeats have gone through without a gap. Silence is evidence of
   * death only once we have been connected for DEAD_AFTER_MS ourselves: after an outage every
   * process's heartbeat is old, and none of them is dead.
   */
  private connectedSince = Date.now();

  constructor(
    private readonly services: Services,
    options: RegistryOptions = {},
  ) {
    this.heartbeatMs = options.heartbeatMs ?? HEARTBEAT_MS;
    this.deadAfterMs = options.deadAfterMs ?? DEAD_AFTER_MS;
  }

  async start(): Promise<void> {
    this.connectedSince = Date.now();
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

  private async register(): Promise<void> {
    const now = Date.now();
    const row: WorkerProcess = { id: this.id, host: this.host, pid: process.pid, started_at: now, heartbeat_at: now };
    await this.services.store.write((trx) => registerWorkerProcess(trx, row));
  }

  /** One heartbeat and one look for dead processes; never overlapping, never throwing. */
  beat(): Promise<void> {
    this.beating ??= (async () => {
      try {
        const alive = await this.services.store.write((trx) => recordHeartbeat(trx, this.id, Date.now()));
        if (this.failing) this.connectedSince = Date.now();
        if (!alive && !this.stopped) {
          this.services.log.warn({ worker: this.id }, 'this process was presumed dead (no heartbeat recorded for a while); registering again');
          await this.register();
        }
        await this.reap();
        if (this.failing) {
          this.services.log.info('worker registry: heartbeat recorded again');
          this.connectedSince = Date.now();
        }
        this.failing = false;
      } catch (error) {
        if (!this.failing && !this.stopped) {
          this.services.log.warn({ err: isStoreUnavailable(error) ? { message: (error as Error).message } : error }, 'worker registry: heartbeat failed; retrying');
        }
        this.failing = true;
      } finally {
        this.beating = null;
      }
    })();
    return this.beating;
  }

  /** Releases the claims of every process seen dead; returns their ids. */
  async reap(): Promise<string[]> {
    const { store, clock, log } = this.services;
    const processes = await listWorkerProcesses(store.db);
    const now = Date.now();
    const dead = processes.filter((p) => p.id !== this.id && this.isDead(p, now)).map((p) => p.id);
    if (dead.length === 0) return [];
    const released = await store.write((trx) => releaseClaimsOf(trx, dead, clock.now()));
    log.warn({ processes: dead, released }, 'released the claims of dead worker processes');
    if (released.transmissions > 0) store.wake('transmissions');
    if (released.outbound > 0) store.wake('outbound');
    if (released.mailboxes > 0) store.wake('mailboxes');
    return dead;
  }

  private isDead(p: WorkerProcess, now: number): boolean {
    if (now - p.heartbeat_at > this.deadAfterMs && now - this.connectedSince >= this.deadAfterMs) return true;
    return p.host === this.host && !isPidAlive(p.pid);
  }
}

/**
 * The host as far as pids go: the hostname and the pid namespace. Containers sharing a hostname
 * (host networking) have their own pid namespaces, so a pid seen there is never looked up here.
 */
export function hostIdentity(): string {
  let namespace = '';
  try {
    namespace = fs.readlinkSync('/proc/self/ns/pid');
  } catch {
    // No /proc (not Linux): the hostname alone.
  }
  return namespace ? `${os.hostname()} ${namespace}` : os.hostname();
}

/** Whether a process with this pid runs on this host (EPERM: it does, as another user). */
function isPidAlive(pid: number): boolean {
  if (pid === process.pid) return true;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

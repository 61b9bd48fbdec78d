// Child processes of the bench: every one is registered so that a failure, Ctrl-C or a timeout
// still ends it. Each cleanup runs once, newest first (a relay stops before the sink it feeds).
import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';

type Cleanup = { name: string; run: () => Promise<void> | void };

const cleanups: Cleanup[] = [];

/** Registers a cleanup; returns a function that runs it now (and unregisters it). */
export function onCleanup(name: string, run: () => Promise<void> | void): () => Promise<void> {
  const entry: Cleanup = { name, run };
  cleanups.push(entry);
  return async () => {
    const i = cleanups.indexOf(entry);
    if (i === -1) return;
    cleanups.splice(i, 1);
    await entry.run();
  };
}

export async function runAllCleanups(): Promise<void> {
  while (cleanups.length > 0) {
    const entry = cleanups.pop()!;
    try {
      await entry.run();
    } catch (error) {
      process.stderr.write(`bench: cleanup "${entry.name}" failed: ${(error as Error).message}\n`);
    }
  }
}

let signalsHooked = false;
/** Ctrl-C / SIGTERM: clean up, then exit non-zero. */
export function hookSignals(): void {
  if (signalsHooked) return;
  signalsHooked = true;
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      process.stderr.write(`\nbench: ${signal}, cleaning up\n`);
      void runAllCleanups().finally(() => process.exit(130));
    });
  }
}

/** A free TCP port on 127.0.0.1 (for programs that cannot listen on port 0 and report it). */
export function findFreePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

export interface Spawned {
  child: ChildProcess;
  /** resolves with the exit code (or null when killed by a signal) */
  exited: Promise<number | null>;
  /** SIGTERM, then SIGKILL after graceMs; resolves when the process is gone */
  stop(graceMs?: number): Promise<void>;
}

/** Spawns a registered child: it is killed at cleanup if still running. */
export function spawnChild(name: string, command: string, args: string[], opts: SpawnOptions = {}): Spawned {
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'], ...opts });
  let exitCode: number | null | undefined;
  const exited = new Promise<number | null>((resolve) => {
    child.once('exit', (code) => {
      exitCode = code;
      resolve(code);
    });
    child.once('error', (error) => {
      process.stderr.write(`bench: ${name} failed to start: ${error.message}\n`);
      exitCode = -1;
      resolve(-1);
    });
  });
  const stop = async (graceMs = 10_000): Promise<void> => {
    if (exitCode !== undefined) return;
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
    await exited;
    clearTimeout(timer);
  };
  const release = onCleanup(name, () => stop(3000));
  void exited.then(() => release());
  return { child, exited, stop };
}

/** Runs a command to completion within timeoutMs; collects stdout and stderr. */
export async function runCommand(
  command: string,
  args: string[],
  opts: SpawnOptions & { timeoutMs: number },
): Promise<{ code: number | null; stdout: string; stderr: string; elapsedMs: number }> {
  const started = performance.now();
  const spawned = spawnChild(command, command, args, opts);
  let stdout = '';
  let stderr = '';
  spawned.child.stdout?.setEncoding('utf8').on('data', (d: string) => (stdout += d));
  spawned.child.stderr?.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  const timer = setTimeout(() => {
    stderr += `\n(bench: killed after ${opts.timeoutMs} ms)`;
    void spawned.stop(1000);
  }, opts.timeoutMs);
  const code = await spawned.exited;
  clearTimeout(timer);
  return { code, stdout, stderr, elapsedMs: performance.now() - started };
}

/** Resident set size and its high-water mark of a process, in MiB (Linux /proc). */
export function readRssMiB(pid: number): { rss: number; peak: number } | null {
  try {
    const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN);
    return { rss: kb('VmRSS') / 1024, peak: kb('VmHWM') / 1024 };
  } catch {
    return null;
  }
}

/** The children of a process (one level), from /proc. */
export function listChildPids(parentPid: number): number[] {
  const out: number[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
      // the command name may contain spaces: the fields after the closing parenthesis are fixed
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === parentPid) out.push(Number(entry));
    } catch {
      // the process ended while we looked
    }
  }
  return out;
}

/**
 * CPU time (user + system) a process has used so far, in seconds (Linux /proc, 100 ticks/s); with
 * reapedChildren, plus the time of its children that have exited and been waited for.
 */
export function readCpuSeconds(pid: number, reapedChildren = false): number | null {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // fields[11..14] are utime, stime, cutime, cstime (fields 14 to 17 of proc(5), counted from 1)
    const own = Number(fields[11]) + Number(fields[12]);
    return (own + (reapedChildren ? Number(fields[13]) + Number(fields[14]) : 0)) / 100;
  } catch {
    return null;
  }
}

/**
 * Scheduler accounting of a process's main thread (/proc/PID/schedstat): nanoseconds on a CPU and
 * nanoseconds runnable but waiting for one. On a shared machine the second says how much of a
 * figure's wall time the thread lost to other processes.
 */
export function readSchedstat(pid: number): { runNs: number; waitNs: number } | null {
  try {
    const [run, wait] = fs.readFileSync(`/proc/${pid}/schedstat`, 'utf8').trim().split(/\s+/).map(Number);
    return { runNs: run, waitNs: wait };
  } catch {
    return null;
  }
}

/** Shares of wall time of a process's main thread between two readSchedstat() calls. */
export function describeSchedDelta(
  before: { runNs: number; waitNs: number } | null,
  after: { runNs: number; waitNs: number } | null,
  wallMs: number,
): { running: number; waitingForCpu: number; text: string } {
  if (!before || !after || wallMs <= 0) return { running: NaN, waitingForCpu: NaN, text: 'main thread: n/a' };
  const running = (after.runNs - before.runNs) / 1e6 / wallMs;
  const waitingForCpu = (after.waitNs - before.waitNs) / 1e6 / wallMs;
  const rest = Math.max(0, 1 - running - waitingForCpu);
  return {
    running,
    waitingForCpu,
    text: `main thread ${(running * 100).toFixed(0)}% on a CPU, ${(waitingForCpu * 100).toFixed(0)}% waiting for one, ${(rest * 100).toFixed(0)}% idle or blocked in I/O`,
  };
}

/** Proportional set size of a process in MiB: shared pages divided among their sharers. */
export function readPssMiB(pid: number): number | null {
  try {
    const rollup = fs.readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8');
    const kb = Number(/^Pss:\s+(\d+) kB/m.exec(rollup)?.[1] ?? NaN);
    return Number.isFinite(kb) ? kb / 1024 : null;
  } catch {
    return null;
  }
}

/**
 * Samples the summed PSS of a set of processes every intervalMs; stop() returns the peak in MiB.
 * PSS, not RSS: a multi-process server's processes share most of their pages (libraries, the
 * binary), which summed RSS would count once per process.
 */
export function sampleRss(pids: () => number[], intervalMs = 100): { stop(): number } {
  let peak = 0;
  const tick = () => {
    let sum = 0;
    for (const pid of pids()) sum += readPssMiB(pid) ?? readRssMiB(pid)?.rss ?? 0;
    if (sum > peak) peak = sum;
  };
  tick();
  const timer = setInterval(tick, intervalMs);
  return {
    stop() {
      clearInterval(timer);
      tick();
      return peak;
    },
  };
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Polls until check() returns a value other than undefined, or throws after timeoutMs. */
export async function waitUntil<T>(what: string, check: () => T | undefined | Promise<T | undefined>, timeoutMs: number, everyMs = 50): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(everyMs);
  }
}

/**
 * CPU seconds used by the PostgreSQL backends serving one database (by their process title), sampled every intervalMs: a backend that ends mid-run counts
 * up to its last sample, one that starts counts from its start. The server's shared processes (WAL
 * writer, checkpointer...) serve every database on the machine and are not counted. stop() returns
 * the seconds used since the sampler started.
 */
export function samplePostgresBackends(database: string, intervalMs = 200): { stop(): number } {
  const first = new Map<number, number>();
  const last = new Map<number, number>();
  const tick = () => {
    for (const entry of fs.readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      const pid = Number(entry);
      try {
        if (!last.has(pid)) {
          const title = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8');
          // `postgres: [CLUSTER: ]USER DATABASE HOST(PORT) ACTIVITY` (Debian prefixes the cluster, `15/main:`)
          if (/^postgres: (?:\S+: )?\S+ (\S+) /.exec(title)?.[1] !== database) continue;
        }
        const cpu = readCpuSeconds(pid);
        if (cpu === null) continue;
        if (!first.has(pid)) first.set(pid, started ? 0 : cpu);
        last.set(pid, cpu);
      } catch {
        // the process ended while we looked
      }
    }
  };
  let started = false;
  tick();
  started = true;
  const timer = setInterval(tick, intervalMs);
  return {
    stop() {
      clearInterval(timer);
      tick();
      let sum = 0;
      for (const [pid, cpu] of last) sum += cpu - (first.get(pid) ?? 0);
      return sum;
    },
  };
}

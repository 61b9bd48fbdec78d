// Posthorn as a user runs it: `node bin/posthorn.js serve ...` in a child process (so its RSS and
// CPU profile are its own), keys from `posthorn init --json`, load over HTTP with autocannon.
import autocannon from 'autocannon';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { onCleanup, readCpuSeconds, readRssMiB, readSchedstat, runCommand, spawnChild, type Spawned } from './processes.ts';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const BIN = path.join(ROOT, 'bin', 'posthorn.js');

/** The recipient domain of every bench message; the transport map sends it to smtp-sink. */
export const RECIPIENT_DOMAIN = 'bench.local';

export interface Instance {
  dataDir: string;
  /** DATABASE_URL, or null for the SQLite default under dataDir */
  databaseUrl: string | null;
  projectKey: string;
}

function env(databaseUrl: string | null): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = { ...process.env };
  if (databaseUrl) out.DATABASE_URL = databaseUrl;
  else delete out.DATABASE_URL;
  return out;
}

/** A fresh data directory (removed at cleanup) and `posthorn init --json` in it. */
export async function createInstance(databaseUrl: string | null = null): Promise<Instance> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'posthorn-bench-'));
  onCleanup(`data dir ${dataDir}`, () => fs.rmSync(dataDir, { recursive: true, force: true }));
  const run = await runCommand(process.execPath, [BIN, 'init', '--json', '--data', dataDir, '--mailer-host', 'bench.local', '--name', 'Bench', '--project-name', 'Bench'], {
    cwd: ROOT,
    env: env(databaseUrl),
    timeoutMs: 120_000,
  });
  if (run.code !== 0) throw new Error(`posthorn init failed (${run.code}): ${(run.stderr || run.stdout).trim().split('\n').slice(-5).join('\n')}`);
  const printed = JSON.parse(run.stdout.trim().split('\n').pop()!) as { project: { api_key: string } };
  return { dataDir, databaseUrl, projectKey: printed.project.api_key };
}

/** The domain of the bench messages' From address. */
export const SENDER_DOMAIN = 'sender.bench.local';

/**
 * `posthorn domain add NAME` on the instance's account: its messages From that domain are DKIM
 * signed from then on (a 2048-bit RSA key, as create_domain makes).
 */
export async function addSigningDomain(instance: Instance, name: string): Promise<void> {
  const run = await runCommand(process.execPath, [BIN, 'domain', 'add', name, '--json', '--data', instance.dataDir], { cwd: ROOT, env: env(instance.databaseUrl), timeoutMs: 120_000 });
  if (run.code !== 0) throw new Error(`posthorn domain add failed (${run.code}): ${(run.stderr || run.stdout).trim().split('\n').slice(-5).join('\n')}`);
}

/** `posthorn migrate` alone: the way to ask whether a database URL is usable. */
export async function migrate(databaseUrl: string): Promise<{ ok: boolean; output: string }> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'posthorn-bench-migrate-'));
  try {
    const run = await runCommand(process.execPath, [BIN, 'migrate', '--data', dataDir], { cwd: ROOT, env: env(databaseUrl), timeoutMs: 120_000 });
    return { ok: run.code === 0, output: (run.stderr + run.stdout).trim() };
  } finally {
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

export interface Service {
  url: string | null;
  pid: number;
  /** VmRSS and VmHWM (peak) of the service process, MiB */
  rss(): { rss: number; peak: number } | null;
  /** VmHWM (peak) of each process, MiB, the supervisor first (the sum is rss().peak) */
  peaks(): number[];
  /** 1, or 3 for a supervised serve (the supervisor, the API and the delivery process) */
  processes: number;
  /** CPU seconds the service process has used so far */
  cpuSeconds(): number;
  /** scheduler accounting of its main thread */
  sched(): { runNs: number; waitNs: number } | null;
  /** SIGTERM (graceful: drains, writes the CPU profile if asked), SIGKILL after the grace */
  stop(): Promise<void>;
}

export interface ServeOptions {
  role?: 'all' | 'api' | 'worker';
  /** smtp-sink port for --transport-map bench.local=127.0.0.1:PORT */
  sinkPort?: number;
  extraArgs?: string[];
  /** directory for `node --cpu-prof` output */
  cpuProfDir?: string;
  /** extra node options (experiments: --max-semi-space-size=32 ...) */
  nodeArgs?: string[];
}

/** Starts `posthorn serve` on 127.0.0.1:0 and waits for its "posthorn is running" line. */
export async function serve(instance: Instance, opts: ServeOptions = {}): Promise<Service> {
  const nodeArgs = [...(opts.nodeArgs ?? []), ...(opts.cpuProfDir ? ['--cpu-prof', '--cpu-prof-dir', opts.cpuProfDir] : [])];
  const args = [
    ...nodeArgs, BIN, 'serve',
    '--data', instance.dataDir,
    '--host', '127.0.0.1',
    '--port', '0',
    '--mailer-host', 'bench.local',
    '--role', opts.role ?? 'all',
    '--log-level', 'info',
    ...(opts.sinkPort ? ['--transport-map', `${RECIPIENT_DOMAIN}=127.0.0.1:${opts.sinkPort}`] : []),
    ...(opts.extraArgs ?? []),
  ];
  // In a session of its own, as a service manager starts a service and as Postfix's master puts
  // itself: with the kernel's autogroup scheduling (on by default) a session is a scheduling group,
  // and the service must not share one with the load generator or figure 10's busy loops when
  // Postfix does not (docs/decisions/0003-performance.md, "Scheduling groups").
  const spawned: Spawned = spawnChild('posthorn serve', process.execPath, args, { cwd: ROOT, env: env(instance.databaseUrl), detached: true });
  const logFile = path.join(instance.dataDir, `serve-${spawned.child.pid}.log`);
  const logStream = fs.createWriteStream(logFile);
  spawned.child.stderr!.pipe(logStream, { end: false });
  // A supervised serve (--role all on SQLite by default, src/cli/supervisor.ts) names its child
  // processes in the running line: the service's CPU, memory and waiting are summed over them all.
  let childPids: number[] = [];
  const url = await new Promise<string | null>((resolve, reject) => {
    let buffer = '';
    const timer = setTimeout(() => reject(new Error(`posthorn serve did not start within 60 s (log: ${logFile})`)), 60_000);
    spawned.child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
      logStream.write(chunk);
      buffer += chunk;
      let nl: number;
      while ((nl = buffer.indexOf('\n')) !== -1) {
        const line = buffer.slice(0, nl);
        buffer = buffer.slice(nl + 1);
        if (!line.includes('posthorn is running')) continue;
        clearTimeout(timer);
        try {
          const running = JSON.parse(line) as { url?: string | null; processes?: Array<{ pid: number }> };
          childPids = (running.processes ?? []).map((p) => p.pid);
          resolve(running.url ?? null);
        } catch {
          resolve(null);
        }
      }
    });
    void spawned.exited.then((code) => {
      clearTimeout(timer);
      const tail = fs.existsSync(logFile) ? fs.readFileSync(logFile, 'utf8').split('\n').slice(-8).join('\n') : '';
      reject(new Error(`posthorn serve exited (${code}) before it was running:\n${tail}`));
    });
  });
  const pid = spawned.child.pid!;
  const pids = [pid, ...childPids];
  const sum = <T extends Record<string, number>>(read: (p: number) => T | null): T | null => {
    const all = pids.map(read);
    if (all.some((x) => x === null)) return null;
    return Object.fromEntries(Object.keys(all[0]!).map((k) => [k, all.reduce((acc, x) => acc + x![k], 0)])) as T;
  };
  return {
    url,
    pid,
    processes: pids.length,
    rss: () => sum(readRssMiB),
    peaks: () => pids.map((p) => readRssMiB(p)?.peak ?? NaN),
    cpuSeconds: () => pids.reduce((acc, p) => acc + (readCpuSeconds(p) ?? NaN), 0),
    sched: () => sum(readSchedstat),
    stop: async () => {
      await spawned.stop(60_000);
      logStream.end();
    },
  };
}

/** Readable tail of a service log (for failures). */
export function tailLog(instance: Instance, lines = 10): string {
  const files = fs.readdirSync(instance.dataDir).filter((f) => f.startsWith('serve-'));
  return files.map((f) => fs.readFileSync(path.join(instance.dataDir, f), 'utf8').split('\n').slice(-lines).join('\n')).join('\n');
}

// ~1 KB of body text: 16 lines of 63 characters + CRLF.
export const BODY_TEXT = Array.from({ length: 16 }, (_, i) => `Line ${String(i).padStart(2, '0')} of the benchmark message body. The quick brown fox jumps.`.slice(0, 63)).join('\r\n');

/** One send_message body; every request gets its own uid (a repeated uid is refused). */
export function sendMessageBody(projectKey: string, uid: string, n: number): string {
  return JSON.stringify({
    api_key: projectKey,
    uid,
    arguments: {
      recipients: `rcpt${n}@${RECIPIENT_DOMAIN}`,
      headers: { from: `Bench Sender <sender@${SENDER_DOMAIN}>`, subject: `Benchmark message ${n}` },
      content: { 'text/plain': BODY_TEXT },
    },
  });
}

export interface LoadResult {
  ok: number;
  notOk: number;
  errors: number;
  durationS: number;
  acceptedPerS: number;
  p50Ms: number;
  p99Ms: number;
  /** the first non-200 body seen, to say why */
  firstFailure: string | null;
  startedAt: number;
  /** CPU seconds of a load generator in a process of its own (wrk); absent for one in the bench's process */
  loaderCpuSeconds?: number;
}

let loadSequence = 0;

/**
 * send_message with autocannon: keep-alive, `connections` connections, a distinct uid per request.
 * Bounded by `amount` requests or `durationS` seconds, and in any case by timeoutS.
 */
export async function sendLoad(opts: {
  url: string;
  projectKey: string;
  connections: number;
  amount?: number;
  durationS?: number;
  timeoutS?: number;
}): Promise<LoadResult> {
  const tag = `bench-${process.pid}-${Date.now().toString(36)}-${++loadSequence}`;
  let n = 0;
  let firstFailure: string | null = null;
  const startedAt = performance.now();
  let lastResponseAt = startedAt;
  const instance = autocannon({
    url: `${opts.url}/v.1.1/send_message`,
    connections: opts.connections,
    pipelining: 1,
    ...(opts.amount !== undefined ? { amount: opts.amount } : { duration: opts.durationS ?? 10 }),
    timeout: opts.timeoutS ?? 30,
    requests: [
      {
        method: 'POST',
        path: '/v.1.1/send_message',
        headers: { 'content-type': 'application/json' },
        setupRequest: (request: any) => {
          const i = n++;
          return { ...request, body: sendMessageBody(opts.projectKey, `${tag}-${i}`, i) };
        },
        onResponse: (status: number, body: string) => {
          lastResponseAt = performance.now();
          if (status !== 200 && firstFailure === null) firstFailure = `${status} ${String(body).slice(0, 300)}`;
        },
      },
    ],
  } as any);
  // A hard stop in case the service stalls: autocannon's own timeout is per request.
  const hardStopS = (opts.amount !== undefined ? 600 : (opts.durationS ?? 10) + 60);
  const guard = setTimeout(() => (instance as any).stop?.(), hardStopS * 1000);
  const result: any = await instance;
  clearTimeout(guard);
  // With `amount`, until the last answer: autocannon resolves only at its next one-second tick.
  const durationS = ((opts.amount !== undefined ? lastResponseAt : performance.now()) - startedAt) / 1000;
  const ok = result['2xx'] as number;
  return {
    ok,
    notOk: result.non2xx as number,
    errors: (result.errors as number) + (result.timeouts as number),
    durationS,
    acceptedPerS: ok / durationS,
    p50Ms: result.latency.p50 as number,
    p99Ms: result.latency.p99 as number,
    firstFailure,
    startedAt,
  };
}

/** POST a JSON body and time it (history listings). */
export async function timePost(url: string, body: unknown): Promise<{ ms: number; status: number; json: any }> {
  const started = performance.now();
  const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const json = await response.json();
  return { ms: performance.now() - started, status: response.status, json };
}

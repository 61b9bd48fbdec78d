// Postfix on loopback: smtp-sink (the shared receiver of every figure), smtp-source (the load
// generator of the Postfix figures) and a private Postfix instance acting as a relay.
//
// The system Postfix is never started: the package is installed with no service started
// (debian.ts), and the relay is a separate instance (its own config, queue and data directories
// under a temporary directory) started with `postfix -c DIR start` and stopped in cleanup.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { installDebianPackage } from './debian.ts';
import { findFreePort, listChildPids, onCleanup, readCpuSeconds, runCommand, sampleRss, spawnChild, waitUntil, type Spawned } from './processes.ts';

const SINK = '/usr/sbin/smtp-sink';
const SOURCE = '/usr/sbin/smtp-source';
const POSTFIX = '/usr/sbin/postfix';

/** Installs the Debian postfix package when its test programs are missing; returns its version. */
export async function ensurePostfix(log: (line: string) => void): Promise<string> {
  if (!fs.existsSync(SINK) || !fs.existsSync(SOURCE) || !fs.existsSync(POSTFIX)) {
    await installDebianPackage('postfix', log, ['postfix postfix/main_mailer_type select No configuration']);
  }
  const version = await runCommand('postconf', ['-d', '-h', 'mail_version'], { timeoutMs: 10_000 });
  return version.stdout.trim() || 'unknown';
}

export interface Sink {
  port: number;
  /** messages received so far (smtp-sink's running counter) */
  count(): number;
  /**
   * Resolves with performance.now() at the moment the counter reached target, also when that was
   * before the call (a load generator may return later than the last message arrived: autocannon
   * reports its end at its next one-second tick).
   */
  waitForCount(target: number, timeoutMs: number): Promise<number>;
  stop(): Promise<void>;
}

/**
 * smtp-sink on 127.0.0.1 with its running counter (-c): it prints "sess=N quit=N mesg=N\r" as
 * each message's final "." arrives, so the bench knows within a pipe write when the Nth message
 * is in. It announces PIPELINING and accepts every command; messages are discarded.
 */
export async function startSink(): Promise<Sink> {
  const port = await findFreePort();
  const args = ['-c', '-m', '1024', '-t', '30'];
  if (process.getuid?.() === 0) args.push('-u', 'postfix');
  args.push(`127.0.0.1:${port}`, '1024');
  const spawned = spawnChild('smtp-sink', SINK, args);
  let messages = 0;
  /** when the counter moved: counts[i] was reached at times[i] (ascending) */
  const counts: number[] = [];
  const times: number[] = [];
  const reachedAt = (target: number): number => {
    let lo = 0;
    let hi = counts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (counts[mid] >= target) hi = mid;
      else lo = mid + 1;
    }
    return times[lo];
  };
  let tail = '';
  const waiters: Array<{ target: number; resolve: (at: number) => void }> = [];
  spawned.child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
    const now = performance.now();
    const text = tail + chunk;
    const cut = text.lastIndexOf('\r');
    if (cut === -1) {
      tail = text;
      return;
    }
    tail = text.slice(cut + 1);
    const last = /mesg=(\d+)\s*$/.exec(text.slice(0, cut));
    if (last && Number(last[1]) > messages) {
      messages = Number(last[1]);
      counts.push(messages);
      times.push(now);
    }
    for (let i = waiters.length - 1; i >= 0; i--) {
      if (messages >= waiters[i].target) {
        waiters[i].resolve(now);
        waiters.splice(i, 1);
      }
    }
  });
  let stderr = '';
  spawned.child.stderr!.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  await waitUntil('smtp-sink to listen', async () => ((await canConnect(port)) ? true : spawned.child.exitCode !== null ? fail() : undefined), 10_000);
  function fail(): never {
    throw new Error(`smtp-sink exited: ${stderr.trim()}`);
  }
  return {
    port,
    count: () => messages,
    waitForCount(target, timeoutMs) {
      if (messages >= target) return Promise.resolve(target <= 0 ? performance.now() : reachedAt(target));
      return new Promise((resolve, reject) => {
        const waiter = { target, resolve: (at: number) => (clearTimeout(timer), resolve(at)) };
        const timer = setTimeout(() => {
          waiters.splice(waiters.indexOf(waiter), 1);
          reject(new Error(`smtp-sink has ${messages} messages, expected ${target}, after ${timeoutMs} ms`));
        }, timeoutMs);
        waiters.push(waiter);
      });
    },
    stop: () => spawned.stop(2000),
  };
}

async function canConnect(port: number): Promise<boolean> {
  const net = await import('node:net');
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => (socket.destroy(), resolve(true)));
    socket.once('error', () => resolve(false));
  });
}

export interface SourceRun {
  elapsedMs: number;
  messages: number;
}

/**
 * smtp-source: `sessions` parallel SMTP sessions, each reusing its connection (-d), `messages`
 * messages of `bytes` payload bytes, one recipient each.
 */
export async function runSource(opts: { port: number; sessions: number; messages: number; bytes: number; timeoutMs: number }): Promise<SourceRun> {
  const args = [
    '-d', '-s', String(opts.sessions), '-m', String(opts.messages), '-l', String(opts.bytes),
    '-M', 'source.bench.local', '-f', 'sender@source.bench.local', '-t', 'rcpt@bench.local',
    `127.0.0.1:${opts.port}`,
  ];
  const run = await runCommand(SOURCE, args, { timeoutMs: opts.timeoutMs });
  if (run.code !== 0) throw new Error(`smtp-source exited ${run.code}: ${run.stderr.trim()}`);
  return { elapsedMs: run.elapsedMs, messages: opts.messages };
}

export interface PostfixRelay {
  port: number;
  dir: string;
  /** the master and its children (for memory sampling) */
  pids(): number[];
  /** CPU seconds used so far by the master, its live children and its exited children */
  cpuSeconds(): number;
  stop(): Promise<void>;
}

/**
 * A private Postfix instance: its own config_directory, queue_directory and data_directory under
 * a temporary directory; smtpd on 127.0.0.1:<free port>; every message relayed to
 * [127.0.0.1]:sinkPort (an IP literal: no DNS, and DNS lookups are disabled anyway).
 * Defaults elsewhere (process limits, destination concurrency 20, connection cache): it is a
 * stock Postfix, as a user would run it, minus local delivery.
 */
export async function startPostfixRelay(sinkPort: number): Promise<PostfixRelay> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'posthorn-bench-postfix-'));
  fs.chmodSync(dir, 0o755);
  const port = await findFreePort();
  const queue = path.join(dir, 'queue');
  const data = path.join(dir, 'data');
  fs.mkdirSync(queue, { mode: 0o755 });
  fs.mkdirSync(data, { mode: 0o700 });
  await runCommand('chown', ['postfix', data], { timeoutMs: 10_000 });
  fs.writeFileSync(
    path.join(dir, 'main.cf'),
    [
      'compatibility_level = 3.6',
      `queue_directory = ${queue}`,
      `data_directory = ${data}`,
      'mail_owner = postfix',
      'setgid_group = postdrop',
      'myhostname = relay.bench.local',
      'mydomain = bench.local',
      'mydestination =',
      'inet_interfaces = 127.0.0.1',
      'inet_protocols = ipv4',
      'mynetworks = 127.0.0.0/8',
      'smtpd_relay_restrictions = permit_mynetworks, reject',
      `relayhost = [127.0.0.1]:${sinkPort}`,
      // no DNS at all: IP-literal relay, native (files) host lookups, DNS support off
      'smtp_host_lookup = native',
      'smtp_dns_support_level = disabled',
      'local_transport = error:local delivery is disabled',
      'alias_maps =',
      'alias_database =',
      'biff = no',
      `maillog_file_prefixes = ${dir}`,
      `maillog_file = ${path.join(dir, 'postfix.log')}`,
      '',
    ].join('\n'),
  );
  // chroot off (the temporary queue has no chroot jail); otherwise Debian's stock services.
  fs.writeFileSync(
    path.join(dir, 'master.cf'),
    [
      `127.0.0.1:${port} inet n - n - - smtpd`,
      'pickup unix n - n 60 1 pickup',
      'cleanup unix n - n - 0 cleanup',
      'qmgr unix n - n 300 1 qmgr',
      'rewrite unix - - n - - trivial-rewrite',
      'bounce unix - - n - 0 bounce',
      'defer unix - - n - 0 bounce',
      'trace unix - - n - 0 bounce',
      'verify unix - - n - 1 verify',
      'flush unix n - n 1000? 0 flush',
      'proxymap unix - - n - - proxymap',
      'smtp unix - - n - - smtp',
      'relay unix - - n - - smtp',
      'showq unix n - n - - showq',
      'error unix - - n - - error',
      'retry unix - - n - - error',
      'discard unix - - n - - discard',
      'local unix - n n - - local',
      'anvil unix - - n - 1 anvil',
      'scache unix - - n - 1 scache',
      'postlog unix-dgram n - n - 1 postlogd',
      '',
    ].join('\n'),
  );
  const masterPid = (): number | null => {
    try {
      const pid = Number(fs.readFileSync(path.join(queue, 'pid', 'master.pid'), 'utf8').trim());
      return Number.isFinite(pid) && pid > 0 && fs.existsSync(`/proc/${pid}`) ? pid : null;
    } catch {
      return null;
    }
  };
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    const pid = masterPid();
    await runCommand(POSTFIX, ['-c', dir, 'stop'], { timeoutMs: 30_000 });
    if (pid !== null && fs.existsSync(`/proc/${pid}`)) {
      await runCommand(POSTFIX, ['-c', dir, 'abort'], { timeoutMs: 10_000 });
      if (fs.existsSync(`/proc/${pid}`)) process.kill(pid, 'SIGKILL');
    }
    fs.rmSync(dir, { recursive: true, force: true });
  };
  const release = onCleanup('postfix relay', stop);
  const start = await runCommand(POSTFIX, ['-c', dir, 'start'], { timeoutMs: 60_000 });
  if (start.code !== 0) {
    const logFile = path.join(dir, 'postfix.log');
    const log = fs.existsSync(logFile) ? fs.readFileSync(logFile, 'utf8').split('\n').slice(-10).join('\n') : '';
    await release();
    throw new Error(`postfix -c ${dir} start exited ${start.code}: ${start.stderr.trim()}\n${log}`);
  }
  await waitUntil('the Postfix relay to listen', async () => ((await canConnect(port)) ? true : undefined), 20_000);
  return {
    port,
    dir,
    pids: () => {
      const master = masterPid();
      return master === null ? [] : [master, ...listChildPids(master)];
    },
    cpuSeconds: () => {
      const master = masterPid();
      if (master === null) return NaN;
      let sum = readCpuSeconds(master, true) ?? 0;
      for (const pid of listChildPids(master)) sum += readCpuSeconds(pid) ?? 0;
      return sum;
    },
    stop: release,
  };
}

export { sampleRss };
export type { Spawned };

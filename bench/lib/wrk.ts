// wrk, the load generator of the ingest figures (3, 3o, 3p) and, a fixed count per run, of the
// end-to-end figures (4, 4o, 4s, 5, 5s, 5d, 10): a C program, as smtp-source is for Postfix (2a,
// 2b), so that the client takes as little of the machine's cores from the service as it does from
// Postfix (docs/decisions/0003-performance.md, "The load generator of the ingest figures" and "The
// change: the end-to-end figures' load from wrk").
// Requests come from send-message.lua: the bench's own send_message body, a uid of its own each.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { installDebianPackage } from './debian.ts';
import { sendMessageBody, type LoadResult } from './posthorn.ts';
import { runCommand } from './processes.ts';

const WRK = '/usr/bin/wrk';
const SCRIPT = path.join(path.dirname(fileURLToPath(import.meta.url)), 'send-message.lua');

/** Installs the Debian wrk package when it is missing. */
export async function ensureWrk(log: (line: string) => void): Promise<void> {
  if (!fs.existsSync(WRK)) await installDebianPackage('wrk', log);
}

let runs = 0;

/**
 * send_message over `connections` keep-alive connections, from one wrk thread: for `durationS`
 * seconds, or exactly `amount` requests (the run ends at the last answer; bounded by timeoutS).
 */
export async function wrkSendLoad(opts: { url: string; projectKey: string; connections: number; durationS?: number; amount?: number; timeoutS?: number }): Promise<LoadResult> {
  const startedAt = performance.now();
  const seconds = opts.amount !== undefined ? (opts.timeoutS ?? 600) : (opts.durationS ?? 10);
  // bash's `times` prints, after wrk has exited, the CPU time of its children: wrk's own.
  const wrkArgs = ['-t1', `-c${opts.connections}`, `-d${seconds}s`, '--latency', '--timeout', '30s', '-s', SCRIPT, opts.url];
  const run = await runCommand('bash', ['-c', `"$0" "$@"; code=$?; times; exit $code`, WRK, ...wrkArgs], {
    env: {
      ...process.env,
      POSTHORN_BODY: sendMessageBody(opts.projectKey, '@@UID@@', 987654321),
      POSTHORN_UID_PREFIX: `wrk-${process.pid}-${Date.now().toString(36)}-${++runs}`,
      ...(opts.amount !== undefined ? { POSTHORN_AMOUNT: String(opts.amount) } : {}),
    },
    timeoutMs: (seconds + 60) * 1000,
  });
  if (run.code !== 0) throw new Error(`wrk exited ${run.code}: ${(run.stderr || run.stdout).trim().slice(0, 500)}`);
  const times = [...run.stdout.matchAll(/^(\d+)m([\d.]+)s (\d+)m([\d.]+)s$/gm)];
  const children = times[1];
  const cpuSeconds = children ? Number(children[1]) * 60 + Number(children[2]) + Number(children[3]) * 60 + Number(children[4]) : NaN;
  return { ...parseWrk(run.stdout, startedAt), loaderCpuSeconds: cpuSeconds };
}

/** wrk's summary: "N requests in Ts", the latency distribution, non-2xx answers and socket errors. */
export function parseWrk(out: string, startedAt: number): LoadResult {
  const total = /(\d+) requests in ([\d.]+)(us|ms|s|m)\b/.exec(out);
  if (!total) throw new Error(`wrk printed no summary: ${out.slice(0, 500)}`);
  const durationS = toMs(Number(total[2]), total[3]) / 1000;
  const notOk = Number(/Non-2xx or 3xx responses: (\d+)/.exec(out)?.[1] ?? 0);
  const socket = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out);
  const errors = socket ? socket.slice(1).reduce((sum, n) => sum + Number(n), 0) : 0;
  const ok = Number(total[1]) - notOk;
  const percentile = (p: string) => {
    const m = new RegExp(`^\\s+${p}%\\s+([\\d.]+)(us|ms|s|m)\\s*$`, 'm').exec(out);
    return m ? toMs(Number(m[1]), m[2]) : NaN;
  };
  return {
    ok,
    notOk,
    errors,
    durationS,
    acceptedPerS: ok / durationS,
    p50Ms: percentile('50'),
    p99Ms: percentile('99'),
    firstFailure: notOk > 0 ? `${notOk} answers were not 2xx (wrk does not keep bodies)` : null,
    startedAt,
  };
}

function toMs(value: number, unit: string): number {
  return unit === 'us' ? value / 1000 : unit === 'ms' ? value : unit === 's' ? value * 1000 : value * 60_000;
}

// `npm run bench`: Posthorn side by side with Postfix on this machine, everything on 127.0.0.1.
//
//   1  ceiling: smtp-source -> smtp-sink (the SMTP limit of the machine)
//   1n Nodemailer's pooled client alone -> smtp-sink (the limit of a Node sender built on it)
//   1c composing one message: Posthorn's composition beside Nodemailer's MailComposer (bench/lib/composition.ts)
//   2  Postfix as a relay: smtp-source -> private Postfix -> smtp-sink
//   3  Posthorn ingest: durable send_message over HTTP (SQLite, group commit, fsync), load from wrk
//      (a C client, as smtp-source is for 2a); 3a the same runs' alternates from autocannon
//   4  Posthorn end to end on SQLite: API -> delivery -> smtp-sink; the load of every end-to-end
//      figure is a fixed count of send_message from wrk, as smtp-source's is for Postfix in 2b
//   4  is `serve` with its defaults: on SQLite with 2+ cores, an API and a delivery process under
//      one supervisor (src/cli/supervisor.ts); 4o the same with --processes 1 (one process)
//   4s the same with the API and the worker in two processes (--role api, --role worker)
//   5  the same on PostgreSQL (`--role all`, one process)
//   3p Posthorn ingest on PostgreSQL (`--role api`), beside Postfix's accept rate (2a)
//   5s PostgreSQL with 1 API process and 1 worker process (`--role api`, `--role worker`)
//   5d PostgreSQL with 2 API processes and 2 worker processes; the ratio to 5s, and for both the
//      CPU per message of each role (API, worker, the database's backends), from which the
//      processes a larger machine needs are computed (docs/operations.md)
//   6  messages_history pages of 250 at 1,000,000 transmissions
//   7  memory: peak RSS during 4, and of a worker draining 100,000 queued transmissions; 7d that
//      drain's rate and CPU with every message DKIM-signed (RSA 2048); 7p the drain on PostgreSQL
//   8  SMTP submission accepts beside Postfix smtpd accepting the same load (bench/smtp-submission.ts)
//   9  the dashboard's messages pages and one message's page at 1,000,000 transmissions (bench/dashboard.ts)
//   10 the busy machine: 2 and 4 again with one busy-loop process per core running beside them
//
// Every loop is bounded in count and time; every figure is the median of --runs runs; every child
// process, temporary directory, Postfix instance and database is removed at the end, also on error
// or Ctrl-C. Options: `npm run bench -- --help`.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { formatProfile, summarizeProfile } from './lib/cpu-profile.ts';
import { appendUnnumbered, seedHistory } from './lib/history-seed.ts';
import { ensurePostfix, runSource, startPostfixRelay, startSink, type Sink } from './lib/postfix.ts';
import { measureSmtpSubmission } from './smtp-submission.ts';
import { measureDashboard } from './dashboard.ts';
import { ensureWrk, wrkSendLoad } from './lib/wrk.ts';
import { addSigningDomain, createInstance, migrate, ROOT, sendLoad, SENDER_DOMAIN, serve, tailLog, timePost, type Instance, type Service } from './lib/posthorn.ts';
import { describeSchedDelta, hookSignals, onCleanup, runAllCleanups, runCommand, samplePostgresBackends, sampleRss, spawnChild } from './lib/processes.ts';
import type { SequentialRun } from './lib/sequential-client.ts';
import { describeMachine, formatMarkdown, formatTable, gitRevision, type Figure } from './lib/report.ts';
import { median, percentile } from './lib/stats.ts';

const { values: args } = parseArgs({
  options: {
    runs: { type: 'string', default: '3' },
    only: { type: 'string' },
    messages: { type: 'string', default: '20000' },
    'ingest-seconds': { type: 'string', default: '10' },
    connections: { type: 'string', default: '50' },
    'history-rows': { type: 'string', default: '1000000' },
    queued: { type: 'string', default: '100000' },
    profile: { type: 'boolean', default: false },
    'no-write': { type: 'boolean', default: false },
    /** extra `posthorn serve` options for experiments, e.g. --serve-args="--workers 128" */
    'serve-args': { type: 'string', default: '' },
    /** extra node options for the service process, e.g. --node-args="--max-semi-space-size=32" */
    'node-args': { type: 'string', default: '' },
    'pg-url': { type: 'string', default: process.env.BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres' },
    help: { type: 'boolean', default: false },
  },
});

if (args.help) {
  process.stdout.write(`usage: npm run bench [-- options]
  --runs N             runs per figure, the median is reported (default 3, at most 9)
  --only LIST          figures to run: 1,1n,1c,2,3,3o,3p,4,4o,4s,5,5s,5d,6,7,7d,7p,8,9,10 (default all)
                       1c the CPU of composing one message (text; a 16 KB HTML order mail),
                       Posthorn's composition beside Nodemailer's MailComposer, in one process
                       3 ingest with serve --role api's defaults (on SQLite one API process per
                       core), load from wrk, with autocannon's runs alternating (3a); 3o the
                       same with one API process
                       3p ingest on PostgreSQL (--role api); 5 end to end on PostgreSQL (--role all);
                       5s 1 API + 1 worker process, 5d 2 API + 2 worker processes on one PostgreSQL
                       (msg/s, ratio to Postfix 2b, 5d/5s, CPU per message per role incl. the
                       database's backends). PostgreSQL figures need --pg-url's server
                       7d a worker draining 20,000 queued (at most --queued), each message DKIM-signed
                       7p a worker draining --queued on PostgreSQL (a burst or an outage's backlog)
  --messages N         messages per end-to-end run, Postfix and Posthorn (default 20000)
  --ingest-seconds S   length of one ingest run (default 10)
  --connections N      HTTP connections of the load generators and SMTP sessions of 8 (default 50)
  --history-rows N     transmissions seeded for the history figure (default 1000000)
  --queued N           transmissions queued for the memory figure (default 100000)
  --profile            CPU profiles (node --cpu-prof) of ingest, end to end and the worker, summarised
  --no-write           print the table only; leave docs/benchmarks.md alone (implied by --only)
  --serve-args "..."   extra posthorn serve options (experiments)
  --node-args "..."    extra node options of the service process (experiments)
  --pg-url URL         PostgreSQL server for figures 3p, 5, 5s, 5d (a database is created and dropped per figure)
`);
  process.exit(0);
}

/** A whole-number option within [min, max]; anything else stops the bench before it starts. */
function intArg(name: keyof typeof args, min: number, max: number): number {
  const value = Number(args[name]);
  if (!Number.isInteger(value) || value < min || value > max) {
    process.stderr.write(`bench: --${name} must be a whole number from ${min} to ${max}, got "${String(args[name])}"\n`);
    process.exit(2);
  }
  return value;
}

const RUNS = intArg('runs', 1, 9);
const ONLY = args.only ? new Set(args.only.split(',').map((s) => s.trim())) : null;
const E2E_MESSAGES = intArg('messages', 100, 1_000_000);
const INGEST_SECONDS = intArg('ingest-seconds', 1, 120);
const HISTORY_ROWS = intArg('history-rows', 1000, 10_000_000);
const QUEUED = intArg('queued', 1000, 1_000_000);
const SERVE_ARGS = args['serve-args']!.split(/\s+/).filter(Boolean);
const NODE_ARGS = args['node-args']!.split(/\s+/).filter(Boolean);
const CONNECTIONS = intArg('connections', 1, 1000);
const SMTP_SESSIONS = 10;
/** 1c: messages composed per run and kind (a few seconds in all). */
const COMPOSED_MESSAGES = 5000;
const MESSAGE_BYTES = 1024;
const CEILING_MESSAGES = 50_000;
const HISTORY_REQUESTS = 100;
const HISTORY_PER_MESSAGE = 10;
/** the slowest delivery rate the bench waits for before calling a run failed */
const MIN_RATE_PER_S = 50;

const wanted = (id: string) => ONLY === null || ONLY.has(id);
const log = (line: string) => process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${line}\n`);
const deliveryTimeoutMs = (messages: number) => Math.min(900_000, 30_000 + (messages / MIN_RATE_PER_S) * 1000);
const profileDir = args.profile ? fs.mkdtempSync(path.join(os.tmpdir(), 'posthorn-bench-profiles-')) : null;
const profileReports: string[] = [];

const figures: Figure[] = [];
function addFigure(f: Figure): Figure {
  figures.push(f);
  return f;
}
function failed(id: string, name: string, unit: string, error: unknown, target?: string): void {
  const message = (error as Error)?.message ?? String(error);
  log(`${id} ${name}: FAILED: ${message}`);
  addFigure({ id, name, unit, value: null, runs: [], target, met: null, note: `not measured: ${message.split('\n')[0]}` });
}

// ---------------------------------------------------------------------------------------------
// 1. Ceiling

async function measureCeiling(sink: Sink): Promise<Figure> {
  const runs: number[] = [];
  await runSource({ port: sink.port, sessions: SMTP_SESSIONS, messages: 5000, bytes: MESSAGE_BYTES, timeoutMs: 60_000 });
  for (let i = 0; i < RUNS; i++) {
    const before = sink.count();
    const run = await runSource({ port: sink.port, sessions: SMTP_SESSIONS, messages: CEILING_MESSAGES, bytes: MESSAGE_BYTES, timeoutMs: 120_000 });
    await sink.waitForCount(before + CEILING_MESSAGES, 10_000);
    runs.push(CEILING_MESSAGES / (run.elapsedMs / 1000));
    log(`1 ceiling run ${i + 1}: ${runs[i].toFixed(0)} msg/s`);
  }
  return addFigure({ id: '1', name: 'Ceiling: smtp-source -> smtp-sink', unit: 'msg/s', value: median(runs), runs });
}

/** 1c: composition alone, Posthorn's beside Nodemailer's MailComposer, in a process of its own. */
async function measureComposition(): Promise<void> {
  const script = path.join(ROOT, 'bench', 'lib', 'composition.ts');
  const run = await runCommand(process.execPath, ['--import', 'tsx', script, String(COMPOSED_MESSAGES), String(RUNS)], { cwd: ROOT, timeoutMs: 300_000 });
  if (run.code !== 0) throw new Error(`composition exited ${run.code}: ${run.stderr.trim().split('\n').slice(-3).join(' ')}`);
  const result = JSON.parse(run.stdout.trim().split('\n').pop()!) as Record<'text' | 'html', { posthorn: number[]; nodemailer: number[] }>;
  const shapes = { text: 'the bench message (~1 KB of text, 7bit)', html: 'an order mail (16 KB HTML + its text, quoted-printable)' } as const;
  for (const shape of ['text', 'html'] as const) {
    const { posthorn, nodemailer } = result[shape];
    const ratio = median(posthorn) / median(nodemailer);
    log(`1c composing ${shape}: Posthorn ${posthorn.map((v) => v.toFixed(1)).join(' / ')} µs, Nodemailer's MailComposer ${nodemailer.map((v) => v.toFixed(1)).join(' / ')} µs (${ratio.toFixed(2)}×)`);
    const note = `${shape === 'text' ? 'The bench message' : 'The order mail'}: Posthorn's composition takes ${ratio.toFixed(2)}× the CPU of Nodemailer's MailComposer build() of the same message in the same runs (${median(posthorn).toFixed(1)} against ${median(nodemailer).toFixed(1)} µs)`;
    addFigure({ id: '1c', name: `Composing ${shapes[shape]}, CPU per message (domain/compose-mime.ts)`, unit: 'µs', value: median(posthorn), runs: posthorn, digits: 1, note });
    addFigure({ id: '1c', name: `Composing ${shapes[shape]}, CPU per message, Nodemailer's MailComposer`, unit: 'µs', value: median(nodemailer), runs: nodemailer, digits: 1 });
  }
}

/**
 * Nodemailer's pooled client alone (own process, pre-composed 1 KB messages, 10 connections like
 * Posthorn's default per destination): the SMTP ceiling of a Node delivery engine built on it.
 * Also once with Nagle's algorithm on (Nodemailer's default socket), to show what that costs.
 */
async function measureNodemailerCeiling(sink: Sink): Promise<void> {
  const script = path.join(ROOT, 'bench', 'lib', 'nodemailer-ceiling.ts');
  const runOnce = async (messages: number, noDelay: boolean): Promise<number> => {
    const before = sink.count();
    const run = await runCommand(process.execPath, ['--import', 'tsx', script, String(sink.port), String(messages), '10', '64', noDelay ? '1' : '0'], {
      cwd: ROOT,
      timeoutMs: deliveryTimeoutMs(messages),
    });
    if (run.code !== 0) throw new Error(`nodemailer-ceiling exited ${run.code}: ${run.stderr.trim().split('\n').slice(-3).join(' ')}`);
    const result = JSON.parse(run.stdout.trim().split('\n').pop()!) as { elapsedMs: number; failed: number };
    if (result.failed > 0) throw new Error(`${result.failed} of ${messages} sends failed`);
    await sink.waitForCount(before + messages, 10_000);
    return messages / (result.elapsedMs / 1000);
  };
  await runOnce(1000, true);
  const runs: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    runs.push(await runOnce(E2E_MESSAGES, true));
    log(`1n nodemailer pooled client run ${i + 1}: ${runs[i].toFixed(0)} msg/s`);
  }
  addFigure({ id: '1n', name: 'Nodemailer pooled client alone -> smtp-sink (10 conns, Nagle off)', unit: 'msg/s', value: median(runs), runs });
  const nagle = await runOnce(500, false);
  log(`1n nodemailer pooled client with Nagle on: ${nagle.toFixed(0)} msg/s`);
  addFigure({ id: '1n', name: 'Nodemailer pooled client, Nagle on (its default socket)', unit: 'msg/s', value: nagle, runs: [nagle] });
}

// ---------------------------------------------------------------------------------------------
// 2. Postfix as a relay

interface PostfixFigures {
  accept: Figure;
  relay: Figure;
  cpu: Figure;
  rssMiB: number | null;
}

async function measurePostfixRelay(sink: Sink, tag: { id: string; suffix: string } = { id: '2', suffix: '' }): Promise<PostfixFigures> {
  const relay = await startPostfixRelay(sink.port);
  try {
    // warm-up: every Postfix daemon started and its connection cache in use
    let before = sink.count();
    await runSource({ port: relay.port, sessions: SMTP_SESSIONS, messages: 1000, bytes: MESSAGE_BYTES, timeoutMs: 120_000 });
    await sink.waitForCount(before + 1000, deliveryTimeoutMs(1000));
    const accept: number[] = [];
    const relayed: number[] = [];
    const sampler = sampleRss(() => relay.pids());
    const cpuUs: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      before = sink.count();
      const started = performance.now();
      const cpu0 = relay.cpuSeconds();
      const run = await runSource({ port: relay.port, sessions: SMTP_SESSIONS, messages: E2E_MESSAGES, bytes: MESSAGE_BYTES, timeoutMs: deliveryTimeoutMs(E2E_MESSAGES) });
      const lastAt = await sink.waitForCount(before + E2E_MESSAGES, deliveryTimeoutMs(E2E_MESSAGES));
      // the delivering smtp processes may still be running: they are live children, counted
      cpuUs.push(((relay.cpuSeconds() - cpu0) * 1e6) / E2E_MESSAGES);
      accept.push(E2E_MESSAGES / (run.elapsedMs / 1000));
      relayed.push(E2E_MESSAGES / ((lastAt - started) / 1000));
      log(`${tag.id} postfix${tag.suffix} run ${i + 1}: accepted ${accept[i].toFixed(0)} msg/s, relayed ${relayed[i].toFixed(0)} msg/s`);
    }
    const rssMiB = sampler.stop();
    return {
      accept: addFigure({ id: `${tag.id}a`, name: `Postfix accepts (smtp-source -> Postfix, queued on disk)${tag.suffix}`, unit: 'msg/s', value: median(accept), runs: accept }),
      relay: addFigure({ id: `${tag.id}b`, name: `Postfix relays end to end (${E2E_MESSAGES} msgs -> smtp-sink)${tag.suffix}`, unit: 'msg/s', value: median(relayed), runs: relayed }),
      cpu: addFigure({ id: `${tag.id}c`, name: `Postfix CPU per relayed message (all its processes)${tag.suffix}`, unit: 'µs', value: median(cpuUs), runs: cpuUs }),
      rssMiB,
    };
  } finally {
    await relay.stop();
  }
}

// ---------------------------------------------------------------------------------------------
// The targets (docs/decisions/0003-performance.md), as multiples of Postfix's figure in the same
// run, by figure: ingest against its accept rate (2a), end to end against its relay rate (2b, 10b).
// Figures not listed (3o, 4o) are there to compare.
const POSTFIX_FACTORS: Record<string, number> = { '3': 15, '3p': 5, '4': 5, '5': 3, '10': 3 };

// ---------------------------------------------------------------------------------------------
// 3. Ingest

async function withService<T>(instance: Instance, opts: Parameters<typeof serve>[1], fn: (service: Service) => Promise<T>): Promise<T> {
  const service = await serve(instance, { ...opts, extraArgs: [...SERVE_ARGS, ...(opts?.extraArgs ?? [])], nodeArgs: NODE_ARGS });
  const release = onCleanup('posthorn service', () => service.stop());
  try {
    return await fn(service);
  } catch (error) {
    throw new Error(`${(error as Error).message}\n--- service log tail ---\n${tailLog(instance)}`);
  } finally {
    await release();
  }
}

/** The ingest figures' clients: wrk (the figure), and autocannon beside it where asked (3a). */
type IngestClient = { client: 'wrk' | 'autocannon'; id: string };

async function measureIngest(
  postfixAccept: number | null,
  on: { id: string; label: string; databaseUrl: string | null; extraArgs?: string[]; alsoAutocannon?: string } = { id: '3', label: 'SQLite', databaseUrl: null, alsoAutocannon: '3a' },
): Promise<void> {
  const instance = await createInstance(on.databaseUrl);
  const profile = profileDir ? path.join(profileDir, `ingest-${on.id}`) : undefined;
  const backends = on.databaseUrl ? new URL(on.databaseUrl).pathname.slice(1) : null;
  const clients: IngestClient[] = [{ client: 'wrk', id: on.id }, ...(on.alsoAutocannon ? [{ client: 'autocannon' as const, id: on.alsoAutocannon }] : [])];
  await withService(instance, { role: 'api', cpuProfDir: profile, extraArgs: on.extraArgs }, async (service) => {
    const warm = await sendLoad({ url: service.url!, projectKey: instance.projectKey, connections: CONNECTIONS, durationS: 2 });
    if (warm.ok === 0) throw new Error(`no send_message accepted: ${warm.firstFailure ?? `${warm.errors} connection errors`}`);
    const series = clients.map(() => ({ rate: [] as number[], p50: [] as number[], p99: [] as number[], cpuUs: [] as number[], cpuWait: [] as number[], serviceCores: [] as number[], loaderCores: [] as number[], databaseUs: [] as number[], refused: 0 }));
    // With two clients, their runs alternate on the same service: each pair in the same minutes.
    for (let i = 0; i < RUNS; i++) {
      for (let c = 0; c < clients.length; c++) {
        const { client, id } = clients[c];
        const m = series[c];
        const cpu0 = service.cpuSeconds();
        const sched0 = service.sched();
        const own0 = process.cpuUsage();
        const database = backends ? samplePostgresBackends(backends) : null;
        const wakeUps = on.databaseUrl ? await countWakeUps(on.databaseUrl) : null;
        const load = { url: service.url!, projectKey: instance.projectKey, connections: CONNECTIONS, durationS: INGEST_SECONDS };
        const r = client === 'wrk' ? await wrkSendLoad(load) : await sendLoad(load);
        if (database) m.databaseUs.push((database.stop() * 1e6) / Math.max(1, r.ok));
        const notified = wakeUps ? await wakeUps.stop() : null;
        const cpu = service.cpuSeconds() - cpu0;
        const sched = describeSchedDelta(sched0, service.sched(), r.durationS * 1000);
        m.cpuWait.push(sched.waitingForCpu);
        const own = process.cpuUsage(own0);
        const loaderSeconds = r.loaderCpuSeconds ?? (own.user + own.system) / 1e6;
        m.refused += r.notOk + r.errors;
        m.rate.push(r.acceptedPerS);
        m.p50.push(r.p50Ms);
        m.p99.push(r.p99Ms);
        m.cpuUs.push((cpu * 1e6) / Math.max(1, r.ok));
        m.serviceCores.push(cpu / r.durationS);
        m.loaderCores.push(loaderSeconds / r.durationS);
        log(
          `${id} ingest (${on.label}, ${client}) run ${i + 1}: ${r.acceptedPerS.toFixed(0)} accepted/s (${r.ok} ok, ${r.notOk} not ok, ${r.errors} errors), p50 ${r.p50Ms} ms, p99 ${r.p99Ms} ms; ` +
            `service ${m.serviceCores[i].toFixed(2)} cores, ${m.cpuUs[i].toFixed(0)} µs CPU per request, ${sched.text}; load generator ${m.loaderCores[i].toFixed(2)} cores` +
            (backends ? `; PostgreSQL backends ${m.databaseUs[i].toFixed(0)} µs CPU per request; ${notified} wake-ups (NOTIFY), ${((notified ?? 0) / Math.max(1, r.ok)).toFixed(3)} per request` : '') +
            (r.firstFailure ? `; first failure: ${r.firstFailure}` : ''),
        );
      }
    }
    for (let c = 0; c < clients.length; c++) {
      const { client, id } = clients[c];
      const { rate, p50, p99, cpuUs, cpuWait, serviceCores, loaderCores, databaseUs, refused } = series[c];
      const value = median(rate);
      // 3o (one API process) and 3a (autocannon, for comparison) have no target.
      const factor = POSTFIX_FACTORS[id];
      const target = factor === undefined ? {} : { target: `≥ ${factor}× Postfix (2a)`, met: postfixAccept ? value >= factor * postfixAccept : null };
      addFigure({
        id, name: `Posthorn ingest: durable send_message (${on.label}, ${CONNECTIONS} conns, ${client})`, unit: 'msg/s', value, runs: rate,
        postfix: { label: 'Postfix accepts, 2a', value: postfixAccept }, ...target,
        note: refused > 0 ? `${refused} requests were not answered 200 (refused or errors) and are not counted` : undefined,
      });
      addFigure({ id, name: `Posthorn ingest latency p50 (${on.label}, ${client})`, unit: 'ms', value: median(p50), runs: p50, digits: 1 });
      addFigure({ id, name: `Posthorn ingest latency p99 (${on.label}, ${client})`, unit: 'ms', value: median(p99), runs: p99, digits: 1 });
      if (backends) addFigure({ id, name: 'PostgreSQL backends CPU per accepted send_message', unit: 'µs', value: median(databaseUs), runs: databaseUs });
      addFigure({
        id, name: `Service CPU per accepted send_message (${on.label}, ${client})`, unit: 'µs', value: median(cpuUs), runs: cpuUs,
        note:
          `${service.processes > 1 ? `${service.processes} processes (the supervisor and ${service.processes - 1} API processes), CPU summed over them; the` : 'one process; the'} service used ${median(serviceCores).toFixed(2)} cores ` +
          `(its main threads waited for a CPU ${(median(cpuWait) * 100).toFixed(0)}% of the time) and ${client} ${median(loaderCores).toFixed(2)} cores (medians)` +
          (service.processes > 1 ? '' : '; at one full core, 1e6 / this figure is the ingest ceiling of one process'),
      });
    }
  });
  if (profile) profileReports.push(reportProfile(`ingest ${on.label} (send_message, role api)`, profile));
}

// ---------------------------------------------------------------------------------------------
// 4 and 5. End to end
//
// The load of every end-to-end figure: a fixed count of send_message from wrk (bench/lib/wrk.ts),
// as smtp-source injects a fixed count into Postfix for 2b. A C client, for the reason of the
// ingest figures: the figure measures the service, not the client's share of the cores
// (docs/decisions/0003-performance.md, "The change: the end-to-end figures' load from wrk").

async function measureEndToEnd(
  id: string,
  label: string,
  sink: Sink,
  instance: Instance,
  postfixRelay: number | null,
  postfixRss: number | null,
  postfixCpuUs: number | null,
  extraArgs: string[] = [],
  postfixLabel = '2b',
): Promise<void> {
  const profile = profileDir ? path.join(profileDir, `e2e-${id}`) : undefined;
  await withService(instance, { role: 'all', sinkPort: sink.port, cpuProfDir: profile, extraArgs }, async (service) => {
    const idle = service.rss();
    if (id === '4' && idle) addFigure({ id: '7', name: 'RSS of the service just started (idle, all modules loaded)', unit: 'MiB', value: idle.rss, runs: [] });
    const cpuUs: number[] = [];
    const cpuWait: number[] = [];
    const runOnce = async (messages: number): Promise<number> => {
      const before = sink.count();
      const cpu0 = service.cpuSeconds();
      const sched0 = service.sched();
      const load = await wrkSendLoad({ url: service.url!, projectKey: instance.projectKey, connections: CONNECTIONS, amount: messages });
      if (load.ok !== messages) throw new Error(`${load.ok} of ${messages} send_message accepted (${load.notOk} refused, ${load.errors} errors): ${load.firstFailure ?? ''}`);
      const lastAt = await sink.waitForCount(before + messages, deliveryTimeoutMs(messages));
      const elapsedS = (lastAt - load.startedAt) / 1000;
      const cpu = service.cpuSeconds() - cpu0;
      cpuUs.push((cpu * 1e6) / messages);
      const sched = describeSchedDelta(sched0, service.sched(), elapsedS * 1000);
      cpuWait.push(sched.waitingForCpu);
      log(`${id} ${label}: ${messages} accepted in ${load.durationS.toFixed(1)} s, all at the sink after ${elapsedS.toFixed(1)} s; service ${(cpu / elapsedS).toFixed(2)} cores, ${((cpu * 1e6) / messages).toFixed(0)} µs CPU per message, ${sched.text}`);
      return messages / elapsedS;
    };
    await runOnce(Math.min(2000, E2E_MESSAGES)); // warm-up: JIT, SMTP pool open
    cpuUs.length = 0;
    cpuWait.length = 0;
    const rates: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      rates.push(await runOnce(E2E_MESSAGES));
      log(`${id} end to end (${label}) run ${i + 1}: ${rates[i].toFixed(0)} msg/s`);
    }
    const value = median(rates);
    const ratio = postfixRelay ? value / postfixRelay : null;
    addFigure({
      id, name: `Posthorn end to end, ${label} (${E2E_MESSAGES} msgs, API -> smtp-sink)`, unit: 'msg/s', value, runs: rates,
      postfix: { label: `Postfix relays, ${postfixLabel}`, value: postfixRelay },
      ...(POSTFIX_FACTORS[id] === undefined ? {} : { target: `≥ ${POSTFIX_FACTORS[id]}× Postfix`, met: ratio === null ? null : ratio >= POSTFIX_FACTORS[id] }),
      note:
        `${service.processes > 1 ? `${service.processes} processes (supervisor, API, delivery), CPU and waiting summed over them; ` : 'one process; '}` +
        `the service's main thread${service.processes > 1 ? 's were' : ' was'} runnable but waiting for a CPU ${(median(cpuWait) * 100).toFixed(0)}% of the time (median of the runs): other processes on the same cores`,
    });
    addFigure({
      id, name: `Service CPU per message end to end, ${label} (ingest + delivery)`, unit: 'µs', value: median(cpuUs), runs: cpuUs,
      postfix: { label: `Postfix CPU per message, ${postfixLabel.replace(/b$/, 'c')}`, value: postfixCpuUs },
    });
    const rss = service.rss();
    if (id === '4') {
      addFigure({
        id: '7a', name: 'Peak RSS of the service during 4', unit: 'MiB', value: rss?.peak ?? null, runs: [],
        postfix: postfixRss === null ? null : { label: 'Postfix processes, summed PSS, during 2', value: postfixRss },
        target: '< 512 MiB', met: rss ? rss.peak < 512 : null,
        ...(service.processes > 1 ? { note: `summed over the processes: ${service.peaks().map((p) => p.toFixed(0)).join(' + ')} MiB (supervisor, then its children)` } : {}),
      });
    }
  });
  if (profile) profileReports.push(reportProfile(`end to end ${label} (role all)`, profile));
}

/**
 * 4s: the same end to end with the API and delivery in two processes on the one SQLite file
 * (`--role api` and `--role worker`), so that each can have a core. SQLite has no cross-process
 * wake-up: the worker polls (--poll-ms 20).
 */
async function measureSplitEndToEnd(sink: Sink, postfixRelay: number | null): Promise<void> {
  const instance = await createInstance();
  // One API process (--api-processes 1, whatever the cores): the shape this figure has always
  // measured, one process per role.
  await withService(instance, { role: 'api', extraArgs: ['--api-processes', '1'] }, async (api) => {
    await withService(instance, { role: 'worker', sinkPort: sink.port, extraArgs: ['--poll-ms', '20'] }, async (worker) => {
      const runOnce = async (messages: number): Promise<number> => {
        const before = sink.count();
        const cpu0 = api.cpuSeconds() + worker.cpuSeconds();
        const load = await wrkSendLoad({ url: api.url!, projectKey: instance.projectKey, connections: CONNECTIONS, amount: messages });
        if (load.ok !== messages) throw new Error(`${load.ok} of ${messages} send_message accepted: ${load.firstFailure ?? ''}`);
        const lastAt = await sink.waitForCount(before + messages, deliveryTimeoutMs(messages));
        const elapsedS = (lastAt - load.startedAt) / 1000;
        const cpu = api.cpuSeconds() + worker.cpuSeconds() - cpu0;
        log(`4s split: ${messages} accepted in ${load.durationS.toFixed(1)} s, all at the sink after ${elapsedS.toFixed(1)} s; api + worker ${(cpu / elapsedS).toFixed(2)} cores, ${((cpu * 1e6) / messages).toFixed(0)} µs CPU per message`);
        return messages / elapsedS;
      };
      await runOnce(Math.min(2000, E2E_MESSAGES));
      const rates: number[] = [];
      for (let i = 0; i < RUNS; i++) rates.push(await runOnce(E2E_MESSAGES));
      const value = median(rates);
      const ratio = postfixRelay ? value / postfixRelay : null;
      addFigure({
        id: '4s', name: `Posthorn end to end, SQLite, API and worker processes (${E2E_MESSAGES} msgs)`, unit: 'msg/s', value, runs: rates,
        postfix: { label: 'Postfix relays, 2b', value: postfixRelay },
        target: '≥ 3× Postfix', met: ratio === null ? null : ratio >= 3,
      });
    });
  });
}

/**
 * Counts the wake-ups (NOTIFY posthorn_transmissions) sent on a database while it runs: what the
 * API processes send and every worker process receives (docs/decisions/0003-performance.md).
 */
async function countWakeUps(url: string): Promise<{ stop(): Promise<number> }> {
  const client = new pg.Client({ connectionString: url });
  let count = 0;
  client.on('notification', () => count++);
  client.on('error', () => {});
  await client.connect();
  await client.query('LISTEN posthorn_transmissions');
  const release = onCleanup('wake-up counter', () => client.end().catch(() => {}));
  return {
    async stop() {
      await release();
      return count;
    },
  };
}

/**
 * Runs a PostgreSQL figure on a fresh database of --pg-url's server (dropped at cleanup), or records
 * it as skipped (no server, or the service cannot migrate it) or failed.
 */
async function onPostgres(id: string, name: string, fn: (url: string) => Promise<void>): Promise<void> {
  try {
    const url = await createPostgresDatabase(args['pg-url']!);
    if (typeof url !== 'string') {
      log(`${id} skipped: ${url.skip}`);
      addFigure({ id, name, unit: 'msg/s', value: null, runs: [], note: `skipped: ${url.skip}` });
      return;
    }
    const check = await migrate(url);
    if (!check.ok) {
      const reason = `posthorn migrate failed: ${check.output.split('\n').slice(-3).join(' ')}`;
      log(`${id} skipped: ${reason}`);
      addFigure({ id, name, unit: 'msg/s', value: null, runs: [], note: `skipped: ${reason}` });
      return;
    }
    await fn(url);
  } catch (e) {
    failed(id, name, 'msg/s', e);
  }
}

/** Starts every service of `list` (nested, so each is stopped at the end, also on error), then fn. */
async function withServices<T>(instance: Instance, list: Array<Parameters<typeof serve>[1]>, fn: (services: Service[]) => Promise<T>, started: Service[] = []): Promise<T> {
  if (list.length === 0) return fn(started);
  return withService(instance, list[0], (service) => withServices(instance, list.slice(1), fn, [...started, service]));
}

/**
 * 5s and 5d: `apis` processes with `--role api` and `workers` with `--role worker` on one
 * PostgreSQL database, as docs/operations.md runs them: the load is spread over the API processes
 * as a load balancer would (each its share of the connections and messages), the workers wake on
 * LISTEN/NOTIFY. Besides the rate: CPU per message of each role (summed over its processes) and of
 * the database's backends, the figures that say how many processes a larger machine needs.
 * Returns the median rate.
 */
async function measurePostgresProcesses(
  id: string,
  url: string,
  apis: number,
  workers: number,
  sink: Sink,
  postfix: PostfixFigures | null,
  baseline: number | null,
): Promise<number> {
  const instance = await createInstance(url);
  const database = new URL(url).pathname.slice(1);
  const label = `PostgreSQL, ${apis} API + ${workers} worker process${workers > 1 ? 'es' : ''}`;
  const roles: Array<Parameters<typeof serve>[1]> = [
    ...Array.from({ length: workers }, () => ({ role: 'worker' as const, sinkPort: sink.port, extraArgs: ['--ops-port', '0'] })),
    ...Array.from({ length: apis }, () => ({ role: 'api' as const })),
  ];
  return withServices(instance, roles, async (services) => {
    const workerServices = services.slice(0, workers);
    const apiServices = services.slice(workers);
    const cpuOf = (list: Service[]) => list.reduce((acc, s) => acc + s.cpuSeconds(), 0);
    const perRole = { api: [] as number[], worker: [] as number[], database: [] as number[] };
    const runOnce = async (messages: number): Promise<number> => {
      const before = sink.count();
      const api0 = cpuOf(apiServices);
      const worker0 = cpuOf(workerServices);
      const backends = samplePostgresBackends(database);
      const wakeUps = await countWakeUps(url);
      const shares = apiServices.map((_, i) => Math.floor(messages / apis) + (i < messages % apis ? 1 : 0));
      const loads = await Promise.all(
        apiServices.map((api, i) => wrkSendLoad({ url: api.url!, projectKey: instance.projectKey, connections: Math.ceil(CONNECTIONS / apis), amount: shares[i] })),
      );
      const ok = loads.reduce((acc, l) => acc + l.ok, 0);
      if (ok !== messages) throw new Error(`${ok} of ${messages} send_message accepted: ${loads.map((l) => l.firstFailure).find(Boolean) ?? ''}`);
      const startedAt = Math.min(...loads.map((l) => l.startedAt));
      const lastAt = await sink.waitForCount(before + messages, deliveryTimeoutMs(messages));
      const elapsedS = (lastAt - startedAt) / 1000;
      const api = cpuOf(apiServices) - api0;
      const worker = cpuOf(workerServices) - worker0;
      const db = backends.stop();
      const notified = await wakeUps.stop();
      perRole.api.push((api * 1e6) / messages);
      perRole.worker.push((worker * 1e6) / messages);
      perRole.database.push((db * 1e6) / messages);
      log(
        `${id} ${label}: ${messages} accepted in ${Math.max(...loads.map((l) => l.durationS)).toFixed(1)} s, all at the sink after ${elapsedS.toFixed(1)} s; ` +
          `CPU per message: API ${perRole.api.at(-1)!.toFixed(0)} µs (${(api / elapsedS).toFixed(2)} cores), worker ${perRole.worker.at(-1)!.toFixed(0)} µs (${(worker / elapsedS).toFixed(2)} cores), ` +
          `PostgreSQL backends ${perRole.database.at(-1)!.toFixed(0)} µs (${(db / elapsedS).toFixed(2)} cores); ${notified} wake-ups (NOTIFY), ${(notified / messages).toFixed(3)} per message`,
      );
      return messages / elapsedS;
    };
    await runOnce(Math.min(2000, E2E_MESSAGES)); // warm-up: JIT, pools, SMTP connections
    perRole.api.length = 0;
    perRole.worker.length = 0;
    perRole.database.length = 0;
    const rates: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      rates.push(await runOnce(E2E_MESSAGES));
      log(`${id} end to end (${label}) run ${i + 1}: ${rates[i].toFixed(0)} msg/s`);
    }
    const value = median(rates);
    const relay = postfix?.relay.value ?? null;
    const ratio = relay ? value / relay : null;
    addFigure({
      id, name: `Posthorn end to end, ${label} (${E2E_MESSAGES} msgs)`, unit: 'msg/s', value, runs: rates,
      postfix: { label: 'Postfix relays, 2b', value: relay },
      target: '≥ 3× Postfix', met: ratio === null ? null : ratio >= 3,
      note: baseline ? `${(value / baseline).toFixed(2)}× the 1 API + 1 worker figure (5s) of this run, on ${os.availableParallelism()} cores shared with PostgreSQL, smtp-sink and the load generator` : undefined,
    });
    const cpuFigure = (role: string, runs: number[]) =>
      addFigure({ id, name: `CPU per message, ${role} (${label})`, unit: 'µs', value: median(runs), runs, postfix: { label: 'Postfix CPU per message, 2c', value: postfix?.cpu.value ?? null } });
    cpuFigure(`API process${apis > 1 ? 'es' : ''}`, perRole.api);
    cpuFigure(`worker process${workers > 1 ? 'es' : ''}`, perRole.worker);
    cpuFigure('PostgreSQL backends of the database', perRole.database);
    return value;
  });
}

async function createPostgresDatabase(baseUrl: string): Promise<string | { skip: string }> {
  const name = `posthorn_bench_${process.pid}_${Date.now().toString(36)}`;
  const admin = new pg.Client({ connectionString: baseUrl, connectionTimeoutMillis: 5000 });
  try {
    await admin.connect();
  } catch (error) {
    return { skip: `PostgreSQL is not reachable at ${baseUrl.replace(/\/\/[^@]*@/, '//')}: ${(error as Error).message}` };
  }
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  onCleanup(`database ${name}`, async () => {
    const c = new pg.Client({ connectionString: baseUrl, connectionTimeoutMillis: 5000 });
    await c.connect();
    try {
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    } finally {
      await c.end();
    }
  });
  const url = new URL(baseUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

// ---------------------------------------------------------------------------------------------
// 10. The busy machine

/** Each busy loop ends by itself after this long, whatever happens to the bench. */
const BUSY_LIMIT_S = 900;

/**
 * Postfix relaying (10a-c) and Posthorn end to end with `serve` defaults (10) while one busy-loop
 * process per core runs beside them: the lead on a machine with other work on its cores. The busy
 * loops are plain `node -e` spinning, each bounded by BUSY_LIMIT_S and killed when the figure ends,
 * each in a session of its own as other work on a machine would be: Postfix (its master makes its
 * own session) and Posthorn (bench/lib/posthorn.ts) each run in theirs, so the kernel's autogroup
 * scheduling treats both alike (docs/decisions/0003-performance.md, "Scheduling groups").
 */
async function measureBusyMachine(sink: Sink): Promise<void> {
  const cores = os.availableParallelism();
  const loops = Array.from({ length: cores }, (_, i) =>
    spawnChild(`busy loop ${i}`, process.execPath, ['-e', `const end = Date.now() + ${BUSY_LIMIT_S * 1000}; while (Date.now() < end) {}`], { detached: true }),
  );
  const release = onCleanup('busy loops', async () => {
    await Promise.all(loops.map((l) => l.stop(1000)));
  });
  try {
    log(`10 ${cores} busy-loop processes running`);
    const postfix = await measurePostfixRelay(sink, { id: '10', suffix: ', busy machine' });
    await measureEndToEnd('10', 'SQLite, serve defaults, busy machine', sink, await createInstance(), postfix.relay.value, null, postfix.cpu.value, [], '10b');
  } finally {
    await release();
  }
}

// ---------------------------------------------------------------------------------------------
// 6. History listing

/** `count` sequential POSTs of one body, timed by a client process of its own (bench/lib/sequential-client.ts). */
async function timeSequential(url: string, bodyFile: string, count: number): Promise<SequentialRun> {
  const run = await runCommand(process.execPath, ['--import', 'tsx', path.join(ROOT, 'bench', 'lib', 'sequential-client.ts'), url, bodyFile, String(count)], { cwd: ROOT, timeoutMs: 120_000 });
  if (run.code !== 0) throw new Error(`sequential client failed (${run.code}): ${run.stderr.trim().slice(-300)}`);
  return JSON.parse(run.stdout) as SequentialRun;
}

async function measureHistory(): Promise<void> {
  const instance = await createInstance();
  log(`6 seeding ${HISTORY_ROWS.toLocaleString('en-US')} transmissions (${HISTORY_PER_MESSAGE} per message) with direct SQL`);
  const seeded = seedHistory(path.join(instance.dataDir, 'posthorn.db'), { transmissions: HISTORY_ROWS, perMessage: HISTORY_PER_MESSAGE, spreadDays: 20 });
  log(`6 seeded ${seeded.transmissions} transmissions in ${(seeded.elapsedMs / 1000).toFixed(1)} s`);
  const profile = profileDir ? path.join(profileDir, 'history') : undefined;
  await withService(instance, { role: 'api', cpuProfDir: profile }, async (service) => {
    const url = `${service.url}/v.1.1/messages_history`;
    const lastPage = Math.ceil(HISTORY_ROWS / 250);
    // A date range of the last 10 of the 20 seeded days: about half the rows, paged from its far end.
    const from = new Date(Date.now() - 10 * 86_400_000).toISOString().slice(0, 10);
    const pages: Array<[string, number, Record<string, unknown>]> = [
      ['first page', 1, {}],
      [`middle page (${Math.ceil(lastPage / 2)})`, Math.ceil(lastPage / 2), {}],
      [`last page (${lastPage})`, lastPage, {}],
      [`page ${Math.floor(lastPage / 2) - 1} from ${from} (last days only)`, Math.floor(lastPage / 2) - 1, { from }],
    ];
    for (const [label, page, dates] of pages) {
      const body = { api_key: instance.projectKey, arguments: { ...dates, page, per_page: 250 } };
      const probe = await timePost(url, body);
      const records = probe.json?.data?.messages_history;
      if (probe.status !== 200 || !Array.isArray(records)) throw new Error(`messages_history page ${page}: ${probe.status} ${JSON.stringify(probe.json).slice(0, 300)}`);
      if (records.length !== 250) log(`6 note: page ${page} returned ${records.length} records, expected 250`);
      const p50: number[] = [];
      const p99: number[] = [];
      const cpuMs: number[] = [];
      const cpuWait: number[] = [];
      const bodyFile = path.join(instance.dataDir, 'history-request.json');
      fs.writeFileSync(bodyFile, JSON.stringify(body));
      for (let run = 0; run < RUNS; run++) {
        const cpu0 = service.cpuSeconds();
        const sched0 = service.sched();
        const timed = await timeSequential(url, bodyFile, HISTORY_REQUESTS);
        if (timed.statuses['200'] !== HISTORY_REQUESTS) throw new Error(`messages_history page ${page}: answers by status ${JSON.stringify(timed.statuses)}`);
        cpuMs.push(((service.cpuSeconds() - cpu0) * 1000) / HISTORY_REQUESTS);
        // The service is idle while the client process starts: its share of waiting is over the requests' time.
        cpuWait.push(describeSchedDelta(sched0, service.sched(), timed.elapsedMs).waitingForCpu);
        p50.push(percentile(timed.ms, 50));
        p99.push(percentile(timed.ms, 99));
      }
      const worst = median(p99);
      log(`6 history ${label}: p50 ${median(p50).toFixed(1)} ms, p99 ${worst.toFixed(1)} ms, service CPU ${median(cpuMs).toFixed(1)} ms per request, main thread waiting for a CPU ${(median(cpuWait) * 100).toFixed(0)}% (${records.length} records)`);
      addFigure({ id: '6', name: `messages_history ${label}, service CPU per request`, unit: 'ms', value: median(cpuMs), runs: cpuMs, digits: 1 });
      addFigure({ id: '6', name: `messages_history ${label}, p50`, unit: 'ms', value: median(p50), runs: p50, digits: 1 });
      addFigure({
        id: '6', name: `messages_history ${label}, p99`, unit: 'ms', value: worst, runs: p99, digits: 1, target: '< 10 ms', met: worst < 10,
        note:
          (records.length !== 250 ? `page ${page} returned ${records.length} records, not 250; ` : '') +
          `the service's main thread waited for a CPU ${(median(cpuWait) * 100).toFixed(0)}% of the time during these requests`,
      });
    }
    // 6n: what numbering costs (migration 140): rows written as ingest writes them (history_seq
    // NULL) are numbered by the next history request; its extra service CPU per numbered row.
    const LATE = 10_000;
    const body = { api_key: instance.projectKey, arguments: { page: 1, per_page: 250 } };
    const perRowUs: number[] = [];
    for (let run = 0; run < RUNS; run++) {
      appendUnnumbered(path.join(instance.dataDir, 'posthorn.db'), LATE);
      const cpu0 = service.cpuSeconds();
      const r = await timePost(url, body);
      if (r.status !== 200) throw new Error(`messages_history after appending: ${r.status}`);
      const cpu1 = service.cpuSeconds();
      await timePost(url, body);
      const baseline = service.cpuSeconds() - cpu1;
      perRowUs.push((((cpu1 - cpu0) - baseline) * 1e6) / LATE);
    }
    log(`6n numbering: ${median(perRowUs).toFixed(2)} µs of service CPU per new transmission`);
    addFigure({ id: '6n', name: `messages_history: numbering ${LATE.toLocaleString('en-US')} new transmissions, service CPU per row`, unit: 'µs', value: median(perRowUs), runs: perRowUs, digits: 2 });
  });
  if (profile) profileReports.push(reportProfile('messages_history pages (role api)', profile));
}

// ---------------------------------------------------------------------------------------------
// 7. Memory with a large queue; 7d the same drain with every message DKIM-signed

interface Drain {
  /** messages per second, from the worker's start to the last message at the sink */
  rate: number;
  /** the worker's CPU seconds */
  cpu: number;
  rss: { rss: number; peak: number } | null;
}

/** `count` send_message through an API-only process, then a worker-only process drains them to the sink. */
async function queueThenDrain(id: string, instance: Instance, sink: Sink, count: number, profile: string | undefined): Promise<Drain> {
  // An API-only process queues the transmissions (nothing delivers them yet)...
  await withService(instance, { role: 'api' }, async (service) => {
    const load = await sendLoad({ url: service.url!, projectKey: instance.projectKey, connections: CONNECTIONS, amount: count });
    if (load.ok !== count) throw new Error(`${load.ok} of ${count} send_message accepted: ${load.firstFailure ?? ''}`);
    log(`${id} queued ${count} transmissions in ${load.durationS.toFixed(1)} s`);
  });
  // ...then a worker-only process drains them to smtp-sink.
  // The sink's count is read before the worker starts: it delivers as soon as it runs, sometimes
  // before it says it is running, and a count read after that would wait for messages already in.
  let drain: Drain | null = null;
  const before = sink.count();
  await withService(instance, { role: 'worker', sinkPort: sink.port, cpuProfDir: profile }, async (worker) => {
    // When the first message is already in, the sink knows when it arrived.
    const started = sink.count() > before ? await sink.waitForCount(before + 1, 0) : performance.now();
    const cpu0 = worker.cpuSeconds();
    const sched0 = worker.sched();
    const lastAt = await sink.waitForCount(before + count, deliveryTimeoutMs(count));
    const cpu = worker.cpuSeconds() - cpu0;
    const sched = describeSchedDelta(sched0, worker.sched(), lastAt - started);
    drain = { rate: count / ((lastAt - started) / 1000), cpu, rss: worker.rss() };
    log(`${id} worker used ${(cpu / ((lastAt - started) / 1000)).toFixed(2)} cores, ${((cpu * 1e6) / count).toFixed(0)} µs CPU per delivered message, ${sched.text}`);
    log(`${id} worker drained ${count} in ${((lastAt - started) / 1000).toFixed(1)} s (${drain.rate.toFixed(0)} msg/s), peak RSS ${drain.rss?.peak.toFixed(0)} MiB`);
  });
  return drain!;
}

async function measureQueuedMemory(sink: Sink, postfixRelay: number | null, postfixRss: number | null, postfixCpuUs: number | null): Promise<void> {
  const profile = profileDir ? path.join(profileDir, 'worker-drain') : undefined;
  const { rate, cpu, rss } = await queueThenDrain('7', await createInstance(), sink, QUEUED, profile);
  addFigure({
    id: '7c', name: 'Worker CPU per delivered message', unit: 'µs', value: (cpu * 1e6) / QUEUED, runs: [],
    postfix: { label: 'Postfix CPU per message, 2c', value: postfixCpuUs },
  });
  addFigure({
    id: '7b', name: `Peak RSS of a worker draining ${QUEUED.toLocaleString('en-US')} queued`, unit: 'MiB', value: rss?.peak ?? null, runs: [],
    postfix: postfixRss === null ? null : { label: 'Postfix processes, summed PSS, during 2', value: postfixRss },
    target: '< 512 MiB', met: rss ? rss.peak < 512 : null,
  });
  addFigure({
    id: '7c', name: `Worker drain rate, ${QUEUED.toLocaleString('en-US')} queued -> smtp-sink`, unit: 'msg/s', value: rate, runs: [],
    postfix: { label: 'Postfix relays, 2b', value: postfixRelay },
  });
  if (profile) profileReports.push(reportProfile(`worker draining ${QUEUED} (role worker)`, profile));
}

/**
 * 7d: as 7c, with the sender's domain added to the account (`posthorn domain add`), so that every
 * message is DKIM-signed (RSA 2048, relaxed/relaxed), as a deployment with a verified domain sends.
 * Postfix (2b) signs nothing: a milter such as OpenDKIM would add its own cost there.
 */
async function measureSignedDrain(sink: Sink, postfixRelay: number | null, postfixCpuUs: number | null): Promise<void> {
  const instance = await createInstance();
  await addSigningDomain(instance, SENDER_DOMAIN);
  const count = Math.min(QUEUED, SIGNED_QUEUED);
  const { rate, cpu } = await queueThenDrain('7d', instance, sink, count, undefined);
  addFigure({
    id: '7d', name: 'Worker CPU per delivered message, DKIM-signed', unit: 'µs', value: (cpu * 1e6) / count, runs: [],
    postfix: { label: 'Postfix CPU per message, 2c, unsigned', value: postfixCpuUs },
  });
  addFigure({
    id: '7d', name: `Worker drain rate, ${count.toLocaleString('en-US')} queued, DKIM-signed -> smtp-sink`, unit: 'msg/s', value: rate, runs: [],
    postfix: { label: 'Postfix relays, 2b, unsigned', value: postfixRelay },
  });
}
/**
 * 7p: as 7c on PostgreSQL, after 20,000 messages delivered as they came, on a database as new as a
 * first deployment's (never analyzed): a worker process started on a backlog, as after an outage
 * of the workers or a burst they were not running for, drains it.
 */
async function measurePostgresDrain(url: string, sink: Sink, postfixRelay: number | null, postfixCpuUs: number | null): Promise<void> {
  const instance = await createInstance(url);
  // First a day's ordinary traffic, delivered as it comes: the table then holds sent rows beside
  // the burst, as a deployment's does.
  const before = sink.count();
  await withServices(instance, [{ role: 'worker', sinkPort: sink.port, extraArgs: ['--ops-port', '0'] }, { role: 'api' }], async ([, api]) => {
    const load = await sendLoad({ url: api.url!, projectKey: instance.projectKey, connections: CONNECTIONS, amount: DRAIN_HISTORY });
    if (load.ok !== DRAIN_HISTORY) throw new Error(`${load.ok} of ${DRAIN_HISTORY} send_message accepted: ${load.firstFailure ?? ''}`);
    await sink.waitForCount(before + DRAIN_HISTORY, deliveryTimeoutMs(DRAIN_HISTORY));
  });
  const { rate, cpu, rss } = await queueThenDrain('7p', instance, sink, QUEUED, undefined);
  addFigure({
    id: '7p', name: 'Worker CPU per delivered message, PostgreSQL (its backends not counted)', unit: 'µs', value: (cpu * 1e6) / QUEUED, runs: [],
    postfix: { label: 'Postfix CPU per message, 2c', value: postfixCpuUs },
  });
  addFigure({
    id: '7p', name: `Worker drain rate, PostgreSQL, ${QUEUED.toLocaleString('en-US')} queued -> smtp-sink`, unit: 'msg/s', value: rate, runs: [],
    postfix: { label: 'Postfix relays, 2b', value: postfixRelay },
  });
  addFigure({ id: '7p', name: `Peak RSS of a worker draining ${QUEUED.toLocaleString('en-US')} queued, PostgreSQL`, unit: 'MiB', value: rss?.peak ?? null, runs: [], target: '< 512 MiB', met: rss ? rss.peak < 512 : null });
}

/** Messages figure 7p delivers before its burst is queued. */
const DRAIN_HISTORY = 20_000;

/** Messages of figure 7d (at most --queued). */
const SIGNED_QUEUED = 20_000;

/**
 * The summaries of a run's profiles: one per process (serve's supervisor and its children each
 * write theirs), main threads only (the `.0.` of Node's file names; the checkpoint thread writes
 * its own), the busiest first.
 */
function reportProfile(title: string, dir: string): string {
  const files = fs.existsSync(dir) ? fs.readdirSync(dir).filter((f) => /\.\d+\.0\.\d+\.cpuprofile$/.test(f)) : [];
  if (files.length === 0) return `${title}: no profile written`;
  const summaries = files.map((f) => ({ file: path.join(dir, f), summary: summarizeProfile(path.join(dir, f), 25) }));
  summaries.sort((a, b) => a.summary.idleShare - b.summary.idleShare);
  const text = summaries.map(({ file, summary }) => formatProfile(`${title} [${file}]`, summary)).join('\n');
  log(text);
  return text;
}

// ---------------------------------------------------------------------------------------------

async function postgresVersion(baseUrl: string): Promise<string> {
  const c = new pg.Client({ connectionString: baseUrl, connectionTimeoutMillis: 3000 });
  try {
    await c.connect();
    const r = await c.query<{ server_version: string }>('SHOW server_version');
    return r.rows[0].server_version;
  } catch {
    return 'not reachable';
  } finally {
    await c.end().catch(() => {});
  }
}

async function main(): Promise<number> {
  hookSignals();
  const started = Date.now();
  const postfixVersion = await ensurePostfix(log);
  if (['3', '3o', '3p', '4', '4o', '4s', '5', '5s', '5d', '10'].some(wanted)) await ensureWrk(log);
  const machine = describeMachine(postfixVersion, await postgresVersion(args['pg-url']!));
  log(`${machine.cpu}, ${machine.cores} cores, ${machine.ramGiB.toFixed(1)} GiB, Node ${machine.node}, Postfix ${machine.postfix}; load ${machine.loadBefore}; one fsync-ed commit ${machine.commitMs.toFixed(2)} ms`);
  const sink = await startSink();
  onCleanup('smtp-sink', () => sink.stop());
  log(`smtp-sink on 127.0.0.1:${sink.port}`);

  let postfix: PostfixFigures | null = null;
  if (wanted('1')) await measureCeiling(sink).catch((e) => failed('1', 'Ceiling: smtp-source -> smtp-sink', 'msg/s', e));
  if (wanted('1n')) await measureNodemailerCeiling(sink).catch((e) => failed('1n', 'Nodemailer pooled client alone', 'msg/s', e));
  if (wanted('1c')) await measureComposition().catch((e) => failed('1c', 'Composing one message', 'µs', e));
  if (wanted('2')) postfix = await measurePostfixRelay(sink).catch((e) => (failed('2', 'Postfix as a relay', 'msg/s', e), null));
  if (wanted('3')) await measureIngest(postfix?.accept.value ?? null).catch((e) => failed('3', 'Posthorn ingest', 'msg/s', e, `≥ ${POSTFIX_FACTORS['3']}× Postfix (2a)`));
  if (wanted('3o')) {
    await measureIngest(postfix?.accept.value ?? null, { id: '3o', label: 'SQLite, one API process (--api-processes 1)', databaseUrl: null, extraArgs: ['--api-processes', '1'] }).catch((e) =>
      failed('3o', 'Posthorn ingest, one API process', 'msg/s', e),
    );
  }
  if (wanted('4')) {
    await createInstance()
      .then((instance) => measureEndToEnd('4', 'SQLite', sink, instance, postfix?.relay.value ?? null, postfix?.rssMiB ?? null, postfix?.cpu.value ?? null))
      .catch((e) => failed('4', 'Posthorn end to end, SQLite', 'msg/s', e, `≥ ${POSTFIX_FACTORS['4']}× Postfix`));
  }
  if (wanted('4o')) {
    await createInstance()
      .then((instance) => measureEndToEnd('4o', 'SQLite, one process (--processes 1)', sink, instance, postfix?.relay.value ?? null, null, postfix?.cpu.value ?? null, ['--processes', '1']))
      .catch((e) => failed('4o', 'Posthorn end to end, SQLite, one process', 'msg/s', e));
  }
  if (wanted('4s')) {
    await measureSplitEndToEnd(sink, postfix?.relay.value ?? null).catch((e) =>
      failed('4s', 'Posthorn end to end, SQLite, API and worker processes', 'msg/s', e, '≥ 3× Postfix'),
    );
  }
  if (wanted('3p')) {
    await onPostgres('3p', 'Posthorn ingest, PostgreSQL', (url) => measureIngest(postfix?.accept.value ?? null, { id: '3p', label: 'PostgreSQL', databaseUrl: url }));
  }
  if (wanted('5')) {
    await onPostgres('5', 'Posthorn end to end, PostgreSQL', async (url) =>
      measureEndToEnd('5', 'PostgreSQL', sink, await createInstance(url), postfix?.relay.value ?? null, null, postfix?.cpu.value ?? null),
    );
  }
  let split: number | null = null;
  if (wanted('5s')) {
    await onPostgres('5s', 'Posthorn end to end, PostgreSQL, 1 API + 1 worker process', async (url) => {
      split = await measurePostgresProcesses('5s', url, 1, 1, sink, postfix, null);
    });
  }
  if (wanted('5d')) {
    await onPostgres('5d', 'Posthorn end to end, PostgreSQL, 2 API + 2 worker processes', async (url) => {
      await measurePostgresProcesses('5d', url, 2, 2, sink, postfix, split);
    });
  }
  if (wanted('10')) await measureBusyMachine(sink).catch((e) => failed('10', 'Busy machine: Posthorn and Postfix end to end beside a busy loop per core', 'msg/s', e));
  if (wanted('6')) await measureHistory().catch((e) => failed('6', 'messages_history at 1,000,000', 'ms', e, '< 50 ms'));
  if (wanted('9')) {
    await measureDashboard({ runs: RUNS, rows: HISTORY_ROWS, log, serveArgs: SERVE_ARGS, nodeArgs: NODE_ARGS })
      .then((result) => result.forEach(addFigure))
      .catch((e) => failed('9', 'dashboard pages at 1,000,000 transmissions', 'ms', e, '< 100 ms'));
  }
  if (wanted('8')) {
    await measureSmtpSubmission({ sink, runs: RUNS, messages: E2E_MESSAGES, sessions: CONNECTIONS, bytes: MESSAGE_BYTES, log, serveArgs: SERVE_ARGS, nodeArgs: NODE_ARGS, timeoutMs: deliveryTimeoutMs })
      .then((result) => result.forEach(addFigure))
      .catch((e) => failed('8', 'SMTP submission accepts, beside Postfix smtpd', 'msg/s', e, '≥ 3× Postfix'));
  }
  if (wanted('7')) await measureQueuedMemory(sink, postfix?.relay.value ?? null, postfix?.rssMiB ?? null, postfix?.cpu.value ?? null).catch((e) => failed('7b', 'Peak RSS with 100,000 queued', 'MiB', e, '< 512 MiB'));
  if (wanted('7p')) {
    await onPostgres('7p', 'Worker drain rate, PostgreSQL', (url) => measurePostgresDrain(url, sink, postfix?.relay.value ?? null, postfix?.cpu.value ?? null));
  }
  if (wanted('7d')) await measureSignedDrain(sink, postfix?.relay.value ?? null, postfix?.cpu.value ?? null).catch((e) => failed('7d', 'Worker drain rate, DKIM-signed', 'msg/s', e));

  await runAllCleanups();
  figures.sort((a, b) => a.id.localeCompare(b.id, 'en', { numeric: true }));
  const table = formatTable(figures);
  process.stdout.write(`\n${table}\n`);
  for (const text of profileReports) process.stdout.write(`\n${text}\n`);

  const command = `npm run bench${process.argv.slice(2).length ? ' -- ' + process.argv.slice(2).join(' ') : ''}`;
  const settings = [
    `Posthorn revision ${gitRevision(ROOT)}; the bench took ${((Date.now() - started) / 1000).toFixed(0)} s; ${RUNS} run(s) per figure.`,
    `1c: ${COMPOSED_MESSAGES.toLocaleString('en-US')} compositions per run of each message, in a process of its own (bench/lib/composition.ts) after a warm-up: Posthorn's (dist/domain/compose-mime.js, as delivery composes) and Nodemailer's MailComposer compile().build() of the same message alternating; CPU (user + system) per message. Messages: the bench's send_message text, and an order confirmation of 16 KB of HTML (a table with inline styles, a few characters beyond ASCII) with its text.`,
    `Messages: one recipient, ~${MESSAGE_BYTES} bytes of body. smtp-source: ${SMTP_SESSIONS} parallel sessions, connections reused (-d), -l ${MESSAGE_BYTES}.`,
    `smtp-sink: \`smtp-sink -c -m 1024 127.0.0.1:PORT 1024\` (announces PIPELINING; its running counter tells when the last message is in).`,
    `Postfix relay (2): a private instance (own config, queue and data directories in a temporary directory), stock settings except: chroot off, local delivery off, relayhost [127.0.0.1]:SINK, no DNS (smtp_dns_support_level = disabled, smtp_host_lookup = native). 2a is smtp-source's time to hand N messages to Postfix (each queued and fsynced by cleanup); 2b is from the first message injected to the last at the sink.`,
    `Posthorn: \`node bin/posthorn.js serve --port 0 --mailer-host bench.local --transport-map bench.local=127.0.0.1:SINK\`, default settings otherwise (SQLite in WAL mode, group commit, every 200 sent only after its commit is on disk: see docs/decisions/0003-performance.md). Load: ${CONNECTIONS} keep-alive connections, a distinct uid per request; ingest (3, 3o, 3p) from wrk, one thread (a C client, as smtp-source is for Postfix's 2a; bench/lib/wrk.ts), and 3a from autocannon, its runs alternating with 3's on the same service; end to end (4, 4o, 4s, 5, 5s, 5d, 10) from wrk too, a fixed count per run (as smtp-source injects a fixed count into Postfix for 2b), each run timed from its first request to the last message at the sink.`,
    `3 runs \`--role api\` (the ingest path alone) with serve's defaults (on SQLite one API process per core, sharing the port, supervised: ${os.availableParallelism()} here); 3o the same with \`--api-processes 1\`; ${INGEST_SECONDS} s per run after a 2 s warm-up; p50/p99 are the load generator's per-request latencies. 4 and 5 run \`--role all\`: ${E2E_MESSAGES} messages per run after a warm-up of 2,000; the figure is messages divided by the time from the first request to the last message at the sink. 4s: the same with \`--role api\` and \`--role worker --poll-ms 20\` processes on the one SQLite file. CPU per message: user + system time of the service process(es), or of all Postfix processes (2c, including exited children), divided by the messages; "waiting for a CPU" is from /proc/PID/schedstat of the service's main thread.`,
    `3p, 5, 5s, 5d run on PostgreSQL (--pg-url, a fresh database per figure): 3p as 3 with DATABASE_URL; 5 as 4 (serve's defaults, \`--role all\`: an API and a delivery process on 2 or more cores); 5s one \`--role api\` and one \`--role worker --ops-port 0\` process, 5d two of each, the load split evenly over the API processes (as a load balancer would), the workers woken by LISTEN/NOTIFY. CPU per message per role: the API processes, the worker processes, and the PostgreSQL backends serving the bench's database (from /proc, sampled every 200 ms; the server's shared processes are not counted). Wake-ups are counted by a LISTEN connection of the bench.`,
    `6: ${HISTORY_ROWS.toLocaleString('en-US')} transmissions (${HISTORY_PER_MESSAGE} per message, created over 20 days) written with direct SQL, then ${HISTORY_REQUESTS} sequential messages_history requests (per_page 250) per page per run, over one keep-alive connection by a client process of its own (bench/lib/sequential-client.ts: each answer read in full, not parsed; p50 and p99 are its times from request to last byte). 6n: 10,000 transmissions appended as ingest writes them (not yet numbered), then one request numbers them; its service CPU less that of the next request, per row.`,
    `7a: VmHWM of the service process at the end of 4 (Postfix: the peak of the summed PSS, proportional set size, of its master and children, sampled every 100 ms during 2). 7b: ${QUEUED.toLocaleString('en-US')} single-recipient messages queued through the API by a \`--role api\` process, then a \`--role worker\` process drains them to smtp-sink; its VmHWM. 7p: the same on PostgreSQL (a fresh database, never analyzed), after ${DRAIN_HISTORY.toLocaleString('en-US')} messages delivered as they came (an API and a worker process), so that the burst waits beside sent rows.`,
  ];
  if (ONLY !== null && !args['no-write']) {
    log('--only: docs/benchmarks.md is written by full runs only; left alone');
  } else if (!args['no-write']) {
    const doc = path.join(ROOT, 'docs', 'benchmarks.md');
    fs.writeFileSync(doc, formatMarkdown(figures, machine, command, settings));
    log(`wrote ${path.relative(ROOT, doc)}`);
  }
  const missed = figures.filter((f) => f.met === false).map((f) => `${f.id} ${f.name}`);
  if (missed.length) log(`targets missed: ${missed.join('; ')}`);
  return 0;
}

main()
  .then((code) => (process.exitCode = code))
  .catch(async (error) => {
    process.stderr.write(`bench: ${(error as Error).stack ?? error}\n`);
    await runAllCleanups();
    process.exitCode = 1;
  });

// Figure 8 of `npm run bench` (docs/smtp-submission.md, docs/benchmarks.md): messages accepted per
// second over SMTP submission, side by side with Postfix's smtpd accepting the same load in the
// same run.
//
//   8a  smtp-source -> private Postfix (smtpd, queued on disk; it relays to smtp-sink meanwhile)
//   8b  bench/smtp-submission.ts --load -> posthorn serve --submission-port (AUTH PLAIN, durable
//       commit before each 250; delivery to smtp-sink runs meanwhile, in the same process)
//
// Both sides: the same number of sessions, each reusing its connection, one recipient per message,
// a body of the same size, no TLS (loopback; Postfix's smtp-source cannot authenticate or speak
// TLS, so Posthorn's side is plaintext AUTH on loopback, allowed there). The load generator runs
// in its own process (as smtp-source does), so it does not share the service's event loop.
//
// Alone: node --import tsx bench/run.ts --only 8 [--runs N --messages N]
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { runSource, startPostfixRelay, type Sink } from './lib/postfix.ts';
import { ROOT, serve, tailLog, RECIPIENT_DOMAIN, type Instance } from './lib/posthorn.ts';
import { describeSchedDelta, findFreePort, onCleanup, runCommand } from './lib/processes.ts';
import type { Figure } from './lib/report.ts';
import { median } from './lib/stats.ts';

const BIN = path.join(ROOT, 'bin', 'posthorn.js');
const SCRIPT = fileURLToPath(import.meta.url);

export interface SmtpSubmissionBenchOptions {
  sink: Sink;
  runs: number;
  messages: number;
  sessions: number;
  bytes: number;
  log: (line: string) => void;
  serveArgs?: string[];
  nodeArgs?: string[];
  /** how long a run of n messages may take before it counts as failed */
  timeoutMs: (messages: number) => number;
}

interface SubmissionInstance extends Instance {
  projectUid: string;
}

/** A fresh data directory and `posthorn init --json` in it, keeping the project uid (the AUTH user). */
async function createSubmissionInstance(): Promise<SubmissionInstance> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'posthorn-bench-smtp-'));
  onCleanup(`data dir ${dataDir}`, () => fs.rmSync(dataDir, { recursive: true, force: true }));
  const env = { ...process.env };
  delete env.DATABASE_URL;
  const run = await runCommand(process.execPath, [BIN, 'init', '--json', '--data', dataDir, '--mailer-host', 'bench.local', '--name', 'Bench', '--project-name', 'Bench'], {
    cwd: ROOT,
    env,
    timeoutMs: 120_000,
  });
  if (run.code !== 0) throw new Error(`posthorn init failed (${run.code}): ${(run.stderr || run.stdout).trim().split('\n').slice(-5).join('\n')}`);
  const printed = JSON.parse(run.stdout.trim().split('\n').pop()!) as { project: { api_key: string; uid: string } };
  return { dataDir, databaseUrl: null, projectKey: printed.project.api_key, projectUid: printed.project.uid };
}

interface LoadRun {
  elapsedMs: number;
  ok: number;
  failed: number;
  firstFailure: string | null;
}

async function runLoad(port: number, instance: SubmissionInstance, sessions: number, messages: number, bytes: number, offset: number, timeoutMs: number): Promise<LoadRun> {
  const run = await runCommand(
    process.execPath,
    ['--import', 'tsx', SCRIPT, '--load', String(port), instance.projectUid, instance.projectKey, String(sessions), String(messages), String(bytes), String(offset)],
    { cwd: ROOT, timeoutMs },
  );
  if (run.code !== 0) throw new Error(`the SMTP load generator exited ${run.code}: ${run.stderr.trim().split('\n').slice(-3).join(' ')}`);
  return JSON.parse(run.stdout.trim().split('\n').pop()!) as LoadRun;
}

export async function measureSmtpSubmission(opts: SmtpSubmissionBenchOptions): Promise<Figure[]> {
  const { sink, runs, messages, sessions, bytes, log } = opts;
  // 8a: Postfix accepting, as figure 2a measures it.
  const postfixRates: number[] = [];
  const relay = await startPostfixRelay(sink.port);
  try {
    let before = sink.count();
    await runSource({ port: relay.port, sessions, messages: 1000, bytes, timeoutMs: 120_000 });
    await sink.waitForCount(before + 1000, opts.timeoutMs(1000));
    for (let i = 0; i < runs; i++) {
      before = sink.count();
      const run = await runSource({ port: relay.port, sessions, messages, bytes, timeoutMs: opts.timeoutMs(messages) });
      postfixRates.push(messages / (run.elapsedMs / 1000));
      log(`8a postfix smtpd run ${i + 1}: accepted ${postfixRates[i].toFixed(0)} msg/s`);
      await sink.waitForCount(before + messages, opts.timeoutMs(messages));
    }
  } finally {
    await relay.stop();
  }
  const postfixAccept = median(postfixRates);

  // 8b: Posthorn's SMTP submission, delivery running in the same process as it would.
  const rates = await measurePosthorn(opts);
  const figure = (id: string, name: string, runsOf: number[]): Figure => {
    const value = median(runsOf);
    const ratio = postfixAccept > 0 ? value / postfixAccept : null;
    return {
      id, name, unit: 'msg/s', value, runs: runsOf,
      postfix: { label: 'Postfix smtpd accepts, 8a', value: postfixAccept },
      target: '≥ 3× Postfix', met: ratio === null ? null : ratio >= 3,
      note: ratio === null ? undefined : `${ratio.toFixed(2)}× Postfix in this run`,
    };
  };
  return [
    { id: '8a', name: `Postfix smtpd accepts (smtp-source, ${sessions} sessions, ${messages} msgs)`, unit: 'msg/s', value: postfixAccept, runs: postfixRates },
    figure('8b', `Posthorn SMTP submission accepts (AUTH, durable, ${sessions} sessions, ${messages} msgs)`, rates),
  ];
}

/** Messages accepted per second over SMTP submission, one rate per run (after a warm-up of 1,000). */
async function measurePosthorn(opts: SmtpSubmissionBenchOptions): Promise<number[]> {
  const { sink, runs, messages, sessions, bytes, log } = opts;
  const id = '8b';
  const instance = await createSubmissionInstance();
  const port = await findFreePort();
  const service = await serve(instance, {
    role: 'all',
    sinkPort: sink.port,
    nodeArgs: opts.nodeArgs,
    extraArgs: [
      '--submission-port', String(port), '--submission-host', '127.0.0.1',
      // smtp-source keeps each session for all its messages: so does the load generator here.
      '--submission-max-messages-per-connection', String(messages * 2),
      ...(opts.serveArgs ?? []),
    ],
  });
  const releaseService = onCleanup(`posthorn service (smtp submission, ${id})`, () => service.stop());
  const rates: number[] = [];
  try {
    let offset = 0;
    const beforeWarm = sink.count();
    const warm = await runLoad(port, instance, sessions, 1000, bytes, offset, opts.timeoutMs(1000));
    offset += 1000;
    if (warm.failed > 0) throw new Error(`warm-up: ${warm.failed} of 1000 refused: ${warm.firstFailure}`);
    await sink.waitForCount(beforeWarm + 1000, opts.timeoutMs(1000));
    for (let i = 0; i < runs; i++) {
      const before = sink.count();
      const cpu0 = service.cpuSeconds();
      const sched0 = service.sched();
      const run = await runLoad(port, instance, sessions, messages, bytes, offset, opts.timeoutMs(messages));
      const cpuUs = ((service.cpuSeconds() - cpu0) * 1e6) / messages;
      const sched = describeSchedDelta(sched0, service.sched(), run.elapsedMs);
      offset += messages;
      if (run.failed > 0) throw new Error(`${run.failed} of ${messages} submissions refused: ${run.firstFailure}`);
      rates.push(messages / (run.elapsedMs / 1000));
      // The service's CPU covers its delivery process too, which relays to smtp-sink meanwhile.
      log(`${id} posthorn smtp submission run ${i + 1}: accepted ${rates[i].toFixed(0)} msg/s; service ${cpuUs.toFixed(0)} µs CPU per message (accepting and delivering meanwhile), its main threads waiting for a CPU ${(sched.waitingForCpu * 100).toFixed(0)}% of the time`);
      // Let delivery catch up before the next run, so every run starts from the same state.
      await sink.waitForCount(before + messages, opts.timeoutMs(messages));
    }
  } catch (error) {
    throw new Error(`${(error as Error).message}\n--- service log tail ---\n${tailLog(instance)}`);
  } finally {
    await releaseService();
  }
  return rates;
}

// ---------------------------------------------------------------------------------------------
// The load generator (its own process): `sessions` SMTP sessions, each AUTH PLAIN once, then
// MAIL/RCPT/DATA pipelined per message, waiting for the 250 before the next; every message
// distinct (its own Message-ID) and of `bytes` body bytes, like smtp-source -l.

class Session {
  private buffer = '';
  private readonly waiting: Array<{ resolve: (reply: string) => void; reject: (error: Error) => void }> = [];
  private readonly replies: string[] = [];
  private closed = false;

  constructor(private readonly socket: net.Socket) {
    socket.setNoDelay(true);
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      this.buffer += chunk;
      for (;;) {
        const m = /^(?:\d{3}-[^\r\n]*\r\n)*\d{3}(?: [^\r\n]*)?\r\n/.exec(this.buffer);
        if (!m) break;
        this.buffer = this.buffer.slice(m[0].length);
        const waiter = this.waiting.shift();
        if (waiter) waiter.resolve(m[0]);
        else this.replies.push(m[0]);
      }
    });
    socket.once('close', () => {
      this.closed = true;
      for (const w of this.waiting.splice(0)) w.reject(new Error('connection closed'));
    });
  }

  reply(): Promise<string> {
    const ready = this.replies.shift();
    if (ready !== undefined) return Promise.resolve(ready);
    if (this.closed) return Promise.reject(new Error('connection closed'));
    return new Promise((resolve, reject) => this.waiting.push({ resolve, reject }));
  }

  send(text: string): void {
    this.socket.write(text);
  }
}

async function expect(session: Session, code: string): Promise<void> {
  const reply = await session.reply();
  if (!reply.startsWith(code)) throw new Error(reply.trim());
}

async function runLoadGenerator(argv: string[]): Promise<void> {
  const [portText, user, pass, sessionsText, messagesText, bytesText, offsetText] = argv;
  const port = Number(portText);
  const sessions = Number(sessionsText);
  const messages = Number(messagesText);
  const bytes = Number(bytesText);
  const offset = Number(offsetText);
  const line = 'x'.repeat(62) + '\r\n';
  const body = line.repeat(Math.max(1, Math.floor(bytes / line.length)));
  let next = 0;
  let ok = 0;
  let failed = 0;
  let firstFailure: string | null = null;
  const started = performance.now();
  const worker = async () => {
    const socket = net.connect(port, '127.0.0.1');
    await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
    const session = new Session(socket);
    await expect(session, '220');
    session.send('EHLO load.bench.local\r\n');
    await expect(session, '250');
    session.send(`AUTH PLAIN ${Buffer.from(`\0${user}\0${pass}`).toString('base64')}\r\n`);
    await expect(session, '235');
    while (next < messages) {
      const n = offset + next++;
      session.send(`MAIL FROM:<sender@source.bench.local>\r\nRCPT TO:<rcpt${n % 1000}@${RECIPIENT_DOMAIN}>\r\nDATA\r\n`);
      const replies = [await session.reply(), await session.reply(), await session.reply()];
      if (!replies[0].startsWith('250') || !replies[1].startsWith('250') || !replies[2].startsWith('354')) {
        failed++;
        firstFailure ??= replies.map((r) => r.trim()).join(' / ');
        if (replies[2].startsWith('354')) {
          session.send('.\r\n');
          await session.reply();
        }
        continue;
      }
      session.send(
        `From: <sender@source.bench.local>\r\nTo: <rcpt${n % 1000}@${RECIPIENT_DOMAIN}>\r\nSubject: bench ${n}\r\nMessage-ID: <smtp-bench-${n}-${process.pid}@source.bench.local>\r\n\r\n${body}.\r\n`,
      );
      const answer = await session.reply();
      if (answer.startsWith('250')) ok++;
      else {
        failed++;
        firstFailure ??= answer.trim();
      }
    }
    session.send('QUIT\r\n');
    socket.end();
  };
  await Promise.all(Array.from({ length: sessions }, worker));
  process.stdout.write(`${JSON.stringify({ elapsedMs: performance.now() - started, ok, failed, firstFailure })}\n`);
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href && process.argv[2] === '--load') {
  runLoadGenerator(process.argv.slice(3)).catch((error: unknown) => {
    process.stderr.write(`${(error as Error).stack ?? String(error)}\n`);
    process.exit(1);
  });
}

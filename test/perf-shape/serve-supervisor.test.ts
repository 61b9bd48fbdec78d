// `posthorn serve` on more than one core (src/cli/supervisor.ts, docs/operations.md "Processes"):
// the one command starts an API process and a delivery process on the one database and supervises
// them. Real `node bin/posthorn.js` processes and a real SMTP server in this process.
//
//   - By default on SQLite (explicitly with --processes 2 on PostgreSQL) it announces role all with
//     two child pids; a message sent to the API process is delivered by the other, woken through
//     the supervisor (the idle poll is set to 10 minutes, so only the relayed wake-up can explain a
//     delivery within the bound).
//   - As many API processes as cores: every thread of theirs (the acceptance thread, started for a
//     send, among them) runs API_NICENESS steps below the supervisor's priority, the delivery
//     process's at it; with fewer, all at it.
//   - kill -9 of the supervisor leaves no child behind; SIGTERM stops all three with exit 0.
//   - /readyz on --port (the API process's) reports the delivery process's state: running;
//     restarting, and why, while it is down, and still 200 (the API accepts and stores meanwhile);
//     running again once the supervisor restarted it.
//   - The watchdog (--watchdog-ms, 3 s here): a delivery process stopped with SIGSTOP answers no
//     ping; it is logged once, killed and restarted, /readyz says `restarting (not answering)`
//     meanwhile, the API process (which answers) is left alone, and a message accepted while the
//     delivery process was stopped is delivered by the new one.
//   - --processes 1 runs everything in one process, as before.
//   - --role api --api-processes 2: two API processes share the one port, connections handed out
//     in turn (both answer); /metrics from either counts the requests both answered; one killed
//     is restarted while the other goes on answering; /metrics does not wait for the part of one
//     that dies while it is awaited; --rate-limit-per-key lets a key through as many times in all
//     as it says, not that many per process.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { SMTPServer } from 'smtp-server';
import { freshDatabaseUrl, releaseDatabaseUrl, testDatabase } from '../helpers/databases.ts';
import { BIN, startPosthorn, stopAll, type PosthornProcess } from '../helpers/processes.ts';
import { until } from '../helpers/wait.ts';
import { parsePrometheus, sampleValue } from '../ops/prometheus.ts';
import { API_NICENESS } from '../../src/cli/supervisor.ts';

const DELIVERY_LIMIT_MS = 20_000;
const EXIT_LIMIT_MS = 10_000;

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    // A zombie (exited, not yet reaped by its new parent) counts as gone.
    return !/^\S+ \(.*\) Z/.test(fs.readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

/** Bounded wait for every pid to be gone; returns those still alive at the deadline. */
async function waitGone(pids: number[], limitMs: number): Promise<number[]> {
  const deadline = Date.now() + limitMs;
  while (Date.now() < deadline) {
    if (!pids.some(alive)) return [];
    await new Promise((r) => setTimeout(r, 50));
  }
  return pids.filter(alive);
}

/** The niceness of every thread of a process. */
function threadNiceness(pid: number): number[] {
  return fs.readdirSync(`/proc/${pid}/task`).map((tid) => os.getPriority(Number(tid)));
}

function childPids(line: Record<string, unknown>): number[] {
  return ((line.processes as Array<{ pid: number }> | undefined) ?? []).map((p) => p.pid);
}

describe(`serve supervises an API and a delivery process (${testDatabase()})`, () => {
  let dataDir: string;
  let databaseUrl: string | null;
  let env: Record<string, string>;
  let projectKey: string;
  let sinkPort: number;
  const delivered: string[] = [];
  let sink: SMTPServer;
  // One API process, whatever the cores (the default is one per core less the delivery's: 1 on 2).
  const supervisedArgs = () => ['serve', '--port', '0', '--poll-ms', '600000', '--transport-map', `sink.test=127.0.0.1:${sinkPort}`, '--api-processes', '1', ...(databaseUrl ? ['--processes', '2'] : [])];

  before(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'posthorn-supervisor-'));
    databaseUrl = await freshDatabaseUrl();
    env = {
      POSTHORN_DATA: dataDir, DATABASE_URL: databaseUrl ?? '', POSTHORN_SECRET_KEY: 'supervisor-test-key', LOG_LEVEL: 'info',
      POSTHORN_MAILER_HOST: 'posthorn.test', POSTHORN_DNS_SERVERS: '127.0.0.1:9', POSTHORN_OPS_PORT: '0',
    };
    const init = await new Promise<{ code: number | null; stdout: string }>((resolve) => {
      const child = spawn(process.execPath, [BIN, 'init', '--json'], { env: { ...process.env, ...env, LOG_LEVEL: 'warn' }, stdio: ['ignore', 'pipe', 'inherit'] });
      let stdout = '';
      child.stdout.on('data', (d) => (stdout += d));
      child.on('exit', (code) => resolve({ code, stdout }));
    });
    assert.equal(init.code, 0);
    projectKey = JSON.parse(init.stdout).project.api_key;
    sink = new SMTPServer({
      hideSTARTTLS: true, authOptional: true, disabledCommands: ['AUTH', 'STARTTLS'], logger: false, closeTimeout: 100,
      onData(stream, session, callback) {
        stream.resume();
        stream.on('end', () => {
          for (const r of session.envelope.rcptTo) delivered.push(r.address);
          callback(null);
        });
      },
    });
    await new Promise<void>((resolve) => sink.listen(0, '127.0.0.1', resolve));
    sinkPort = ((sink as unknown as { server: net.Server }).server.address() as net.AddressInfo).port;
  });
  after(async () => {
    await stopAll();
    await new Promise<void>((resolve) => sink.close(() => resolve()));
    await releaseDatabaseUrl(databaseUrl);
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  const sendBody = (to: string) =>
    JSON.stringify({ api_key: projectKey, uid: to, arguments: { recipients: to, headers: { from: 'a@posthorn.test', subject: 's' }, content: { 'text/plain': 'x' } } });
  const send = async (url: string, to: string) => {
    const r = await fetch(`${url}/v.1.0/send_message.json`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: sendBody(to) });
    assert.equal(r.status, 200, await r.text());
  };
  const sendOnNewConnection = (url: string, to: string) =>
    new Promise<void>((resolve, reject) => {
      const request = http.request(`${url}/v.1.0/send_message.json`, { method: 'POST', agent: false, headers: { 'content-type': 'application/json' } }, (response) => {
        let text = '';
        response.on('data', (d) => (text += d));
        response.on('end', () => (response.statusCode === 200 ? resolve() : reject(new Error(`${response.statusCode} ${text}`))));
      });
      request.on('error', reject);
      request.end(sendBody(to));
    });
  const waitDelivered = async (to: string, proc: PosthornProcess) => {
    const deadline = Date.now() + DELIVERY_LIMIT_MS;
    while (!delivered.includes(to)) {
      assert.ok(Date.now() < deadline, `${to} not delivered within ${DELIVERY_LIMIT_MS} ms\n${proc.tail()}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };

  it('runs two processes, delivers through the relayed wake-up, and leaves no child after kill -9', async () => {
    const serve = startPosthorn('serve', supervisedArgs(), env);
    const running = await serve.waitForLog((l) => l.msg === 'posthorn is running', 'startup');
    assert.equal(running.role, 'all');
    assert.ok((running.background as string[]).includes('delivery'));
    const pids = childPids(running);
    assert.equal(pids.length, 2, JSON.stringify(running));
    assert.ok(pids.every(alive) && !pids.includes(serve.pid));
    // Each child's young generation is capped (supervisor.ts childExecArgv); the supervisor's is not.
    const nodeArgs = (pid: number) => fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    for (const pid of pids) assert.ok(nodeArgs(pid).includes('--max-semi-space-size=8'), nodeArgs(pid).join(' '));
    assert.ok(!nodeArgs(serve.pid).some((a) => a.includes('semi-space')));
    await send(running.url as string, 'one@sink.test');
    await waitDelivered('one@sink.test', serve);
    // /metrics on the service's port is the whole service's: the delivery process's attempts too.
    // The attempt is counted once its finish is written, a moment after the sink has the message.
    let attempts: RegExpExecArray | null = null;
    for (const deadline = Date.now() + 10_000; !attempts && Date.now() < deadline; await new Promise((r) => setTimeout(r, 100))) {
      attempts = /^posthorn_delivery_attempts_total\{[^}]*outcome="sent"[^}]*\} (\d+)/m.exec(await (await fetch(`${running.url}/metrics`)).text());
    }
    assert.ok(attempts && Number(attempts[1]) >= 1, `the delivery process's attempts are on ${running.url}/metrics`);
    // Fewer API processes than cores (one, on 2 cores): all at the supervisor's priority.
    if (os.availableParallelism() > 1) for (const pid of pids) assert.deepEqual(new Set(threadNiceness(pid)), new Set([os.getPriority(serve.pid)]));
    await serve.kill();
    assert.deepEqual(await waitGone(pids, EXIT_LIMIT_MS), [], 'children outlived the supervisor');
  });

  const cores = os.availableParallelism();
  it('as many API processes as cores run below the delivery process\'s priority', { skip: cores > 4 ? `${cores} cores: as many API processes would be too many for a test` : false }, async () => {
    const serve = startPosthorn('serve', [...supervisedArgs(), '--api-processes', String(cores), '--processes', '2'], env);
    const running = await serve.waitForLog((l) => l.msg === 'posthorn is running', 'startup');
    const [worker, ...apis] = childPids(running);
    assert.equal(apis.length, cores, JSON.stringify(running));
    // One connection each, handed out in turn: every API process accepts one and so has started its
    // acceptance thread.
    for (let i = 0; i < cores; i++) await sendOnNewConnection(running.url as string, `lowered${i}@sink.test`);
    for (let i = 0; i < cores; i++) await waitDelivered(`lowered${i}@sink.test`, serve);
    const base = os.getPriority(serve.pid);
    for (const api of apis) {
      const threads = threadNiceness(api);
      assert.ok(threads.length > 1, 'the API process has threads');
      assert.deepEqual(new Set(threads), new Set([Math.min(19, base + API_NICENESS)]), `API process ${api}: ${threads.join(' ')}`);
    }
    assert.deepEqual(new Set(threadNiceness(worker)), new Set([base]));
    await serve.stop();
  });

  it('restarts a child that dies, and stops everything with exit 0 on SIGTERM', async () => {
    const serve = startPosthorn('serve', supervisedArgs(), env);
    const running = await serve.waitForLog((l) => l.msg === 'posthorn is running', 'startup');
    const [worker, api] = childPids(running);
    process.kill(worker, 'SIGKILL');
    const restarted = await serve.waitForLog((l) => l.msg === 'posthorn process restarted', 'the restart');
    assert.equal(restarted.role, 'worker');
    assert.notEqual(restarted.pid, worker);
    await send(running.url as string, 'two@sink.test');
    await waitDelivered('two@sink.test', serve);
    const { code } = await serve.stop();
    assert.equal(code, 0, serve.tail());
    assert.deepEqual(await waitGone([api, restarted.pid as number], EXIT_LIMIT_MS), []);
  });

  it('/readyz on --port reports the delivery process: restarting while it is down (still ready), running once restarted', async () => {
    const serve = startPosthorn('serve', supervisedArgs(), env);
    const running = await serve.waitForLog((l) => l.msg === 'posthorn is running', 'startup');
    const url = running.url as string;
    const [worker] = childPids(running);
    const readyz = async () => {
      const r = await fetch(`${url}/readyz`);
      return { status: r.status, body: (await r.json()) as { status: string; checks: Record<string, string> } };
    };
    const first = await until('the delivery process reported running on /readyz', async () => {
      const answer = await readyz();
      return answer.body.checks.delivery === 'running' && answer;
    });
    assert.equal(first.status, 200);
    assert.deepEqual(first.body, { status: 'ready', checks: { database: 'ok', migrations: 'ok', loops: 'none', delivery: 'running' } });
    process.kill(worker, 'SIGKILL');
    // The supervisor restarts it after RESTART_FIRST_MS (500 ms) and it then starts: a window much
    // wider than one /readyz apart.
    const down = await until('/readyz reporting the delivery process restarting', async () => {
      const answer = await readyz();
      return answer.body.checks.delivery !== 'running' && answer;
    });
    assert.equal(down.body.checks.delivery, 'restarting (killed by SIGKILL)');
    assert.equal(down.status, 200, 'the API stays ready while the delivery process restarts');
    assert.equal(down.body.status, 'ready');
    // The same for Prometheus (deploy/prometheus: PosthornDeliveryProcessRestarting).
    const metrics = async () => parsePrometheus(await (await fetch(`${url}/metrics`)).text());
    const restarting = await metrics();
    assert.deepEqual(restarting.filter((s) => s.name === 'posthorn_delivery_process_up').map((s) => [s.labels.state, s.value]), [['restarting', 0]]);
    assert.equal(sampleValue(restarting, 'posthorn_delivery_process_restarts_total'), 1);
    await send(url, 'during-restart@sink.test');
    const again = await until('/readyz reporting the delivery process running again', async () => {
      const answer = await readyz();
      return answer.body.checks.delivery === 'running' && answer;
    }, 30_000);
    assert.equal(again.status, 200);
    const back = await metrics();
    assert.deepEqual(back.filter((s) => s.name === 'posthorn_delivery_process_up').map((s) => [s.labels.state, s.value]), [['running', 1]]);
    assert.equal(sampleValue(back, 'posthorn_delivery_process_restarts_total'), 1, 'one restart, counted once');
    const restarted = await serve.waitForLog((l) => l.msg === 'posthorn process restarted' && l.role === 'worker', 'the restart');
    assert.notEqual(restarted.pid, worker);
    // The message accepted meanwhile is delivered by the new delivery process.
    await waitDelivered('during-restart@sink.test', serve);
    assert.equal((await serve.stop()).code, 0, serve.tail());
  });

  it('the watchdog kills a delivery process that stopped answering and restarts it; mail accepted meanwhile is delivered', async () => {
    const WATCHDOG_MS = 3000;
    const serve = startPosthorn('serve', [...supervisedArgs(), '--watchdog-ms', String(WATCHDOG_MS)], env);
    const running = await serve.waitForLog((l) => l.msg === 'posthorn is running', 'startup');
    const url = running.url as string;
    const [worker, api] = childPids(running);
    const readyz = async () => (await (await fetch(`${url}/readyz`)).json()) as { status: string; checks: Record<string, string> };
    await until('the delivery process reported running on /readyz', async () => (await readyz()).checks.delivery === 'running');
    process.kill(worker, 'SIGSTOP');
    try {
      await send(url, 'while-stopped@sink.test');
      const warned = await serve.waitForLog((l) => l.msg === 'a posthorn process stopped answering; killing it to restart it', 'the watchdog', 30_000);
      assert.equal(warned.role, 'worker');
      assert.equal(warned.pid, worker);
      assert.equal(warned.level, 40, 'a warning');
      // Not before the bound: silent that long since its last answer (a ping interval or less before the stop).
      assert.ok((warned.silentMs as number) >= WATCHDOG_MS, JSON.stringify(warned));
      const down = await until('/readyz reporting the delivery process restarting', async () => {
        const answer = await readyz();
        return answer.checks.delivery !== 'running' && answer;
      });
      assert.equal(down.checks.delivery, 'restarting (not answering)');
      assert.equal(down.status, 'ready', 'the API stays ready');
      const restarted = await serve.waitForLog((l) => l.msg === 'posthorn process restarted' && l.role === 'worker', 'the restart', 30_000);
      assert.notEqual(restarted.pid, worker);
      assert.deepEqual(await waitGone([worker], EXIT_LIMIT_MS), [], 'the stopped process was killed');
      // The message accepted while the delivery process was stopped is delivered by the new one.
      await waitDelivered('while-stopped@sink.test', serve);
      await until('/readyz reporting the delivery process running again', async () => (await readyz()).checks.delivery === 'running', 30_000);
    } finally {
      if (alive(worker)) process.kill(worker, 'SIGKILL');
    }
    // The API process answered every ping: left alone, and the warning said once.
    assert.ok(alive(api));
    assert.equal(serve.lines.filter((l) => l.msg === 'a posthorn process stopped answering; killing it to restart it').length, 1);
    assert.equal((await serve.stop()).code, 0, serve.tail());
  });

  it('--role api --api-processes 2 shares the port between two API processes, and /metrics counts both', async () => {
    const serve = startPosthorn('serve', [...supervisedArgs(), '--role', 'api', '--api-processes', '2', '--access-log'], env);
    const running = await serve.waitForLog((l) => l.msg === 'posthorn is running', 'startup');
    assert.equal(running.role, 'api');
    const pids = childPids(running);
    assert.equal(pids.length, 2, JSON.stringify(running));
    assert.deepEqual((running.processes as Array<{ role: string }>).map((p) => p.role), ['api', 'api']);
    const url = running.url as string;
    // Each request on a connection of its own: the supervisor hands connections out in turn.
    const SENT = 12;
    for (let i = 0; i < SENT; i++) {
      const r = await fetch(`${url}/v.1.0/send_message.json`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', connection: 'close' },
        body: JSON.stringify({ api_key: projectKey, uid: `shared-port-${i}`, arguments: { recipients: `shared${i}@sink.test`, headers: { from: 'a@posthorn.test', subject: 's' }, content: { 'text/plain': 'x' } } }),
      });
      assert.equal(r.status, 200, await r.text());
    }
    const answeredBy = new Set(serve.lines.filter((l) => l.event === 'http_request' && l.api_method === 'send_message').map((l) => l.pid));
    assert.deepEqual([...answeredBy].sort(), [...pids].sort(), 'both API processes answered');
    // Whichever process answers /metrics, it counts what both answered.
    const accepted = async () => {
      const r = await fetch(`${url}/metrics`, { headers: { connection: 'close' } });
      assert.equal(r.status, 200);
      const text = await r.text();
      const line = text.split('\n').find((l) => l.startsWith('posthorn_api_requests_total{method="send_message",status="200"}'));
      assert.ok(line, text.slice(0, 500));
      return { count: Number(line.split(' ').pop()), queueLines: text.split('\n').filter((l) => l.startsWith('posthorn_database_up ')) };
    };
    for (let i = 0; i < 2; i++) {
      const { count, queueLines } = await accepted();
      assert.equal(count, SENT);
      assert.deepEqual(queueLines, ['posthorn_database_up 1'], 'a figure of the database once, not summed');
    }
    process.kill(pids[0], 'SIGKILL');
    const restarted = await serve.waitForLog((l) => l.msg === 'posthorn process restarted', 'the restart');
    assert.equal(restarted.role, 'api');
    const r = await fetch(`${url}/healthz`, { headers: { connection: 'close' } });
    assert.equal(r.status, 200);
    const { code } = await serve.stop();
    assert.equal(code, 0, serve.tail());
    assert.deepEqual(await waitGone([pids[1], restarted.pid as number], EXIT_LIMIT_MS), []);
  });

  it('--rate-limit-per-key is one budget across the API processes, not one per process', async () => {
    const LIMIT = 4;
    const serve = startPosthorn('serve', [...supervisedArgs(), '--role', 'api', '--api-processes', '2', '--access-log', '--rate-limit-per-key', `${LIMIT}/1h`], env);
    const running = await serve.waitForLog((l) => l.msg === 'posthorn is running', 'startup');
    const url = running.url as string;
    // Each request on a connection of its own (handed to the processes in turn), spaced well past
    // the 50 ms in which a process tells the others what it let through.
    const statuses: number[] = [];
    for (let i = 0; i < 3 * LIMIT; i++) {
      const r = await fetch(`${url}/v.1.0/get_method_list.json`, { method: 'POST', headers: { 'content-type': 'application/json', connection: 'close' }, body: JSON.stringify({ api_key: projectKey }) });
      await r.text();
      statuses.push(r.status);
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    const answeredBy = new Set(serve.lines.filter((l) => l.event === 'http_request').map((l) => l.pid));
    assert.equal(answeredBy.size, 2, 'both API processes answered');
    // Per process it would be LIMIT each, 2 x LIMIT in all.
    assert.equal(statuses.filter((s) => s === 200).length, LIMIT, statuses.join(' '));
    assert.ok(statuses.slice(LIMIT).every((s) => s === 429), statuses.join(' '));
    const { code } = await serve.stop();
    assert.equal(code, 0, serve.tail());
  });

  it('/metrics does not wait for the part of an API process that dies while it is awaited', async () => {
    const serve = startPosthorn('serve', [...supervisedArgs(), '--role', 'api', '--api-processes', '2'], env);
    const running = await serve.waitForLog((l) => l.msg === 'posthorn is running', 'startup');
    const url = running.url as string;
    const [stopped] = childPids(running);
    // The stopped process holds its part (the supervisor's request for it waits in its channel).
    // Two new connections are handed out in turn: one reaches the other process, whose /metrics
    // then waits for that part; the one handed to the stopped process (the only one it gets: the
    // cluster hands a process the next connection once it has taken the last) is never answered,
    // as the cluster neither closes nor hands on a connection sent to a process that dies before
    // taking it: its client gives up at its own timeout.
    process.kill(stopped, 'SIGSTOP');
    let killedAt = 0;
    try {
      const answers = [0, 1].map(() =>
        fetch(`${url}/metrics`, { headers: { connection: 'close' }, signal: AbortSignal.timeout(15_000) }).then(
          async (r) => ({ status: r.status, text: await r.text(), at: Date.now() }),
          () => null,
        ),
      );
      // Still unanswered after 500 ms: the gather waits for the stopped process's part.
      const early = await Promise.race([Promise.any(answers.map((a) => a.then((v) => v ?? Promise.reject()))), new Promise((r) => setTimeout(() => r('waiting'), 500))]).catch(() => 'waiting');
      assert.equal(early, 'waiting', 'an answer came while a part was awaited');
      process.kill(stopped, 'SIGKILL');
      killedAt = Date.now();
      const answered = (await Promise.all(answers)).filter((a) => a !== null);
      assert.equal(answered.length, 1, `one /metrics answered by the live process (${answered.length} answered)`);
      assert.equal(answered[0].status, 200);
      assert.match(answered[0].text, /^# HELP posthorn_api_requests_total /m);
      // METRICS_GATHER_MS is 2,000 ms from the request: the answer came with the death, not then.
      assert.ok(answered[0].at - killedAt < 1000, `/metrics answered ${answered[0].at - killedAt} ms after the process died`);
    } finally {
      if (!killedAt) process.kill(stopped, 'SIGKILL');
    }
    const { code } = await serve.stop();
    assert.equal(code, 0, serve.tail());
  });

  it('two API processes on a port in use: the command fails with the child\'s exit code, and leaves no process', async () => {
    const taken = net.createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const port = (taken.address() as net.AddressInfo).port;
    try {
      const serve = startPosthorn('serve', [...supervisedArgs(), '--role', 'api', '--api-processes', '2', '--port', String(port), '--host', '127.0.0.1'], env);
      const { code } = await Promise.race([serve.exited, new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`serve did not exit within ${EXIT_LIMIT_MS} ms\n${serve.tail()}`)), EXIT_LIMIT_MS))]);
      assert.notEqual(code, 0, serve.tail());
      assert.match(serve.tail(), /EADDRINUSE|in use/i);
    } finally {
      await new Promise<void>((resolve) => taken.close(() => resolve()));
    }
  });

  it('--processes 1 runs everything in the one process', async () => {
    const serve = startPosthorn('serve', [...supervisedArgs(), '--processes', '1', '--poll-ms', '100'], env);
    const running = await serve.waitUntilRunning();
    assert.equal(running.role, 'all');
    assert.ok(running.background.includes('delivery'));
    const children = fs.readFileSync(`/proc/${serve.pid}/task/${serve.pid}/children`, 'utf8').trim();
    assert.equal(children, '', 'no child process');
    assert.ok(running.url);
    // One process: its own loops are on /readyz; there is no delivery process to report.
    const readyz = (await (await fetch(`${running.url}/readyz`)).json()) as { checks: Record<string, string> };
    assert.equal(readyz.checks.loops, 'running');
    assert.equal(readyz.checks.delivery, undefined);
    await send(running.url, 'three@sink.test');
    await waitDelivered('three@sink.test', serve);
    assert.equal((await serve.stop()).code, 0);
  });
});

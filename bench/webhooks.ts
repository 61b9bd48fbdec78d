// Webhook dispatch throughput (issue 6), measured in one run on this machine, SQLite, everything on
// 127.0.0.1:
//
//   A  ceiling: the same number of POSTs straight from node:http (one connection each, 32 in flight,
//      like the dispatcher) to the same receiver: what any dispatcher built this way could reach
//   B  dispatcher: N events in the outbox -> fan-out -> signed POSTs -> recorded, until all delivered
//   C  fan-out alone with no endpoint: stamping N events (the cost every event pays even when
//      nobody listens)
//
// Usage: node --import tsx bench/webhooks.ts [--events N] (default 5000). Bounded: N events, one
// receiver, every server and temp directory removed at the end.
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import type { AddressInfo } from 'node:net';
import { openServices } from '../src/app.ts';
import { parseConfig, type Config } from '../src/config.ts';
import { createLogger } from '../src/log.ts';
import { createAccount } from '../src/operations/accounts.ts';
import { createProject } from '../src/operations/projects.ts';
import { createWebhook } from '../src/operations/webhooks.ts';
import { recordEvent } from '../src/storage/events.ts';
import { createOutboundDispatcher } from '../src/webhooks/index.ts';

const { values } = parseArgs({ options: { events: { type: 'string', default: '5000' } } });
const N = Math.min(Number(values.events), 200_000);

async function startReceiver(): Promise<{ url: string; count: () => number; close: () => Promise<void> }> {
  let n = 0;
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      n++;
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    count: () => n,
    close: () => new Promise((r) => server.close(() => r())),
  };
}

async function ceiling(url: string, total: number, concurrency: number): Promise<number> {
  const body = JSON.stringify({ event: 'delivered', event_id: 'evt_1', recipient: 'r@example.com', variables: { a: 1 } });
  let next = 0;
  const started = performance.now();
  async function one(): Promise<void> {
    await new Promise<void>((resolve, reject) => {
      const req = http.request(url, { method: 'POST', agent: false, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), connection: 'close' } }, (res) => {
        res.resume();
        res.on('end', resolve);
      });
      req.on('error', reject);
      req.end(body);
    });
  }
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < total) {
        next++;
        await one();
      }
    }),
  );
  return total / ((performance.now() - started) / 1000);
}

async function main(): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'posthorn-bench-webhooks-'));
  const receiver = await startReceiver();
  try {
    const config = Object.freeze({ ...parseConfig(new Map(), {}), data: dir, databaseUrl: null, allowPrivateWebhooks: true, secretKey: 'bench', logLevel: 'silent' }) as Config;
    const services = await openServices(config, { log: createLogger('silent') });
    try {
      const { account } = await createAccount(services, { name: 'bench' });
      const { project } = await createProject(services, account, { name: 'bench' });
      const addEvents = async (accountId: number, projectId: number) => {
        const now = services.clock.now();
        for (let i = 0; i < N; i += 1000) {
          await services.store.write(async (trx) => {
            for (let j = i; j < Math.min(N, i + 1000); j++) {
              await recordEvent(trx, { accountId, projectId, type: 'delivered', payload: { recipient: `r${j}@example.com`, message_uid: `m${j}`, result_code: 'SMTP_250', variables: { n: j } }, now });
            }
          });
        }
      };

      const ceilingRate = await ceiling(receiver.url, N, 32);

      await createWebhook(services, account, { url: receiver.url, events: ['delivered'] });
      await addEvents(account.id, project.id);
      const dispatcher = createOutboundDispatcher(services);
      const before = receiver.count();
      let started = performance.now();
      // The running service: woken by the outbox, as in production.
      await dispatcher.start();
      const deadline = Date.now() + 300_000;
      for (;;) {
        const left = await services.store.db.selectFrom('outbound_requests').select('id').where('state', '<>', 'delivered').limit(1).execute();
        const made = await services.store.db.selectFrom('outbound_requests').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
        if (left.length === 0 && Number(made.n) === N) break;
        if (Date.now() > deadline) throw new Error('dispatch did not finish in 300 s');
        await new Promise((r) => setTimeout(r, 20));
      }
      const dispatchSeconds = (performance.now() - started) / 1000;
      if (receiver.count() - before !== N) throw new Error(`receiver got ${receiver.count() - before} of ${N}`);
      const dispatchRate = N / dispatchSeconds;

      // C: another account without endpoints.
      const { account: quiet } = await createAccount(services, { name: 'quiet' });
      const { project: quietProject } = await createProject(services, quiet, { name: 'quiet' });
      await addEvents(quiet.id, quietProject.id);
      started = performance.now();
      await dispatcher.drain();
      const stampRate = N / ((performance.now() - started) / 1000);
      await dispatcher.stop();

      const rows = [
        ['A ceiling: node:http POSTs, 32 in flight', `${ceilingRate.toFixed(0)} req/s`, '1.00'],
        ['B dispatcher: outbox -> signed POST -> recorded', `${dispatchRate.toFixed(0)} events/s`, (dispatchRate / ceilingRate).toFixed(2)],
        ['C fan-out with no endpoint (stamp only)', `${stampRate.toFixed(0)} events/s`, (stampRate / ceilingRate).toFixed(2)],
      ];
      process.stdout.write(`# webhook dispatch, ${N} events, SQLite, ${os.cpus().length} CPUs (${os.cpus()[0]?.model ?? '?'})\n\n| | rate | ratio to A |\n|---|---|---|\n`);
      for (const r of rows) process.stdout.write(`| ${r.join(' | ')} |\n`);
    } finally {
      await services.store.close();
    }
  } finally {
    await receiver.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

await main();

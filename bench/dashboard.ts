// Figure 9 of `npm run bench`: the dashboard's pages at 1,000,000 transmissions (docs/dashboard.md).
// A fresh instance is seeded with direct SQL (lib/history-seed.ts: 1,000,000 transmissions, one
// per message, spread over 20 days), served with --role api, signed in through the real form, and
// each page is requested sequentially REQUESTS times per run. The figure is the server time
// (the Server-Timing header the dashboard sets: from the request's arrival to its answer, without
// the client's share) at p99, median of the runs; the client-observed p99 is noted beside it.
//
// Alone: node --import tsx bench/run.ts --only 9 [--runs N --history-rows N]
import path from 'node:path';
import SqliteDatabase from 'better-sqlite3';
import { seedHistory } from './lib/history-seed.ts';
import { ROOT, createInstance, serve, tailLog } from './lib/posthorn.ts';
import { onCleanup, runCommand } from './lib/processes.ts';
import type { Figure } from './lib/report.ts';
import { median, percentile } from './lib/stats.ts';

const REQUESTS = 100;
const TARGET_MS = 100;

export interface DashboardBenchOptions {
  runs: number;
  rows: number;
  log: (line: string) => void;
  serveArgs?: string[];
  nodeArgs?: string[];
}

/** A signed-in session: the cookie header to send. */
async function signIn(base: string, email: string, password: string): Promise<string> {
  const form = await fetch(`${base}/login`);
  const loginCookie = form.headers.getSetCookie().map((c) => c.split(';')[0]).join('; ');
  const token = /name="_csrf" value="([^"]+)"/.exec(await form.text())?.[1];
  if (!token) throw new Error('no sign-in form at /login');
  const res = await fetch(`${base}/login`, {
    method: 'POST',
    redirect: 'manual',
    headers: { cookie: loginCookie, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ _csrf: token, email, password }),
  });
  const session = res.headers.getSetCookie().find((c) => c.startsWith('posthorn_session='));
  if (res.status !== 303 || !session) throw new Error(`sign-in answered ${res.status}`);
  return session.split(';')[0];
}

async function timeGet(url: string, cookie: string): Promise<{ clientMs: number; serverMs: number; status: number; body: string }> {
  const started = performance.now();
  const res = await fetch(url, { headers: { cookie }, redirect: 'manual' });
  const body = await res.text();
  const clientMs = performance.now() - started;
  const serverMs = Number(/dur=([\d.]+)/.exec(res.headers.get('server-timing') ?? '')?.[1] ?? NaN);
  return { clientMs, serverMs, status: res.status, body };
}

export async function measureDashboard(opts: DashboardBenchOptions): Promise<Figure[]> {
  const { runs, rows, log } = opts;
  const instance = await createInstance();
  const file = path.join(instance.dataDir, 'posthorn.db');
  log(`9 seeding ${rows.toLocaleString('en-US')} transmissions (1 per message) with direct SQL`);
  const seeded = seedHistory(file, { transmissions: rows, perMessage: 1, spreadDays: 20 });
  log(`9 seeded in ${(seeded.elapsedMs / 1000).toFixed(1)} s`);
  // A message in the middle of the history: its page, and a cursor to page from there.
  const db = new SqliteDatabase(file, { readonly: true });
  const middle = db.prepare('SELECT id, created_at, uid FROM messages ORDER BY id LIMIT 1 OFFSET ?').get(Math.floor(seeded.messages / 2)) as { id: number; created_at: number; uid: string };
  const projectUid = (db.prepare('SELECT uid FROM projects ORDER BY id LIMIT 1').get() as { uid: string }).uid;
  db.close();

  const reset = await runCommand(process.execPath, [path.join(ROOT, 'bin', 'posthorn.js'), 'user', 'reset-password', '--email', 'admin@bench.local', '--json', '--data', instance.dataDir], { cwd: ROOT, timeoutMs: 120_000 });
  if (reset.code !== 0) throw new Error(`posthorn user reset-password failed: ${reset.stderr.trim().split('\n').slice(-3).join(' ')}`);
  const { email, password } = JSON.parse(reset.stdout.trim().split('\n').pop()!) as { email: string; password: string };

  const service = await serve(instance, { role: 'api', extraArgs: opts.serveArgs ?? [], nodeArgs: opts.nodeArgs ?? [] });
  const release = onCleanup('posthorn service (dashboard bench)', () => service.stop());
  const figures: Figure[] = [];
  try {
    const base = service.url!;
    const cookie = await signIn(base, email, password);
    const p = encodeURIComponent(projectUid);
    const pages: Array<[string, string, RegExp]> = [
      ['messages, first page', `/messages?project=${p}`, /<small class="uid"><bdi>seed-/],
      ['messages, a page in the middle (keyset cursor)', `/messages?project=${p}&cursor=${middle.created_at}.${middle.id}`, /<small class="uid"><bdi>seed-/],
      ['messages, filtered by recipient (not found: a full window)', `/messages?project=${p}&recipient=nobody%40nowhere.example`, /No messages match/],
      ['messages, filtered by uid', `/messages?project=${p}&uid=${encodeURIComponent(middle.uid)}`, new RegExp(`>${middle.uid}<`)],
      ['one message', `/messages/${middle.id}`, /class="card recipient"/],
    ];
    for (const [label, pathname, expect] of pages) {
      const probe = await timeGet(base + pathname, cookie);
      if (probe.status !== 200 || !expect.test(probe.body)) {
        // The page's own content, not its head: where what was looked for should be.
        const main = Math.max(0, probe.body.indexOf('<main'));
        throw new Error(`${pathname}: ${probe.status} ${probe.body.slice(main, main + 600)}`);
      }
      const serverP99: number[] = [];
      const serverP50: number[] = [];
      const clientP99: number[] = [];
      for (let run = 0; run < runs; run++) {
        const server: number[] = [];
        const client: number[] = [];
        for (let i = 0; i < REQUESTS; i++) {
          const r = await timeGet(base + pathname, cookie);
          server.push(r.serverMs);
          client.push(r.clientMs);
        }
        serverP99.push(percentile(server, 99));
        serverP50.push(percentile(server, 50));
        clientP99.push(percentile(client, 99));
      }
      const p99 = median(serverP99);
      log(`9 dashboard ${label}: server p50 ${median(serverP50).toFixed(1)} ms, p99 ${p99.toFixed(1)} ms; client p99 ${median(clientP99).toFixed(1)} ms`);
      figures.push({
        id: '9',
        name: `dashboard ${label}, server p99`,
        unit: 'ms',
        value: p99,
        runs: serverP99,
        digits: 1,
        target: `< ${TARGET_MS} ms`,
        met: p99 < TARGET_MS,
        note: `server p50 ${median(serverP50).toFixed(1)} ms; client-observed p99 ${median(clientP99).toFixed(1)} ms (${REQUESTS} sequential requests per run)`,
      });
    }
  } catch (error) {
    throw new Error(`${(error as Error).message}\n--- service log tail ---\n${tailLog(instance)}`);
  } finally {
    await release();
  }
  return figures;
}

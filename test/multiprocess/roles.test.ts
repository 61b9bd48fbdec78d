// `posthorn serve --role api|worker` and `posthorn migrate` as real processes on the run's
// database; on PostgreSQL also several processes migrating one fresh database at once (what every
// `serve` does on start), which must apply each migration exactly once and fail none.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { freshDatabaseUrl, onlyOn, releaseDatabaseUrl, testDatabase } from '../helpers/databases.ts';
import { createFreshPostgresDatabase, dropPostgresDatabase } from '../helpers/postgres.ts';
import { BIN, startPosthorn, stopAll } from '../helpers/processes.ts';

/** Runs a CLI command to its end (asynchronously, so several can race). */
function runCli(args: string[], env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.on('error', reject);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

describe(`process roles and migrate on ${testDatabase()}`, () => {
  let dataDir: string;
  let databaseUrl: string | null;
  let env: Record<string, string>;

  before(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'posthorn-roles-'));
    databaseUrl = await freshDatabaseUrl();
    env = { POSTHORN_DATA: dataDir, DATABASE_URL: databaseUrl ?? '', POSTHORN_SECRET_KEY: 'roles-test-key', LOG_LEVEL: 'info', POSTHORN_MAILER_HOST: 'posthorn.test' };
  });
  after(async () => {
    await stopAll();
    await releaseDatabaseUrl(databaseUrl);
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('migrate applies the migrations once, then reports the database up to date', async () => {
    const first = await runCli(['migrate'], env);
    assert.equal(first.code, 0, first.stderr);
    assert.match(first.stdout, /^applied: 001-core(, \d{3}-[\w-]+)*\n$/);
    const second = await runCli(['migrate'], env);
    assert.equal(second.code, 0, second.stderr);
    assert.equal(second.stdout, 'database is up to date\n');
  });

  it('serve --role api answers HTTP and runs no background service; SIGTERM stops it cleanly', async () => {
    const init = await runCli(['init', '--json'], { ...env, LOG_LEVEL: 'warn' });
    assert.equal(init.code, 0, init.stderr);
    const projectKey = JSON.parse(init.stdout).project.api_key as string;
    const api = startPosthorn('api', ['serve', '--role', 'api', '--port', '0'], env);
    const running = await api.waitUntilRunning();
    assert.equal(running.role, 'api');
    assert.deepEqual(running.background, []);
    assert.match(running.url ?? '', /^http:\/\/127\.0\.0\.1:\d+$/);
    const res = await fetch(`${running.url}/v.1.1/get_method_list`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ api_key: projectKey }),
    });
    assert.equal(res.status, 200);
    assert.equal(((await res.json()) as { response: { status: string } }).response.status, 'ok');
    assert.deepEqual(await api.stop(), { code: 0, signal: null });
  });

  it('serve --role worker serves no API (only its operations listener); SIGTERM stops it cleanly', async () => {
    const worker = startPosthorn('worker', ['serve', '--role', 'worker', '--port', '0', '--ops-port', '0'], env);
    const running = await worker.waitUntilRunning();
    assert.equal(running.role, 'worker');
    assert.equal(running.url, null);
    assert.ok(running.background.includes('delivery'), `background services: ${running.background.join(', ')}`);
    // Nothing but the serve command itself may keep a worker alive: it must still be running.
    await new Promise((r) => setTimeout(r, 1500));
    assert.equal(worker.exitCode, undefined, `the worker exited on its own\n${worker.tail()}`);
    assert.deepEqual(await worker.stop(), { code: 0, signal: null }, worker.tail());
  });

  it('many processes migrating one fresh PostgreSQL database at once: all succeed, each migration applied once', { skip: onlyOn('postgres') }, async () => {
    const url = await createFreshPostgresDatabase();
    try {
      const runs = await Promise.all([1, 2, 3].map(() => runCli(['migrate'], { ...env, DATABASE_URL: url })));
      for (const r of runs) assert.equal(r.code, 0, r.stderr);
      const applied = runs.flatMap((r) => (/^applied: (.*)$/m.exec(r.stdout)?.[1] ?? '').split(', ').filter(Boolean));
      assert.ok(applied.includes('001-core'), JSON.stringify(runs));
      assert.equal(new Set(applied).size, applied.length, `applied twice: ${JSON.stringify(runs.map((r) => r.stdout))}`);
      // The losers of the race found nothing left to do.
      assert.equal(runs.filter((r) => r.stdout === 'database is up to date\n').length, runs.length - 1, JSON.stringify(runs.map((r) => r.stdout)));
    } finally {
      await dropPostgresDatabase(url);
    }
  });
});

// `posthorn init` creates the first dashboard user and prints how to sign in; `posthorn user
// create|reset-password` add users and new passwords. Run as users run them (node bin/posthorn.js),
// then the printed passwords are used to sign in to a real server on the same database.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startApp, type App } from '../../src/app.ts';
import { parseConfig, type Config } from '../../src/config.ts';
import { createLogger } from '../../src/log.ts';
import { freshDatabaseUrl, releaseDatabaseUrl } from '../helpers/databases.ts';
import { SessionClient } from './session-client.ts';

const BIN = path.resolve('bin/posthorn.js');

describe('dashboard users on the command line', () => {
  let dataDir: string;
  let env: NodeJS.ProcessEnv;
  let databaseUrl: string | null = null;
  let app: App | null = null;

  before(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'posthorn-cli-users-'));
    databaseUrl = await freshDatabaseUrl();
    env = { ...process.env, POSTHORN_DATA: dataDir, LOG_LEVEL: 'warn', POSTHORN_SECRET_KEY: 'cli-users-secret' };
    if (databaseUrl) env.DATABASE_URL = databaseUrl;
    else delete env.DATABASE_URL;
  });
  after(async () => {
    await app?.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
    await releaseDatabaseUrl(databaseUrl);
  });

  function run(...args: string[]) {
    const r = spawnSync(process.execPath, [BIN, ...args], { env, encoding: 'utf8', timeout: 120_000 });
    return { code: r.status, stdout: r.stdout, stderr: r.stderr };
  }
  function json(...args: string[]) {
    const r = run(...args, '--json');
    assert.equal(r.code, 0, `posthorn ${args.join(' ')} exited ${r.code}: ${r.stderr}`);
    return JSON.parse(r.stdout.trim().split('\n').pop()!);
  }

  async function server(): Promise<string> {
    if (!app) {
      const base = parseConfig(new Map(), { ...env } as Record<string, string>);
      app = await startApp(Object.freeze({ ...base, port: 0, host: '127.0.0.1', workers: 0 }) as Config, { log: createLogger('silent'), background: false });
    }
    return app.url!;
  }

  it('init prints the dashboard URL, the first user and a password that signs in', async () => {
    const out = json('init', '--mailer-host', 'mail.example.test');
    assert.equal(out.dashboard.email, 'admin@mail.example.test');
    assert.match(out.dashboard.url, /^https?:\/\/.+\/$/);
    assert.ok(out.dashboard.password.length >= 20);
    const text = run('init', '--mailer-host', 'mail.example.test');
    assert.equal(text.code, 0, text.stderr);
    // It says it was not the first, and what to run instead.
    assert.match(text.stderr, /already had 1 account; init added another/);
    assert.match(text.stderr, /rotate-key/);
    // A second init on the same database: admin@ is taken, the user gets a distinct address.
    assert.match(text.stdout, /dashboard \S+: sign in as admin-[^@]+@mail\.example\.test with the password \(shown once\) \S+/);
    const client = new SessionClient(await server());
    assert.equal((await client.signIn(out.dashboard.email, out.dashboard.password)).status, 303);
    assert.equal((await client.get('/')).status, 200);
    assert.equal((await new SessionClient(app!.url!).signIn(out.dashboard.email, 'not-the-password')).status, 401);
  });

  it('user create adds a project-scoped user; reset-password replaces the password and ends sessions', async () => {
    const init = json('init', '--mailer-host', 'mail.example.test', '--email', 'owner@example.test');
    assert.equal(init.dashboard.email, 'owner@example.test');
    const created = json('user', 'create', '--account', init.account.uid, '--email', 'Dev@Example.test', '--project', init.project.uid);
    assert.equal(created.email, 'dev@example.test');
    assert.equal(created.project_uid, init.project.uid);
    const client = new SessionClient(await server());
    assert.equal((await client.signIn('dev@example.test', created.password)).status, 303);
    assert.equal((await client.get('/domains')).status, 404, 'a project-scoped user has no account-wide pages');
    const duplicate = run('user', 'create', '--account', init.account.uid, '--email', 'dev@example.test');
    assert.notEqual(duplicate.code, 0);
    assert.match(duplicate.stderr, /already exists/);
    const reset = json('user', 'reset-password', '--email', 'dev@example.test');
    assert.notEqual(reset.password, created.password);
    assert.equal((await client.get('/')).status, 303, 'the old session ended');
    assert.equal((await new SessionClient(app!.url!).signIn('dev@example.test', created.password)).status, 401);
    assert.equal((await new SessionClient(app!.url!).signIn('dev@example.test', reset.password)).status, 303);
    const usage = run('user', 'create', '--email', 'x@example.test');
    assert.equal(usage.code, 2, usage.stderr);
  });
});

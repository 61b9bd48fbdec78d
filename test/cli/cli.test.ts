// The command line as users and tooling call it: `node bin/posthorn.js ...` (what `npx posthorn`
// runs), against a fresh database, with the exact output forms the README promises.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { freshDatabaseUrl, releaseDatabaseUrl } from '../helpers/databases.ts';

const BIN = path.resolve('bin/posthorn.js');

describe('posthorn CLI', () => {
  let dataDir: string;
  let env: NodeJS.ProcessEnv;
  let databaseUrl: string | null = null;

  before(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'posthorn-cli-'));
    databaseUrl = await freshDatabaseUrl();
    env = { ...process.env, POSTHORN_DATA: dataDir, LOG_LEVEL: 'warn' };
    if (databaseUrl) env.DATABASE_URL = databaseUrl;
    else delete env.DATABASE_URL;
  });
  after(async () => {
    fs.rmSync(dataDir, { recursive: true, force: true });
    await releaseDatabaseUrl(databaseUrl);
  });

  function run(...args: string[]) {
    // Generous: each command starts Node and a database connection on a shared 2-core machine.
    const r = spawnSync(process.execPath, [BIN, ...args], { env, encoding: 'utf8', timeout: 120_000 });
    return { code: r.status, signal: r.signal, stdout: r.stdout, stderr: r.stderr };
  }

  /** Runs a --json command that must succeed, and parses its one line of output. */
  function json(...args: string[]) {
    const r = run(...args, '--json');
    assert.equal(r.code, 0, `posthorn ${args.join(' ')} exited ${r.code} (signal ${r.signal}): ${r.stderr}`);
    return JSON.parse(r.stdout);
  }

  it('bin is executable and runs the compiled dist/ on plain Node, with no TypeScript loader', () => {
    assert.ok(fs.statSync(BIN).mode & 0o111, 'bin/posthorn.js must be executable');
    const bin = fs.readFileSync(BIN, 'utf8');
    assert.match(bin, /^#!\/usr\/bin\/env node/);
    assert.match(bin, /import\('\.\.\/dist\/main\.js'\)/);
    assert.doesNotMatch(bin, /tsx|register\(/);
    assert.ok(fs.existsSync(path.resolve('dist/main.js')), 'npm test builds dist/ first (scripts/build.js)');
    assert.ok(fs.readdirSync(path.resolve('dist/storage/migrations')).some((f) => /^\d{3}-.*\.js$/.test(f)), 'migrations compiled to .js');
    // Readable by every user, as the rest of the checkout: the service may run as another user than the one who built it.
    assert.equal(fs.statSync(fs.realpathSync(path.resolve('dist'))).mode & 0o755, 0o755, 'the build directory is 0755');
  });

  it('account create --json prints one JSON object with uid and api_key', () => {
    const r = run('account', 'create', '--name', 'Acme', '--json');
    assert.equal(r.code, 0, r.stderr);
    const lines = r.stdout.trim().split('\n');
    assert.equal(lines.length, 1);
    const out = JSON.parse(lines[0]);
    assert.equal(out.name, 'Acme');
    assert.match(out.uid, /\S/);
    assert.match(out.api_key, /^[0-9A-Za-z]{32}$/);
  });

  it('account list / disable / enable', () => {
    const created = json('account', 'create', '--name', 'Beta');
    assert.equal(run('account', 'disable', created.uid).code, 0);
    let list = json('account', 'list') as Array<{ uid: string; status: string }>;
    assert.equal(list.find((a) => a.uid === created.uid)?.status, 'disabled');
    assert.equal(json('account', 'enable', created.uid).status, 'active');
    list = json('account', 'list');
    assert.equal(list.find((a) => a.uid === created.uid)?.status, 'active');
    const missing = run('account', 'disable', 'no-such-uid');
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /no account/);
  });

  it('refuses unknown commands and options with exit code 2', () => {
    assert.equal(run('frobnicate').code, 2);
    const bad = run('account', 'list', '--no-such-option', 'x');
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /unknown option --no-such-option/);
    assert.equal(run('account', 'create').code, 2);
    assert.equal(run('serve', '--port', 'eighty').code, 2);
  });

  it('init --json, then serve answers with those keys and stops gracefully on SIGTERM', async () => {
    const init = run('init', '--json');
    assert.equal(init.code, 0, init.stderr);
    const keys = JSON.parse(init.stdout);
    assert.match(keys.account.api_key, /^[0-9A-Za-z]{32}$/);
    assert.match(keys.project.api_key, /^[0-9A-Za-z]{32}$/);
    assert.notEqual(keys.account.api_key, keys.project.api_key);

    const child = spawn(process.execPath, [BIN, 'serve', '--port', '0', '--log-level', 'info'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    try {
      const url = await new Promise<string>((resolve, reject) => {
        let buf = '';
        const timer = setTimeout(() => reject(new Error(`serve did not start: ${buf}`)), 30_000);
        child.stdout.on('data', (d: Buffer) => {
          buf += d.toString();
          const m = /"url":"(http:\/\/[^"]+)"/.exec(buf);
          if (m) {
            clearTimeout(timer);
            resolve(m[1]);
          }
        });
        child.once('exit', (code) => reject(new Error(`serve exited ${code}: ${buf}`)));
      });
      const res = await fetch(`${url}/v.1.1/get_method_list`, { method: 'POST', body: JSON.stringify({ api_key: keys.project.api_key }) });
      assert.equal(res.status, 200);
      const acct = await fetch(`${url}/v.1.1/get_method_list`, { method: 'POST', body: JSON.stringify({ api_key: keys.account.api_key }) });
      assert.equal(acct.status, 200);
      // The README's quick start, as written (curl -d sends form encoding's Content-Type), on the
      // default --mailer-host of this machine.
      const sent = await fetch(`${url}/v.1.1/send_message`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: JSON.stringify({
          api_key: keys.project.api_key,
          arguments: { recipients: ['someone@null.postageapp.com'], template: 'sample_child_template', variables: { name: 'World' } },
        }),
      });
      const sentBody = await sent.json();
      assert.equal(sent.status, 200, JSON.stringify(sentBody));
      assert.equal(typeof sentBody.data.message.id, 'number');
    } finally {
      const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
      child.kill('SIGTERM');
      assert.equal(await exited, 0, 'serve exits 0 after SIGTERM');
    }
  });
});

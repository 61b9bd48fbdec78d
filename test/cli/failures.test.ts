// What the command line says when it cannot do what was asked (docs/configuration.md, "When
// posthorn cannot start"): one line `posthorn: <what and how to fix>`, a non-zero exit, the stack
// only at --log-level debug; the commands that only read or print never create a database; and a
// mistyped command is refused before it opens or creates one (docs/cli.md, "Exit codes").
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { freshDatabaseUrl, releaseDatabaseUrl, testDatabase } from '../helpers/databases.ts';
import { BIN } from '../helpers/processes.ts';
import { ALL_COMMANDS } from '../../src/cli/index.ts';

const PACKAGE_VERSION = (JSON.parse(fs.readFileSync('package.json', 'utf8')) as { version: string }).version;

describe('posthorn CLI failures and read-only commands', () => {
  let dataDir: string;
  let cwd: string;

  before(() => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'posthorn-cli-failures-'));
    cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'posthorn-cli-cwd-'));
  });
  after(() => {
    fs.rmSync(dataDir, { recursive: true, force: true });
    fs.rmSync(cwd, { recursive: true, force: true });
  });

  /** Runs bin/posthorn.js in an empty working directory with only the given configuration. */
  function run(args: string[], extraEnv: Record<string, string> = {}) {
    const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: process.env.HOME, POSTHORN_DATA: dataDir, ...extraEnv };
    const r = spawnSync(process.execPath, [BIN, ...args], { env, cwd, encoding: 'utf8', timeout: 120_000 });
    return { code: r.status, stdout: r.stdout, stderr: r.stderr };
  }

  function assertOneLine(r: { code: number | null; stderr: string }, code: number, pattern: RegExp) {
    assert.equal(r.code, code, r.stderr);
    const lines = r.stderr.trim().split('\n');
    assert.equal(lines.length, 1, `one line expected, got:\n${r.stderr}`);
    assert.match(lines[0], /^posthorn: /);
    assert.match(lines[0], pattern);
  }

  function assertNothingCreated() {
    assert.deepEqual(fs.readdirSync(dataDir), [], 'nothing written to the data directory');
    assert.deepEqual(fs.readdirSync(cwd), [], 'nothing written to the working directory');
  }

  it('--version, -V, -h, help and help <command> answer without a database', () => {
    for (const args of [['--version'], ['-V'], ['version']]) {
      const r = run(args);
      assert.equal(r.code, 0, r.stderr);
      assert.equal(r.stdout, `posthorn ${PACKAGE_VERSION}\n`);
    }
    for (const args of [['help'], ['-h'], ['--help']]) {
      const r = run(args);
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, /^usage: posthorn <command> \[options\]/);
      assert.match(r.stdout, /--database-url/);
    }
    for (const args of [['help', 'migrate'], ['migrate', '--help'], ['--help', 'migrate'], ['migrate', '-h']]) {
      const r = run(args);
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, /posthorn migrate/, args.join(' '));
      assert.match(r.stdout, /Applies pending migrations/);
      assert.doesNotMatch(r.stdout, /posthorn serve/);
    }
    assertOneLine(run(['help', 'frobnicate']), 2, /unknown command "frobnicate"/);
    assertNothingCreated();
  });

  it('account list on an installation without a database lists nothing and creates nothing', () => {
    const text = run(['account', 'list']);
    assert.equal(text.code, 0, text.stderr);
    assert.equal(text.stdout, '(no accounts)\n');
    const json = run(['account', 'list', '--json']);
    assert.equal(json.code, 0, json.stderr);
    assert.deepEqual(JSON.parse(json.stdout), []);
    assertNothingCreated();
  });

  it(`a mistyped command is refused with exit 2 and one line naming the mistake, before it opens or creates a database (${testDatabase()})`, async () => {
    // On PostgreSQL a fresh database, which a command that opened it would have migrated.
    const databaseUrl = await freshDatabaseUrl();
    const extraEnv: Record<string, string> = databaseUrl ? { DATABASE_URL: databaseUrl } : {};
    try {
      const mistakes: Array<[string[], RegExp]> = [
        [['account', 'create'], /account create needs --name \(usage: posthorn account create --name NAME/],
        [['account', 'create', 'Acme'], /account create does not take "Acme"; a value with spaces goes in quotes/],
        [['account', 'create', '--name'], /--name needs a value/],
        [['account', 'create', '--name', ' '], /--name must not be empty/],
        [['account', 'enable'], /account enable needs UID/],
        [['init', '--name', 'My', 'Company'], /init does not take "Company"/],
        [['project', 'create'], /project create needs --name/],
        [['project', 'creat', '--name', 'Shop'], /project has no subcommand "creat": it takes one of create, list, rotate-key, set-retention/],
        [['project', 'set-retention', 'shop', '--days', '9999'], /--days expects a whole number from 0 to 3650, got "9999"/],
        [['webhook', 'add'], /webhook add needs URL/],
        [['webhook', 'add', 'https://hooks.example.test/x', '--events', 'delivered,nonsense'], /--events takes delivered, .* got "nonsense"/],
        [['webhook', 'test', 'hook', '--wait', '0'], /--wait expects a whole number from 1 to 600, got "0"/],
        [['webhook', 'deliveries', '--state', 'done'], /--state must be one of pending, delivered, failed, got "done"/],
        [['webhook', 'list', '--json', 'extra'], /--json takes no value, got "extra"/],
        [['domain', 'add'], /domain add needs NAME/],
        [['domain', 'add', 'example.test', 'example.org'], /domain add does not take "example.org"/],
        [['user', 'create', '--email', 'dev@example.test'], /user create needs --account/],
        [['message', 'find', '--since', 'yesterday'], /--since expects a date/],
        [['message', 'find', '--status', 'sent'], /--status must be one of queued, retry, completed, failed, got "sent"/],
        [['message', 'show'], /message show needs UID/],
        [['send', '--to', 'ada@example.test'], /send needs --text or --html or --template/],
        [['send', '--to', 'ada@example.test', '--text', 'x', '--variables', '[1]'], /--variables expects a JSON object/],
        [['template', 'render', 'welcome', '--variables', 'name=Ada'], /--variables expects a JSON object/],
        [['template', 'push'], /template push needs FILE/],
        [['purge', '--batch', '0'], /--batch expects a whole number from 1 to 10000, got "0"/],
        [['serve', '--data'], /--data needs a value/],
        [['migrate', 'now'], /migrate does not take "now"/],
      ];
      for (const [args, pattern] of mistakes) {
        const r = run(args, extraEnv);
        assert.deepEqual(fs.readdirSync(dataDir), [], `posthorn ${args.join(' ')} wrote to the data directory`);
        assertOneLine(r, 2, pattern);
      }
      assertNothingCreated();
      if (databaseUrl) {
        const client = new pg.Client({ connectionString: databaseUrl });
        await client.connect();
        try {
          const { rows } = await client.query<{ n: string }>(`select count(*) as n from information_schema.tables where table_schema = 'public'`);
          assert.equal(Number(rows[0].n), 0, 'no table was created (no migration ran)');
        } finally {
          await client.end();
        }
      }
    } finally {
      await releaseDatabaseUrl(databaseUrl);
    }
  });

  it('every command given no words, or only its subcommand, names what is missing and its usage before it looks for an account or project', () => {
    // An installation where any command that looked for its account or project first would say so
    // instead: two accounts, the first with two projects.
    const installed = fs.mkdtempSync(path.join(os.tmpdir(), 'posthorn-cli-usage-'));
    try {
      const env = { POSTHORN_DATA: installed };
      const first = JSON.parse(run(['init', '--json'], env).stdout) as { account: { uid: string } };
      assert.equal(run(['init', '--json'], env).code, 0);
      assert.equal(run(['project', 'create', '--name', 'Second', '--account', first.account.uid], env).code, 0);
      const checked: string[] = [];
      const runsBare: string[] = [];
      for (const command of ALL_COMMANDS) {
        const forms: Array<{ words: string[]; shape: { args?: readonly string[]; needs?: readonly unknown[] } }> = [];
        if (command.subcommands) {
          const subs = Object.keys(command.subcommands);
          assertOneLine(run([command.name], env), 2, new RegExp(`^posthorn: ${command.name} needs one of ${subs.join(', ')} \\(posthorn help ${command.name}\\)$`));
          checked.push(command.name);
          for (const sub of subs) forms.push({ words: [command.name, sub], shape: command.subcommands[sub] });
        } else forms.push({ words: [command.name], shape: command });
        for (const { words, shape } of forms) {
          const missingWord = shape.args?.find((a) => !a.startsWith('['));
          // A command that needs nothing runs (serve, init, account list...): not a usage error.
          if (!missingWord && !shape.needs?.length) {
            runsBare.push(words.join(' '));
            continue;
          }
          const what = words.join(' ');
          const missing = missingWord ? missingWord.replace(/\.\.\.$/, '') : '--';
          const r = run(words, env);
          assertOneLine(r, 2, new RegExp(`^posthorn: ${what} needs ${missing.replace(/[|[\]]/g, '\\$&')}.* \\(usage: posthorn ${what}( |\\))`));
          checked.push(what);
        }
      }
      // What runs with nothing more: a new command that needs words or flags it does not declare
      // fails here. backup takes FILE or --file FILE, checked before it opens anything.
      assert.deepEqual(runsBare.sort(), ['account list', 'backup', 'domain list', 'init', 'message find', 'migrate', 'project list', 'purge', 'serve', 'template list', 'webhook deliveries', 'webhook list']);
      assertOneLine(run(['backup'], env), 2, /^posthorn: backup needs the FILE to write \(usage: posthorn backup FILE\)$/);
      // The table is what is checked: every command with words or needed flags is among these.
      for (const expected of ['account', 'account create', 'account enable', 'project set-retention', 'message', 'message show', 'webhook test', 'template push', 'domain check', 'user create', 'send']) {
        assert.ok(checked.includes(expected), `${expected} checked (${checked.join(', ')})`);
      }
    } finally {
      fs.rmSync(installed, { recursive: true, force: true });
    }
  });

  it('every command checks every option before it starts: migrate refuses a bad retry schedule as serve does', () => {
    for (const command of ['migrate', 'serve', 'init']) {
      assertOneLine(run([command, '--retry-schedule', '1m,soon']), 2, /--retry-schedule must be durations .* got "1m,soon"/);
    }
    assertOneLine(run(['migrate'], { POSTHORN_RETRY_SCHEDULE: '0s' }), 2, /--retry-schedule \(POSTHORN_RETRY_SCHEDULE\) must be durations/);
    assertOneLine(run(['serve', '--port', '65536']), 2, /--port must be a port between 0 and 65535, got 65536/);
    assertOneLine(run(['serve'], { PORT: '99999' }), 2, /--port \(PORT\) must be a port between 0 and 65535/);
    assertOneLine(run(['migrate', '--role', 'boss']), 2, /--role must be one of all, api, worker/);
    assertOneLine(run(['migrate', '--log-level', 'loud']), 2, /--log-level must be one of/);
    assertOneLine(run(['migrate', '--public-url', 'ftp://x']), 2, /--public-url must be an http/);
    assertOneLine(run(['migrate', '--relay', 'mail.example.com:25']), 2, /--relay must be a URL like smtp:/);
    assertOneLine(run(['migrate', '--workers', '-1']), 2, /--workers expects a whole number/);
    assertOneLine(run(['migrate', '--lease-ms', '0']), 2, /--lease-ms must be between 1 and/);
    assertOneLine(run(['serve', '--watchdog-ms', '500']), 2, /--watchdog-ms must be 0 \(never\) or at least 1000, got 500/);
    assertNothingCreated();
  });

  it('DATABASE_URL takes postgres://, postgresql:// or an absolute sqlite: path, and nothing else creates a file', () => {
    for (const url of ['mysql://root@127.0.0.1/posthorn', 'postgres:/typo', 'posthorn.db', 'sqlite://relative.db', 'sqlite:relative.db']) {
      const r = run(['migrate'], { DATABASE_URL: url });
      assertOneLine(r, 2, /DATABASE_URL/);
      assert.match(r.stderr, /postgres:\/\/|absolute path/, url);
    }
    assertOneLine(run(['migrate'], { DATABASE_URL: 'mysql://root:hunter2@127.0.0.1/x' }), 2, /mysql:\/\/root:\*\*\*@127\.0\.0\.1\/x/);
    assertNothingCreated();
    const file = path.join(dataDir, 'absolute.db');
    const ok = run(['migrate'], { DATABASE_URL: `sqlite://${file}` });
    assert.equal(ok.code, 0, ok.stderr);
    assert.ok(fs.existsSync(file));
    fs.rmSync(dataDir, { recursive: true, force: true });
    fs.mkdirSync(dataDir);
  });

  it('a port in use is one line naming the option; the stack only at debug level', async () => {
    const blocker = net.createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    const port = (blocker.address() as net.AddressInfo).port;
    try {
      assertOneLine(run(['serve', '--port', String(port)]), 1, new RegExp(`127\\.0\\.0\\.1:${port} is already in use \\(--port\\): stop what listens there or choose another --port`));
      const debug = run(['serve', '--port', String(port), '--log-level', 'debug']);
      assert.equal(debug.code, 1);
      assert.match(debug.stderr, /^posthorn: 127\.0\.0\.1:\d+ is already in use/);
      assert.match(debug.stderr, /\n\s+at /, 'the stack at debug level');
    } finally {
      await new Promise((resolve) => blocker.close(resolve));
    }
  });

  it('a missing TLS file is one line naming the option', () => {
    const missing = path.join(cwd, 'missing-cert.pem');
    const key = path.join(cwd, 'missing-key.pem');
    assertOneLine(run(['serve', '--port', '0', '--tls-cert', missing, '--tls-key', key]), 1, /cannot read the --tls-cert file .*missing-cert\.pem: no such file; fix --tls-cert/);
  });

  it('a truncated SQLite file is one line naming the file and the backup to restore it from', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'posthorn-cli-damaged-'));
    try {
      const migrated = run(['migrate'], { POSTHORN_DATA: dir, POSTHORN_SECRET_KEY: 'damaged' });
      assert.equal(migrated.code, 0, migrated.stderr);
      const file = path.join(dir, 'posthorn.db');
      // Cut short, as a copy interrupted by a full disk leaves it.
      fs.truncateSync(file, Math.floor(fs.statSync(file).size / 3));
      const escaped = file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
      assertOneLine(run(['migrate'], { POSTHORN_DATA: dir, POSTHORN_SECRET_KEY: 'damaged' }), 1, new RegExp(`the SQLite database ${escaped} is damaged \\(SQLITE_CORRUPT: database disk image is malformed\\): stop the service and restore the file from a backup \\(docs/operations\\.md, "Backups"\\)`));
      // Its first bytes gone too: not a database at all.
      fs.writeFileSync(file, 'not a database at all, whatever its name');
      assertOneLine(run(['migrate'], { POSTHORN_DATA: dir, POSTHORN_SECRET_KEY: 'damaged' }), 1, /is damaged \(SQLITE_NOTADB: file is not a database\): .*restore the file from a backup/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('an unreachable PostgreSQL is one line naming the URL without its password', async () => {
    // A port nothing listens on: taken and released.
    const probe = net.createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const port = (probe.address() as net.AddressInfo).port;
    await new Promise((resolve) => probe.close(resolve));
    const r = run(['serve', '--port', '0'], { DATABASE_URL: `postgres://posthorn:hunter2@127.0.0.1:${port}/posthorn` });
    assertOneLine(r, 1, new RegExp(`cannot reach PostgreSQL at postgres://posthorn:\\*\\*\\*@127\\.0\\.0\\.1:${port}/posthorn .*start PostgreSQL or fix DATABASE_URL`));
    assert.doesNotMatch(r.stderr, /hunter2/);
    const list = run(['account', 'list'], { DATABASE_URL: `postgres://posthorn@127.0.0.1:${port}/posthorn` });
    assertOneLine(list, 1, /cannot reach PostgreSQL/);
  });
});

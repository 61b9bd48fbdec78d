// Every everyday command (docs/cli.md) as an operator runs it: `node bin/posthorn.js ...` against a
// fresh database, each with --json (one JSON document on stdout) and the human form. DNS goes to
// a closed loopback port and webhooks to a loopback sink: nothing leaves the machine.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import SqliteDatabase from 'better-sqlite3';
import { freshDatabaseUrl, releaseDatabaseUrl, testDatabase } from '../helpers/databases.ts';

const BIN = path.resolve('bin/posthorn.js');

describe('operations commands', () => {
  let dataDir: string;
  let env: NodeJS.ProcessEnv;
  let databaseUrl: string | null = null;
  let accountUid: string;
  let projectUid: string;

  before(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'posthorn-cli-ops-'));
    databaseUrl = await freshDatabaseUrl();
    env = {
      ...process.env,
      POSTHORN_DATA: dataDir,
      LOG_LEVEL: 'warn',
      POSTHORN_DNS_SERVERS: '127.0.0.1:9',
      POSTHORN_ALLOW_PRIVATE_WEBHOOKS: 'true',
      POSTHORN_MAILER_HOST: 'posthorn.test',
    };
    if (databaseUrl) env.DATABASE_URL = databaseUrl;
    else delete env.DATABASE_URL;
    const init = json('init', '--name', 'Ops', '--project-name', 'First');
    accountUid = init.account.uid;
    projectUid = init.project.uid;
  });
  after(async () => {
    fs.rmSync(dataDir, { recursive: true, force: true });
    await releaseDatabaseUrl(databaseUrl);
  });

  function run(...args: string[]) {
    const r = spawnSync(process.execPath, [BIN, ...args], { env, encoding: 'utf8', timeout: 120_000 });
    return { code: r.status, signal: r.signal, stdout: r.stdout, stderr: r.stderr };
  }

  function json(...args: string[]) {
    const r = run(...args, '--json');
    assert.equal(r.code, 0, `posthorn ${args.join(' ')} exited ${r.code} (signal ${r.signal}): ${r.stderr}`);
    const lines = r.stdout.trim().split('\n');
    assert.equal(lines.length, 1, `one JSON line from posthorn ${args.join(' ')}: ${r.stdout}`);
    return JSON.parse(lines[0]);
  }

  it('help lists every command', () => {
    const r = run('help');
    assert.equal(r.code, 0);
    for (const command of ['project create', 'template push', 'template render', 'domain zone', 'domain check', 'webhook test', 'webhook deliveries', 'message find', 'message show', 'send --to', 'purge', 'backup FILE']) {
      assert.ok(r.stdout.includes(command), `help names "${command}"`);
    }
  });

  it('project create, list, rotate-key, set-retention', () => {
    const created = json('project', 'create', '--name', 'Second', '--uid', 'second');
    assert.equal(created.uid, 'second');
    assert.match(created.api_key, /^[0-9A-Za-z]{32}$/);
    const list = json('project', 'list') as Array<{ uid: string; key_prefix: string }>;
    assert.deepEqual(list.map((p) => p.uid).sort(), [projectUid, 'second'].sort());
    const rotated = json('project', 'rotate-key', 'second', '--account', accountUid);
    assert.match(rotated.api_key, /^[0-9A-Za-z]{32}$/);
    assert.notEqual(rotated.api_key, created.api_key);
    assert.equal(json('project', 'set-retention', 'second', '--days', '30').retention_days, 30);
    const table = run('project', 'list');
    assert.equal(table.code, 0);
    assert.match(table.stdout, /^UID\s+STATUS\s+KEY\s+RETENTION\s+NAME$/m);
    assert.match(table.stdout, /second\s+active\s+\S+\.\.\.\s+30 d\s+Second/);
    const missing = run('project', 'rotate-key', 'nope');
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /not found/i);
    // Two projects now: a project command must name one.
    assert.equal(run('template', 'list').code, 2);
  });

  it('template push from files, list, render a preview', () => {
    const dir = fs.mkdtempSync(path.join(dataDir, 'tpl-'));
    fs.writeFileSync(path.join(dir, 'welcome.html'), '<p>Hello {{name}}</p>');
    fs.writeFileSync(path.join(dir, 'welcome.txt'), 'Hello {{name}}');
    fs.writeFileSync(path.join(dir, 'welcome.json'), JSON.stringify({ subject: 'Hi {{name}}', from: 'ops@posthorn.test' }));
    const files = ['welcome.html', 'welcome.txt', 'welcome.json'].map((f) => path.join(dir, f));
    assert.deepEqual(json('template', 'push', ...files, '--project', projectUid), [{ slug: 'welcome', action: 'created' }]);
    fs.writeFileSync(path.join(dir, 'welcome.txt'), 'Hello again {{name}}');
    assert.deepEqual(json('template', 'push', path.join(dir, 'welcome.txt'), '--project', projectUid), [{ slug: 'welcome', action: 'updated' }]);
    const list = json('template', 'list', '--project', projectUid) as Array<{ slug: string; subject: string }>;
    assert.equal(list.find((t) => t.slug === 'welcome')?.subject, 'Hi {{name}}');
    const preview = json('template', 'render', 'welcome', '--variables', '{"name":"Ada"}', '--project', projectUid);
    assert.equal(preview.subject, 'Hi Ada');
    assert.equal(preview.text, 'Hello again Ada');
    assert.equal(preview.html, '<p>Hello Ada</p>');
    const human = run('template', 'render', 'welcome', '--variables', '{"name":"Ada"}', '--project', projectUid);
    assert.equal(human.code, 0, human.stderr);
    assert.match(human.stdout, /^Subject: Hi Ada$/m);
    assert.match(human.stdout, /^From: ops@posthorn\.test$/m);
    // A template without a From: the project's default From, as a send would get it.
    fs.writeFileSync(path.join(dir, 'bare.txt'), 'Plain {{name}}');
    assert.deepEqual(json('template', 'push', path.join(dir, 'bare.txt'), '--project', projectUid), [{ slug: 'bare', action: 'created' }]);
    assert.match(json('template', 'render', 'bare', '--project', projectUid).from, /^noreply@\S+$/);
    assert.match(run('template', 'render', 'bare', '--project', projectUid).stdout, /^From: noreply@\S+$/m);
    assert.equal(run('template', 'push', path.join(dir, 'bad.exe'), '--project', projectUid).code, 1, 'a missing file fails');
    // Loops within loops stop at the limits of docs/templates.md ("Limits"): the part's error, exit 1.
    fs.writeFileSync(path.join(dir, 'loops.txt'), '{{#each a}}{{#each ../a}}{{#each ../../a}}x{{/each}}{{/each}}{{/each}}');
    assert.deepEqual(json('template', 'push', path.join(dir, 'loops.txt'), '--project', projectUid), [{ slug: 'loops', action: 'created' }]);
    const loops = run('template', 'render', 'loops', '--variables', JSON.stringify({ a: Array.from({ length: 300 }, (_, i) => i) }), '--project', projectUid);
    assert.equal(loops.code, 1, loops.stderr);
    assert.match(loops.stdout, /^error in text: cannot be rendered with these variables: it takes more than 1,000,000 steps to render/m);
  });

  it('domain add, zone, check (DNS unreachable: incomplete, exit 1), list', () => {
    const added = json('domain', 'add', 'mail.example.test');
    assert.equal(added.name, 'mail.example.test');
    const zone = json('domain', 'zone', 'mail.example.test');
    assert.ok(zone.lines.some((l: string) => /_domainkey\.mail\.example\.test\.\t3600\tIN\tTXT\t"v=DKIM1; k=rsa; p=/.test(l)), zone.lines.join('\n'));
    assert.ok(zone.lines.every((l: string) => l.split('\t').length >= 5));
    const human = run('domain', 'zone', 'mail.example.test');
    assert.equal(human.code, 0);
    assert.equal(human.stdout.trim().split('\n').length, zone.lines.length);
    const check = run('domain', 'check', 'mail.example.test', '--json');
    assert.equal(check.code, 1, check.stderr);
    assert.equal(JSON.parse(check.stdout).last_check.status, 'incomplete');
    assert.equal((json('domain', 'list') as unknown[]).length, 1);
  });

  it('webhook add, list, test (queued for the dispatcher), deliveries', () => {
    const hook = json('webhook', 'add', 'http://127.0.0.1:9/hook', '--events', 'delivered,failed', '--uid', 'ops-hook');
    assert.equal(hook.uid, 'ops-hook');
    assert.match(hook.secret, /\S{16,}/);
    assert.deepEqual(hook.events, ['delivered', 'failed']);
    assert.equal(run('webhook', 'add', 'http://127.0.0.1:9/x', '--events', 'nonsense').code, 2);
    const list = json('webhook', 'list') as Array<{ uid: string }>;
    assert.deepEqual(list.map((w) => w.uid), ['ops-hook']);
    // A usage error queues nothing: --wait is checked before the test event is queued.
    for (const wait of ['0', 'abc']) {
      const bad = run('webhook', 'test', 'ops-hook', '--wait', wait);
      assert.equal(bad.code, 2, bad.stderr);
      assert.match(bad.stderr, /--wait expects a whole number/);
    }
    assert.deepEqual(json('webhook', 'deliveries', 'ops-hook'), [], 'no test event was queued by a usage error');
    const test = json('webhook', 'test', 'ops-hook');
    assert.equal(test.state, 'pending');
    assert.ok(test.request_id > 0);
    const deliveries = json('webhook', 'deliveries', 'ops-hook') as Array<{ id: number; event: string; state: string }>;
    assert.deepEqual(deliveries.map((d) => [d.id, d.event, d.state]), [[test.request_id, 'test', 'pending']]);
    const human = run('webhook', 'deliveries');
    assert.match(human.stdout, /^ID\s+STATE\s+EVENT/m);
  });

  it('send a test message, find it, show its per-recipient timeline', () => {
    const sent = json('send', '--to', 'ada@example.test', '--to', 'bob@example.test', '--subject', 'From the terminal', '--text', 'Hello', '--from', 'ops@posthorn.test', '--project', projectUid);
    assert.match(sent.uid, /\S/);
    const found = json('message', 'find', '--recipient', 'ada@', '--project', projectUid);
    assert.deepEqual(found.messages.map((m: { uid: string }) => m.uid), [sent.uid]);
    assert.deepEqual(found.messages[0].statuses, { queued: 2 });
    const shown = json('message', 'show', sent.uid, '--project', projectUid);
    assert.equal(shown.subject, 'From the terminal');
    assert.deepEqual(shown.recipients.map((r: { recipient: string }) => r.recipient).sort(), ['ada@example.test', 'bob@example.test']);
    assert.equal(shown.recipients[0].timeline[0].kind, 'accepted');
    const human = run('message', 'show', sent.uid, '--project', projectUid);
    assert.equal(human.code, 0, human.stderr);
    assert.match(human.stdout, /^ada@example\.test: queued$/m);
    assert.equal(run('message', 'show', 'no-such-uid', '--project', projectUid).code, 1);
    // By the id the API and SMTP submission give, too.
    assert.equal(json('message', 'show', String(sent.id), '--project', projectUid).uid, sent.uid);
    assert.equal(run('message', 'show', '999999', '--project', projectUid).code, 1);
    assert.equal(run('send', '--project', projectUid, '--text', 'x').code, 2, 'send needs --to');
  });

  it('purge reports what it deleted (nothing is past its retention yet)', () => {
    const purged = json('purge');
    assert.deepEqual(purged, { messages: 0, transmissions: 0, attempts: 0, events: 0, outbound_requests: 0, outbound_attempts: 0 });
    const human = run('purge');
    assert.equal(human.code, 0);
    assert.match(human.stdout, /^purged: 0 messages/);
    // A usage error has no effect: --batch is checked before a database is opened, so none is
    // created where there was none.
    const empty = fs.mkdtempSync(path.join(os.tmpdir(), 'posthorn-cli-nodb-'));
    try {
      const bad = spawnSync(process.execPath, [BIN, 'purge', '--batch', 'abc', '--data', empty], { env: { ...env, DATABASE_URL: '' }, encoding: 'utf8', timeout: 120_000 });
      assert.equal(bad.status, 2, bad.stderr);
      assert.match(bad.stderr, /--batch expects a whole number/);
      assert.deepEqual(fs.readdirSync(empty), []);
    } finally {
      fs.rmSync(empty, { recursive: true, force: true });
    }
  });

  it('backup writes a consistent copy of a SQLite database; PostgreSQL is pointed at pg_dump', () => {
    const file = path.join(dataDir, 'backup.db');
    if (testDatabase() === 'postgres') {
      const r = run('backup', file);
      assert.equal(r.code, 2);
      assert.match(r.stderr, /pg_dump/);
      return;
    }
    const nowhere = spawnSync(process.execPath, [BIN, 'backup', file, '--data', path.join(dataDir, 'no-such-dir')], { env: { ...env, DATABASE_URL: '' }, encoding: 'utf8', timeout: 120_000 });
    assert.equal(nowhere.status, 1, nowhere.stderr);
    assert.match(nowhere.stderr, /no database at/);
    assert.ok(!fs.existsSync(path.join(dataDir, 'no-such-dir')), 'no database is created to be copied');
    const r = run('backup', file, '--json');
    assert.equal(r.code, 0, r.stderr);
    const out = JSON.parse(r.stdout);
    assert.equal(out.file, file);
    assert.match(r.stderr, /backup: 100%/, 'progress on stderr');
    const copy = new SqliteDatabase(file, { readonly: true });
    try {
      const n = copy.prepare('select count(*) as n from messages').get() as { n: number };
      assert.equal(n.n, 1);
      assert.equal(copy.pragma('integrity_check', { simple: true }), 'ok');
    } finally {
      copy.close();
    }
  });

  it('message find shows and finds a template\'s subject as it was sent, its variables rendered', () => {
    // The template pushed above: subject "Hi {{name}}".
    const sent = json('send', '--to', 'cy@example.test', '--template', 'welcome', '--variables', '{"name":"Cyrus"}', '--project', projectUid);
    const found = json('message', 'find', '--subject', 'hi cyrus', '--project', projectUid);
    assert.deepEqual(found.messages.map((m: { uid: string; subject: string }) => [m.uid, m.subject]), [[sent.uid, 'Hi Cyrus']]);
    assert.deepEqual(json('message', 'find', '--subject', '{{name}}', '--project', projectUid).messages, []);
    assert.equal(json('message', 'show', sent.uid, '--project', projectUid).subject, 'Hi Cyrus');
    assert.match(run('message', 'find', '--template', 'welcome', '--project', projectUid).stdout, /Hi Cyrus$/m);
  });
});

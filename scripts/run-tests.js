#!/usr/bin/env node
// The test command (npm test): runs every test/**/*.test.ts with node's test runner through tsx,
// once per database: SQLite, then PostgreSQL (POSTHORN_TEST_DATABASES=sqlite,postgres picks them).
// Extra arguments filter test files by substring. Files holding the marker `posthorn-test: runs
// alone` (they stop PostgreSQL) run after the others, one at a time.
//
// It builds first (scripts/build.js): the CLI and multi-process tests start bin/posthorn.js, which
// runs the compiled dist/. The tests themselves run the sources through tsx.
//
// PostgreSQL (test/helpers/postgres.ts: a fresh database per test app on POSTHORN_TEST_PG_URL,
// default postgres://postgres@127.0.0.1:5432/postgres): when the server is unreachable the
// PostgreSQL run FAILS with CI=true (CI must prove both databases) and is skipped with the
// reason printed otherwise (a contributor's machine without PostgreSQL).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';

const ADMIN_URL = process.env.POSTHORN_TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const TEST_DATABASE_PREFIX = 'posthorn_t_';
const inCi = /^(1|true|yes)$/i.test(process.env.CI ?? '');

function findTests(dir) {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return findTests(full);
    return entry.name.endsWith('.test.ts') ? [full] : [];
  });
}

/** The admin URL without a password, for messages. */
function printableUrl(url) {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '(unparseable POSTHORN_TEST_PG_URL)';
  }
}

function isAlive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return error.code === 'EPERM';
  }
}

/**
 * Connects to PostgreSQL; returns null when usable, else the reason. Drops the test databases
 * left behind by test processes of this machine that no longer exist (a crashed or killed run);
 * databases of live processes, other runs going on right now included, are left alone.
 */
async function preparePostgres() {
  const client = new pg.Client({ connectionString: ADMIN_URL, connectionTimeoutMillis: 5000 });
  client.on('error', () => {});
  try {
    await client.connect();
  } catch (error) {
    return `${printableUrl(ADMIN_URL)} is unreachable: ${error.message || error.code || error}`;
  }
  try {
    const { rows } = await client.query('select datname from pg_database where datname like $1', [`${TEST_DATABASE_PREFIX}%`]);
    for (const { datname } of rows) {
      const pid = Number(/^posthorn_t_(\d+)_[0-9a-f]+$/.exec(datname)?.[1]);
      if (!pid || isAlive(pid)) continue;
      await client.query(`DROP DATABASE IF EXISTS "${datname}" WITH (FORCE)`).catch(() => {});
    }
    return null;
  } catch (error) {
    return `${printableUrl(ADMIN_URL)}: ${error.message}`;
  } finally {
    await client.end().catch(() => {});
  }
}

const build = spawnSync(process.execPath, [path.join('scripts', 'build.js'), '--allow-type-errors'], { stdio: 'inherit' });
if (build.status !== 0) {
  console.error('# the build failed: tests that start bin/posthorn.js cannot run');
  process.exit(1);
}

const filters = process.argv.slice(2);
const files = findTests('test')
  .filter((f) => filters.length === 0 || filters.some((x) => f.includes(x)))
  .sort();
if (files.length === 0) {
  console.error('no test files matched');
  process.exit(1);
}
// A test file that stops a shared service says so with this marker and runs alone.
const EXCLUSIVE_MARKER = 'posthorn-test: runs alone';
const exclusive = files.filter((f) => fs.readFileSync(f, 'utf8').includes(EXCLUSIVE_MARKER));
const shared = files.filter((f) => !exclusive.includes(f));
const databases = (process.env.POSTHORN_TEST_DATABASES ?? 'sqlite,postgres').split(',').map((d) => d.trim()).filter(Boolean);
const summary = [];
let failed = false;
for (const database of databases) {
  if (database !== 'sqlite' && database !== 'postgres') {
    console.error(`unknown database "${database}" in POSTHORN_TEST_DATABASES (sqlite, postgres)`);
    process.exit(2);
  }
  if (database === 'postgres') {
    const reason = await preparePostgres();
    if (reason !== null) {
      if (inCi) {
        console.error(`\n# ===== FAILED: the PostgreSQL test run is required in CI (CI=${process.env.CI}) =====`);
        console.error(`# ${reason}`);
        console.error('# Start PostgreSQL (.ci/run does) or point POSTHORN_TEST_PG_URL at a server.');
        summary.push('postgres: FAILED (unreachable in CI)');
        failed = true;
      } else {
        console.log(`\n# ===== SKIPPED the test suite on postgres: ${reason} =====`);
        console.log('# (set POSTHORN_TEST_PG_URL, or run a server at 127.0.0.1:5432 with trust auth; in CI this fails)');
        summary.push(`postgres: skipped (${reason})`);
      }
      continue;
    }
  }
  console.log(`\n# ===== test suite on ${database} =====`);
  const startedAt = Date.now();
  // Two files at a time, then the exclusive ones (they stop PostgreSQL) alone, so that no other
  // test sees the database go away under it.
  let ok = true;
  for (const [group, concurrency] of [[shared, 2], [exclusive, 1]]) {
    if (group.length === 0) continue;
    if (group === exclusive) console.log(`\n# ----- alone: ${group.join(', ')} -----`);
    const result = spawnSync(
      process.execPath,
      ['--import', 'tsx', '--test', `--test-concurrency=${concurrency}`, '--test-timeout=300000', ...group],
      { stdio: 'inherit', env: { ...process.env, POSTHORN_TEST_DB: database } },
    );
    if (result.status !== 0) ok = false;
  }
  const seconds = ((Date.now() - startedAt) / 1000).toFixed(1);
  if (!ok) failed = true;
  summary.push(`${database}: ${ok ? 'passed' : 'FAILED'} (${seconds} s)`);
}
console.log(`\n# ===== ${summary.join('; ')} =====`);
process.exit(failed ? 1 : 0);

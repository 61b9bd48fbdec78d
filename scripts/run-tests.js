#!/usr/bin/env node
// The test command (npm test): runs every test/**/*.test.ts with node's test runner through tsx,
// once per database. SQLite always; PostgreSQL when reachable (and required when CI=true):
// see test/helpers/databases.ts. Extra arguments filter test files by substring.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

function findTests(dir) {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return findTests(full);
    return entry.name.endsWith('.test.ts') ? [full] : [];
  });
}

const filters = process.argv.slice(2);
const files = findTests('test')
  .filter((f) => filters.length === 0 || filters.some((x) => f.includes(x)))
  .sort();
if (files.length === 0) {
  console.error('no test files matched');
  process.exit(1);
}
const databases = (process.env.POSTHORN_TEST_DATABASES ?? 'sqlite,postgres').split(',').filter(Boolean);
let failed = false;
for (const database of databases) {
  console.log(`\n# ===== test suite on ${database} =====`);
  const result = spawnSync(
    process.execPath,
    ['--import', 'tsx', '--test', '--test-concurrency=2', '--test-timeout=300000', ...files],
    { stdio: 'inherit', env: { ...process.env, POSTHORN_TEST_DB: database } },
  );
  if (result.status !== 0) failed = true;
}
process.exit(failed ? 1 : 0);

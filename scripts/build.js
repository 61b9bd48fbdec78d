#!/usr/bin/env node
// Compiles src/ to plain JavaScript in dist/ with tsc (tsconfig.build.json), so the service runs on
// plain Node with no TypeScript loader (docs/architecture.md, "Build"). npm runs it at install
// (`prepare`), npm test runs it before the tests (the CLI tests start bin/posthorn.js), npm run
// bench before the benchmarks.
//
// The build goes into a fresh directory .dist-<time>/ beside dist (the same depth, so a path
// relative to a module, such as ../package.json or ../node_modules, means the same from both), and
// dist then becomes a symbolic link to it, swapped with one rename: a service or a test already
// running from dist keeps reading the build it started with (Node resolves modules through the link
// to the real directory), and a build never exposes a half-written dist. Builds older than an
// hour, other than the current, are removed.
//
// Files of src/ that are not TypeScript (front-end assets, templates) are copied next to the
// compiled modules, so a module that reads a file next to itself finds it in dist too.
//
//   node scripts/build.js [--allow-type-errors]
// --allow-type-errors: a type error is reported but the emitted JavaScript is still installed (the
// test runner passes it: tests run the sources through tsx, which never checked types either;
// `npm run typecheck` is the type check).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const SRC = path.join(ROOT, 'src');
const BUILD_PREFIX = '.dist-';
const DIST = path.join(ROOT, 'dist');
const KEEP_OLD_BUILDS_MS = 3600_000;

const allowTypeErrors = process.argv.includes('--allow-type-errors');
const out = fs.mkdtempSync(path.join(ROOT, `${BUILD_PREFIX}${new Date().toISOString().replace(/[:.]/g, '-')}-`));
// mkdtemp makes the directory 0700: readable by the user who built it alone. The service often runs
// as another (deploy/posthorn.service's User=posthorn after a `sudo npm ci`; the Dockerfile's node):
// the build is code, as readable as the rest of the checkout.
fs.chmodSync(out, 0o755);

const tsc = path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
if (!fs.existsSync(tsc)) {
  // An install without devDependencies (npm ci --omit=dev) of a tree that was built before: keep it.
  if (fs.existsSync(path.join(DIST, 'main.js'))) {
    console.error('posthorn build: TypeScript is not installed (a devDependency); keeping the existing dist/');
    fs.rmSync(out, { recursive: true, force: true });
    process.exit(0);
  }
  fs.rmSync(out, { recursive: true, force: true });
  console.error('posthorn build: TypeScript is not installed (it is a devDependency: run npm install or npm ci, with devDependencies)');
  process.exit(1);
}
const compiled = spawnSync(process.execPath, [tsc, '-p', path.join(ROOT, 'tsconfig.build.json'), '--outDir', out], { stdio: 'inherit', cwd: ROOT });
const emitted = fs.existsSync(path.join(out, 'main.js'));
if (compiled.status !== 0 && !(allowTypeErrors && emitted)) {
  fs.rmSync(out, { recursive: true, force: true });
  console.error('posthorn build: tsc failed (see above)');
  process.exit(1);
}
if (compiled.status !== 0) console.error('posthorn build: type errors above; the emitted JavaScript is installed anyway (--allow-type-errors)');

copyAssets(SRC, out);
swapLink(out);
pruneOldBuilds(out);

function copyAssets(from, to) {
  for (const entry of fs.readdirSync(from, { withFileTypes: true })) {
    const source = path.join(from, entry.name);
    const target = path.join(to, entry.name);
    if (entry.isDirectory()) copyAssets(source, target);
    else if (!/\.(ts|md)$/.test(entry.name)) {
      fs.mkdirSync(to, { recursive: true });
      fs.copyFileSync(source, target);
    }
  }
}

/** dist -> .dist-<this build>, replaced in one rename(2). A real dist directory (an older layout) is removed first. */
function swapLink(target) {
  const stat = fs.lstatSync(DIST, { throwIfNoEntry: false });
  if (stat && !stat.isSymbolicLink()) fs.rmSync(DIST, { recursive: true, force: true });
  const temporary = `${DIST}.${process.pid}.link`;
  fs.rmSync(temporary, { force: true });
  fs.symlinkSync(path.relative(ROOT, target), temporary, 'dir');
  fs.renameSync(temporary, DIST);
}

function pruneOldBuilds(current) {
  const now = Date.now();
  for (const name of fs.readdirSync(ROOT)) {
    if (!name.startsWith(BUILD_PREFIX)) continue;
    const dir = path.join(ROOT, name);
    if (dir === current) continue;
    const stat = fs.statSync(dir, { throwIfNoEntry: false });
    if (stat && now - stat.mtimeMs > KEEP_OLD_BUILDS_MS) fs.rmSync(dir, { recursive: true, force: true });
  }
}

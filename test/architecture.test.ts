// The boundaries of docs/architecture.md ("Boundaries"), checked on every import of src/ (static,
// dynamic and type-only alike: a type import still couples the layers):
//   domain      imports nothing of ours but the domain;
//   edges       (http, smtp, cli, dashboard) call operations, never storage or an adapter;
//   operations  call storage and the domain (and adapters only through the ports of src/services.ts),
//               never an edge, an adapter or a worker;
//   storage     sits below operations and workers: it imports only storage and the domain;
//   observability (metrics, attempt logs, readiness) is cross-cutting like the logger: anyone may
//               record into it, and it reads only storage and the domain.
// The composition (app.ts, main.ts, services.ts, background.ts, config.ts, log.ts) may wire anything.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const SRC = path.join(ROOT, 'src');

type Layer = 'domain' | 'edge' | 'operations' | 'storage' | 'adapter' | 'worker' | 'observability' | 'composition';

const LAYER_OF_DIRECTORY: Record<string, Layer> = {
  domain: 'domain',
  http: 'edge',
  smtp: 'edge',
  cli: 'edge',
  dashboard: 'edge',
  operations: 'operations',
  storage: 'storage',
  delivery: 'adapter',
  webhooks: 'adapter',
  ingress: 'adapter',
  workers: 'worker',
  observability: 'observability',
};

/** What each layer must never import. */
const FORBIDDEN: Record<Layer, readonly Layer[]> = {
  domain: ['edge', 'operations', 'storage', 'adapter', 'worker', 'observability', 'composition'],
  edge: ['storage', 'adapter'],
  operations: ['edge', 'adapter', 'worker'],
  storage: ['edge', 'operations', 'adapter', 'worker', 'observability'],
  observability: ['edge', 'operations', 'adapter', 'worker'],
  adapter: ['edge'],
  worker: ['edge'],
  composition: [],
};

/** src/services.ts describes the composition with type imports only, so every layer may name it. */
const SHARED_LEAVES = new Set(['services.ts']);

export function layerOf(relative: string): Layer {
  const [first] = relative.split('/');
  if (relative.includes('/')) {
    const layer = LAYER_OF_DIRECTORY[first];
    if (!layer) throw new Error(`src/${relative}: directory src/${first}/ has no layer; add it to test/architecture.test.ts and docs/architecture.md`);
    return layer;
  }
  return 'composition';
}

function sourceFiles(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(full);
    return /\.(ts|mts|js)$/.test(entry.name) && !entry.name.endsWith('.d.ts') ? [full] : [];
  });
}

/** Every module specifier of a file: import/export ... from, import(), import type. */
export function importsOf(text: string): string[] {
  const info = ts.preProcessFile(text, true, true);
  return info.importedFiles.map((f) => f.fileName);
}

export interface Crossing {
  from: string;
  to: string;
  rule: string;
}

export function findCrossings(files: ReadonlyMap<string, string>): Crossing[] {
  const crossings: Crossing[] = [];
  for (const [relative, text] of files) {
    const fromLayer = layerOf(relative);
    for (const specifier of importsOf(text)) {
      if (!specifier.startsWith('.')) continue; // node: built-ins and packages
      const target = path.posix.normalize(path.posix.join(path.posix.dirname(relative), specifier));
      if (target.startsWith('..')) {
        crossings.push({ from: relative, to: specifier, rule: 'src/ imports only from src/' });
        continue;
      }
      if (SHARED_LEAVES.has(target)) continue;
      const toLayer = layerOf(target);
      if (FORBIDDEN[fromLayer].includes(toLayer)) {
        crossings.push({ from: relative, to: target, rule: `${fromLayer} must not import ${toLayer}` });
      }
    }
  }
  return crossings;
}

/**
 * Circles of imports among the files of src/ (type-only and dynamic imports count: a circle of
 * types still ties the files' meanings together): each as its files, sorted, from Tarjan's
 * strongly connected components.
 */
export function findCycles(files: ReadonlyMap<string, string>): string[][] {
  const edges = new Map<string, string[]>();
  for (const [relative, text] of files) {
    const targets = importsOf(text)
      .filter((specifier) => specifier.startsWith('.'))
      .map((specifier) => path.posix.normalize(path.posix.join(path.posix.dirname(relative), specifier)))
      .filter((target) => files.has(target));
    edges.set(relative, targets);
  }
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const cycles: string[][] = [];
  const visit = (file: string): void => {
    index.set(file, index.size);
    low.set(file, index.get(file)!);
    stack.push(file);
    onStack.add(file);
    for (const next of edges.get(file) ?? []) {
      if (!index.has(next)) {
        visit(next);
        low.set(file, Math.min(low.get(file)!, low.get(next)!));
      } else if (onStack.has(next)) low.set(file, Math.min(low.get(file)!, index.get(next)!));
    }
    if (low.get(file) !== index.get(file)) return;
    const component: string[] = [];
    let member: string;
    do {
      member = stack.pop()!;
      onStack.delete(member);
      component.push(member);
    } while (member !== file);
    if (component.length > 1 || (edges.get(file) ?? []).includes(file)) cycles.push(component.sort());
  };
  for (const file of files.keys()) if (!index.has(file)) visit(file);
  return cycles;
}

function readSources(): Map<string, string> {
  return new Map(sourceFiles(SRC).map((file) => [path.relative(SRC, file).split(path.sep).join('/'), fs.readFileSync(file, 'utf8')]));
}

test('no import of src/ crosses a boundary of docs/architecture.md', () => {
  const crossings = findCrossings(readSources());
  assert.deepEqual(
    crossings.map((c) => `src/${c.from} -> src/${c.to} (${c.rule})`),
    [],
    'a module imports across a boundary: call an operation from the edge, or give operations a port in src/services.ts',
  );
});

test('no file of src/ imports itself through others (docs/architecture.md, "Layout")', () => {
  assert.deepEqual(
    findCycles(readSources()).map((cycle) => cycle.map((f) => `src/${f}`).join(' <-> ')),
    [],
    'files import each other: move what both need into a module both import',
  );
});

test('the circle check finds a circle of types and one through three files', () => {
  const files = new Map([
    ['a/one.ts', "import type { T } from './two.ts';"],
    ['a/two.ts', "import { one } from './one.ts';"],
    ['b/x.ts', "import { y } from './y.ts';"],
    ['b/y.ts', "const z = await import('../c/z.ts');"],
    ['c/z.ts', "export { x } from '../b/x.ts';"],
    ['c/leaf.ts', "import { x } from '../b/x.ts';"],
  ]);
  assert.deepEqual(findCycles(files), [['a/one.ts', 'a/two.ts'], ['b/x.ts', 'b/y.ts', 'c/z.ts']]);
});

test('src/services.ts is a leaf: it imports types only', () => {
  const text = fs.readFileSync(path.join(SRC, 'services.ts'), 'utf8');
  const valueImports = text.split('\n').filter((line) => /^import\s/.test(line) && !/^import type\s/.test(line));
  assert.deepEqual(valueImports, []);
});

test('the check itself fails on each kind of crossing', () => {
  const cases: Array<[string, string, RegExp]> = [
    ['domain/x.ts', "import { a } from '../storage/store.ts';", /domain must not import storage/],
    ['domain/x.ts', "import type { Services } from '../operations/context.ts';", /domain must not import operations/],
    ['http/x.ts', "import type { Account } from '../storage/schema.ts';", /edge must not import storage/],
    ['smtp/x.ts', "const m = await import('../delivery/dkim.ts');", /edge must not import adapter/],
    ['cli/x.ts', "export { b } from '../webhooks/url-policy.ts';", /edge must not import adapter/],
    ['operations/x.ts', "import { c } from '../webhooks/url-policy.ts';", /operations must not import adapter/],
    ['operations/x.ts', "import { d } from '../http/api/envelope.ts';", /operations must not import edge/],
    ['storage/x.ts', "import { e } from '../operations/accounts.ts';", /storage must not import operations/],
  ];
  for (const [file, text, rule] of cases) {
    const found = findCrossings(new Map([[file, text]]));
    assert.equal(found.length, 1, `${file}: ${text}`);
    assert.match(found[0].rule, rule);
  }
  // Allowed directions stay allowed.
  const allowed = new Map([
    ['http/y.ts', "import { f } from '../operations/accounts.ts';\nimport type { Services } from '../services.ts';\nimport { g } from '../domain/keys.ts';"],
    ['operations/y.ts', "import { h } from '../storage/accounts.ts';\nimport { i } from '../domain/keys.ts';"],
    ['domain/y.ts', "import { j } from './keys.ts';\nimport crypto from 'node:crypto';"],
  ]);
  assert.deepEqual(findCrossings(allowed), []);
});

/**
 * Reads of the store's dialect outside src/storage/: the dialect and its capabilities (skip-locked,
 * group commit, unique-violation codes) stay inside storage; others ask the store (kind, migrate,
 * poolStats) or get a duplicate as a value (storage/duplicates.ts).
 */
function findDialectReads(sources: Map<string, string>): string[] {
  const reads: string[] = [];
  for (const [file, text] of sources) {
    if (file.startsWith('storage/')) continue;
    text.split('\n').forEach((line, i) => {
      if (/\.\s*dialect\b/.test(line) && !/^\s*(\/\/|\*)/.test(line)) reads.push(`src/${file}:${i + 1}: ${line.trim()}`);
    });
  }
  return reads;
}

test('nothing outside src/storage/ reads store.dialect', () => {
  assert.deepEqual(findDialectReads(readSources()), [], 'ask the store (src/storage/store.ts) or return the answer from storage as a value');
  // The check itself fails on a read.
  assert.equal(findDialectReads(new Map([['operations/x.ts', 'if (services.store.dialect.isUniqueViolation(error)) throw e;']])).length, 1);
  assert.equal(findDialectReads(new Map([['storage/x.ts', 'const d = store.dialect;']])).length, 0);
});

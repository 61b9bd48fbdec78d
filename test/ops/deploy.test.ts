// deploy/: the Prometheus alert rules load (promtool check rules), and every metric the rules and
// the Grafana dashboard name is one a real Posthorn serves on /metrics; the readiness probe of the
// systemd unit and the container answers as /readyz does.
import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { startTestApp, type TestApp } from '../helpers/app.ts';

const RULES = path.resolve('deploy/prometheus/posthorn-alerts.yml');
const DASHBOARD = path.resolve('deploy/grafana/posthorn-dashboard.json');
const WAIT_READY = path.resolve('deploy/wait-ready.mjs');
/** Series Prometheus makes itself, not the target. */
const PROMETHEUS_OWN = new Set(['up']);
/** PromQL words that look like metric names. */
const PROMQL_WORDS = new Set(['sum', 'rate', 'increase', 'max', 'min', 'by', 'without', 'and', 'or', 'unless', 'histogram_quantile', 'le', 'avg', 'on', 'ignoring']);

const hasPromtool = spawnSync('promtool', ['--version']).status === 0;
if (!hasPromtool && /^(1|true|yes)$/i.test(process.env.CI ?? '')) throw new Error('promtool is missing under CI (.ci/run installs prometheus)');

/** Metric names an expression reads: identifiers outside label matchers and strings. */
function metricNames(expr: string): string[] {
  const bare = expr
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, '')
    .replace(/\{[^}]*\}/g, '').replace(/"[^"]*"/g, '').replace(/\[[^\]]*\]/g, '');
  return [...bare.matchAll(/[a-zA-Z_:][a-zA-Z0-9_:]*/g)].map((m) => m[0]).filter((w) => !PROMQL_WORDS.has(w) && !/^\d/.test(w) && w.includes('_') || PROMETHEUS_OWN.has(w));
}

/** The metric families a /metrics answer declares, with the series names histograms add. */
function servedNames(text: string): Set<string> {
  const out = new Set<string>();
  for (const m of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    out.add(m[1]);
    if (m[2] === 'histogram' || m[2] === 'summary') for (const s of ['_bucket', '_sum', '_count']) out.add(m[1] + s);
  }
  return out;
}

/** The expr: values of the rules file (plain or `|` blocks). */
function ruleExpressions(yaml: string): string[] {
  const out: string[] = [];
  const lines = yaml.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const m = /^(\s*)expr:\s*(.*)$/.exec(lines[i]);
    if (!m) continue;
    if (m[2].trim() !== '|') {
      out.push(m[2]);
      continue;
    }
    const block: string[] = [];
    while (i + 1 < lines.length && (lines[i + 1].trim() === '' || lines[i + 1].search(/\S/) > m[1].length)) block.push(lines[++i].trim());
    out.push(block.join(' '));
  }
  return out;
}

/** Runs the probe without blocking this process, which serves the app it asks. */
function probe(env: NodeJS.ProcessEnv): Promise<{ status: number | null; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [WAIT_READY, '--once'], { env: { ...process.env, ...env }, timeout: 30_000 }, (error, _stdout, stderr) => {
      resolve({ status: error ? (typeof error.code === 'number' ? error.code : null) : 0, stderr: String(stderr) });
    });
  });
}

describe('deploy/ monitoring files', () => {
  let t: TestApp;
  const cleanup: Array<() => Promise<void>> = [];
  after(async () => {
    for (const f of cleanup.reverse()) await f();
  });

  it('the alert rules load in promtool', { skip: hasPromtool ? false : 'promtool is not installed (Debian: prometheus)' }, () => {
    const r = spawnSync('promtool', ['check', 'rules', RULES], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stdout + r.stderr);
    assert.match(r.stdout, /SUCCESS: \d+ rules found/);
  });

  it('every metric of the rules and the dashboard is served by /metrics', async () => {
    t = await startTestApp();
    cleanup.push(() => t.close());
    const text = await (await fetch(t.url + '/metrics')).text();
    const served = servedNames(text);
    const expressions = ruleExpressions(fs.readFileSync(RULES, 'utf8'));
    assert.ok(expressions.length >= 10, `rules found: ${expressions.length}`);
    const dashboard = JSON.parse(fs.readFileSync(DASHBOARD, 'utf8'));
    const targets = (dashboard.panels as Array<{ targets: Array<{ expr: string }> }>).flatMap((p) => p.targets.map((x) => x.expr));
    assert.ok(targets.length >= 15);
    const unknown = new Set<string>();
    for (const expr of [...expressions, ...targets]) {
      const names = metricNames(expr);
      assert.ok(names.length > 0, `an expression names a metric: ${expr}`);
      for (const name of names) if (!served.has(name) && !PROMETHEUS_OWN.has(name)) unknown.add(name);
    }
    assert.deepEqual([...unknown], [], 'metrics named in deploy/ but not served');
  });

  it('the dashboard is a well-formed Grafana dashboard', () => {
    const dashboard = JSON.parse(fs.readFileSync(DASHBOARD, 'utf8'));
    assert.equal(typeof dashboard.title, 'string');
    assert.equal(typeof dashboard.uid, 'string');
    const ids = dashboard.panels.map((p: { id: number }) => p.id);
    assert.equal(new Set(ids).size, ids.length, 'panel ids are unique');
    for (const p of dashboard.panels) {
      assert.equal(p.datasource.uid, '${datasource}');
      assert.ok(p.gridPos.w > 0 && p.gridPos.h > 0);
      for (const target of p.targets) assert.match(target.refId, /^[A-Z]$/);
    }
    assert.ok(dashboard.templating.list.some((v: { name: string; type: string }) => v.name === 'datasource' && v.type === 'datasource'));
  });

  it('the readiness probe of the unit and the container answers as /readyz', async () => {
    const port = new URL(t.url).port;
    const ok = await probe({ PORT: port, POSTHORN_HOST: '127.0.0.1', POSTHORN_ROLE: 'all' });
    assert.equal(ok.status, 0, ok.stderr);
    // A worker is asked on its operations port: nothing listens on 9 (discard), so not ready.
    const down = await probe({ POSTHORN_ROLE: 'worker', POSTHORN_OPS_PORT: '9', POSTHORN_HOST: '127.0.0.1' });
    assert.equal(down.status, 1);
    assert.match(down.stderr, /not ready at 127\.0\.0\.1:9/);
    for (const file of ['deploy/posthorn.service', 'deploy/Dockerfile']) assert.match(fs.readFileSync(file, 'utf8'), /wait-ready\.mjs/, `${file} probes /readyz`);
  });
});

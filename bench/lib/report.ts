// The bench's table: printed to the terminal, and written with the machine's description to
// docs/benchmarks.md.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import SqliteDatabase from 'better-sqlite3';
import { formatNumber } from './stats.ts';

export interface Figure {
  id: string;
  name: string;
  unit: string;
  /** the median of the runs; null when not measured */
  value: number | null;
  /** every run's value, in order */
  runs: number[];
  digits?: number;
  /** Postfix's comparable figure in this same bench run, if there is one */
  postfix?: { label: string; value: number | null } | null;
  /** the target, and whether the median meets it */
  target?: string;
  met?: boolean | null;
  /** why it was not measured, or what limits it */
  note?: string;
}

export interface Machine {
  cpu: string;
  cores: number;
  ramGiB: number;
  node: string;
  postfix: string;
  postgres: string;
  os: string;
  date: string;
  loadBefore: string;
  /** one durable SQLite commit (WAL, synchronous=FULL) on the temporary directory's disk */
  commitMs: number;
  /** the kernel's autogroup scheduling (a session is a scheduling group): on, off or unknown */
  autogroup: string;
}

/**
 * Times `commits` single-row transactions with WAL and synchronous=FULL in os.tmpdir(): what one
 * fsync-ed commit costs on this disk. Every durable figure rests on it.
 */
export function measureCommitMs(commits = 100): number {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'posthorn-bench-fsync-'));
  try {
    const db = new SqliteDatabase(path.join(dir, 'fsync.db'));
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = FULL');
    db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)');
    const insert = db.prepare('INSERT INTO t (v) VALUES (?)');
    const begin = db.prepare('BEGIN');
    const commit = db.prepare('COMMIT');
    const started = performance.now();
    for (let i = 0; i < commits; i++) {
      begin.run();
      insert.run('x'.repeat(500));
      commit.run();
    }
    const ms = (performance.now() - started) / commits;
    db.close();
    return ms;
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

export function describeMachine(postfix: string, postgres: string): Machine {
  const cpuinfo = fs.existsSync('/proc/cpuinfo') ? fs.readFileSync('/proc/cpuinfo', 'utf8') : '';
  const cpu = /model name\s*:\s*(.+)/.exec(cpuinfo)?.[1]?.trim() ?? os.cpus()[0]?.model ?? 'unknown';
  let osName = `${os.type()} ${os.release()}`;
  try {
    const release = fs.readFileSync('/etc/os-release', 'utf8');
    osName = `${/PRETTY_NAME="?([^"\n]+)/.exec(release)?.[1] ?? ''} (kernel ${os.release()})`;
  } catch {
    // not Linux: keep the generic name
  }
  return {
    cpu,
    cores: os.cpus().length,
    ramGiB: os.totalmem() / 1024 ** 3,
    node: process.version,
    postfix,
    postgres,
    os: osName,
    date: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
    loadBefore: os.loadavg().map((l) => l.toFixed(2)).join(' '),
    commitMs: measureCommitMs(),
    autogroup: readAutogroup(),
  };
}

function readAutogroup(): string {
  try {
    return fs.readFileSync('/proc/sys/kernel/sched_autogroup_enabled', 'utf8').trim() === '1' ? 'on' : 'off';
  } catch {
    return 'unknown';
  }
}

export function ratioOf(f: Figure): number | null {
  if (f.value === null || !f.postfix || f.postfix.value === null || f.postfix.value === 0) return null;
  return f.value / f.postfix.value;
}

function cells(f: Figure): string[] {
  const ratio = ratioOf(f);
  return [
    f.id,
    f.name,
    f.value === null ? 'not measured' : `${formatNumber(f.value, f.digits ?? 0)} ${f.unit}`,
    f.runs.length > 1 ? f.runs.map((r) => formatNumber(r, f.digits ?? 0)).join(' / ') : '',
    f.postfix ? `${formatNumber(f.postfix.value, f.digits ?? 0)} (${f.postfix.label})` : '',
    ratio === null ? '' : `${ratio.toFixed(2)}×`,
    f.target ? `${f.target}${f.met === true ? ' ✔' : f.met === false ? ' ✘' : ''}` : '',
  ];
}

const HEADER = ['#', 'Figure', 'Median', 'Runs', 'Postfix, same run', 'Ratio', 'Target'];

export function formatTable(figures: readonly Figure[]): string {
  const rows = [HEADER, ...figures.map(cells)];
  const widths = HEADER.map((_, i) => Math.max(...rows.map((r) => [...r[i]].length)));
  const line = (r: string[]) => r.map((c, i) => c.padEnd(widths[i])).join('  ');
  const out = [line(rows[0]), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.slice(1).map(line)];
  const notes = figures.filter((f) => f.note).map((f) => `  [${f.id}] ${f.note}`);
  return out.join('\n') + (notes.length ? '\n\nNotes:\n' + notes.join('\n') : '');
}

export function formatMarkdown(figures: readonly Figure[], machine: Machine, command: string, settings: string[], loadAfter = os.loadavg().map((l) => l.toFixed(2)).join(' ')): string {
  const escape = (s: string) => s.replace(/\|/g, '\\|');
  const rows = figures.map((f) => `| ${cells(f).map(escape).join(' | ')} |`);
  const notes = figures.filter((f) => f.note).map((f) => `- **${f.id}**: ${f.note}`);
  return `# Benchmarks

Written by \`npm run bench\` (bench/run.ts); do not edit by hand: rerun it. What the figures mean,
what limits each one and where the time goes: [decisions/0003-performance.md](decisions/0003-performance.md).

## Machine

| | |
|---|---|
| CPU | ${machine.cpu} |
| Cores | ${machine.cores} |
| RAM | ${machine.ramGiB.toFixed(1)} GiB |
| OS | ${machine.os} |
| Node.js | ${machine.node} |
| Postfix | ${machine.postfix} |
| PostgreSQL | ${machine.postgres} |
| Date | ${machine.date} |
| Load average (1, 5, 15 min) before / after the run | ${machine.loadBefore} / ${loadAfter} |
| One durable SQLite commit (WAL, synchronous=FULL, measured) | ${machine.commitMs.toFixed(2)} ms |
| Autogroup scheduling (kernel.sched_autogroup_enabled) | ${machine.autogroup} |

Everything ran on this one machine over 127.0.0.1: the load generators (smtp-source, wrk, autocannon),
the receiver (Postfix's smtp-sink), Postfix and Posthorn share the same cores. Postfix and Posthorn
each run in a session of their own, as a service manager starts services (Postfix's master makes
its own), and so do figure 10's busy loops: the kernel's autogroup scheduling makes each session a
scheduling group, and treats both services alike.

## Results

Each figure is the median of the runs listed; "Ratio" is Posthorn's figure divided by Postfix's
comparable figure measured in the same bench run (for memory and CPU per message, lower is
better). The CPU figures and the notes on CPU waiting say how much of each throughput this shared
machine took away: see [decisions/0003-performance.md](decisions/0003-performance.md).

| ${HEADER.join(' | ')} |
|${HEADER.map(() => '---').join('|')}|
${rows.join('\n')}
${notes.length ? '\n### Notes\n\n' + notes.join('\n') + '\n' : ''}
## How it was run

\`\`\`
${command}
\`\`\`

${settings.map((s) => `- ${s}`).join('\n')}
`;
}

export function gitRevision(cwd: string): string {
  try {
    const rev = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd, encoding: 'utf8' }).trim();
    const dirty = execFileSync('git', ['status', '--porcelain', '--', 'src', 'bin'], { cwd, encoding: 'utf8' }).trim() ? ' (with uncommitted changes in src/)' : '';
    return rev + dirty;
  } catch {
    return 'unknown';
  }
}

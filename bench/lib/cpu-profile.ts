// Reads a V8 .cpuprofile (node --cpu-prof) and says where the time went: self time per function
// and per file, as a share of the samples. Idle and GC are reported as their own rows.
import fs from 'node:fs';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
  children?: number[];
}

interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

export interface ProfileRow {
  name: string;
  selfMs: number;
  share: number;
}

export interface ProfileSummary {
  totalMs: number;
  idleShare: number;
  functions: ProfileRow[];
  files: ProfileRow[];
  /** Posthorn's own functions (src/) by inclusive time: self plus everything they called */
  inclusive: ProfileRow[];
}

function shortUrl(url: string): string {
  if (!url) return '(native)';
  const clean = url.replace(/^file:\/\//, '');
  const nm = clean.lastIndexOf('/node_modules/');
  if (nm !== -1) return clean.slice(nm + '/node_modules/'.length);
  // The service runs the build (dist/ links to .dist-<time>/, scripts/build.js): named as its source.
  const built = /\/(?:\.dist-[^/]+|dist)\/(.*)$/.exec(clean);
  if (built) return `src/${built[1]}`;
  const src = clean.search(/\/(src|bench|test)\//);
  return src !== -1 ? clean.slice(src + 1) : clean;
}

export function summarizeProfile(file: string, top = 25): ProfileSummary {
  const profile = JSON.parse(fs.readFileSync(file, 'utf8')) as Profile;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const selfUs = new Map<number, number>();
  // Attribute each sample's delta to its node (time between samples).
  for (let i = 0; i < profile.samples.length; i++) {
    const dt = profile.timeDeltas[i + 1] ?? 0;
    selfUs.set(profile.samples[i], (selfUs.get(profile.samples[i]) ?? 0) + Math.max(0, dt));
  }
  const totalUs = [...selfUs.values()].reduce((a, b) => a + b, 0) || 1;
  const functions = new Map<string, number>();
  const files = new Map<string, number>();
  let idleUs = 0;
  for (const [id, us] of selfUs) {
    const node = byId.get(id)!;
    const { functionName, url, lineNumber } = node.callFrame;
    if (functionName === '(idle)') idleUs += us;
    const name = url ? `${functionName || '(anonymous)'} ${shortUrl(url)}:${lineNumber + 1}` : functionName || '(anonymous)';
    functions.set(name, (functions.get(name) ?? 0) + us);
    const fileKey = url ? shortUrl(url).replace(/:\d+$/, '') : functionName;
    const pkgOrFile = fileKey.includes('/') && !fileKey.startsWith('src/') ? fileKey.split('/').slice(0, fileKey.startsWith('@') ? 2 : 1).join('/') + '/…' : fileKey;
    files.set(pkgOrFile, (files.get(pkgOrFile) ?? 0) + us);
  }
  const rank = (m: Map<string, number>): ProfileRow[] =>
    [...m.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([name, us]) => ({ name, selfMs: us / 1000, share: us / totalUs }));
  // Inclusive time of src/ functions: walk the tree once, each node's subtree total, counted once
  // per function on a path (recursion is not double counted).
  const parentOf = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parentOf.set(c, n.id);
  const inclusive = new Map<string, number>();
  for (const [id, us] of selfUs) {
    const seen = new Set<string>();
    for (let at: number | undefined = id; at !== undefined; at = parentOf.get(at)) {
      const { functionName, url, lineNumber } = byId.get(at)!.callFrame;
      const short = shortUrl(url);
      if (!short.startsWith('src/')) continue;
      const name = `${functionName || '(anonymous)'} ${short}:${lineNumber + 1}`;
      if (seen.has(name)) continue;
      seen.add(name);
      inclusive.set(name, (inclusive.get(name) ?? 0) + us);
    }
  }
  return { totalMs: totalUs / 1000, idleShare: idleUs / totalUs, functions: rank(functions), files: rank(files), inclusive: rank(inclusive) };
}

export function formatProfile(title: string, summary: ProfileSummary): string {
  const line = (r: ProfileRow) => `  ${(r.share * 100).toFixed(1).padStart(5)}%  ${r.selfMs.toFixed(0).padStart(7)} ms  ${r.name}`;
  return [
    `${title}: ${summary.totalMs.toFixed(0)} ms sampled, idle ${(summary.idleShare * 100).toFixed(1)}%`,
    ' top functions by self time:',
    ...summary.functions.map(line),
    ' by file / package:',
    ...summary.files.map(line),
    ' Posthorn functions (src/) by inclusive time:',
    ...summary.inclusive.map(line),
  ].join('\n');
}

// `node --import tsx bench/lib/cpu-profile.ts FILE.cpuprofile [top]`
if (process.argv[1] && import.meta.url.endsWith(process.argv[1].split('/').pop()!)) {
  const [file, top] = process.argv.slice(2);
  if (!file) {
    process.stderr.write('usage: node --import tsx bench/lib/cpu-profile.ts FILE.cpuprofile [top]\n');
    process.exit(2);
  }
  process.stdout.write(formatProfile(file, summarizeProfile(file, Number(top ?? 30))) + '\n');
}

// Reads the Prometheus text format as a scraper does: one sample per line, `name{labels} value`.
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export function parsePrometheus(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)(\s+\d+)?$/.exec(line);
    if (!m) throw new Error(`not a Prometheus sample line: ${line}`);
    const labels: Record<string, string> = {};
    if (m[3]) {
      for (const l of m[3].matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]] = l[2];
    }
    const raw = m[4];
    const value = raw === '+Inf' ? Infinity : raw === '-Inf' ? -Infinity : Number(raw);
    if (Number.isNaN(value) && !/^nan$/i.test(raw)) throw new Error(`bad value in: ${line}`);
    out.push({ name: m[1], labels, value });
  }
  return out;
}

/** The value of the one sample with this name and (at least) these labels; 0 when absent. */
export function sampleValue(samples: Sample[], name: string, labels: Record<string, string> = {}): number {
  const matching = samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  return matching.reduce((sum, s) => sum + s.value, 0);
}

export async function scrape(baseUrl: string): Promise<Sample[]> {
  const res = await fetch(`${baseUrl}/metrics`);
  if (res.status !== 200) throw new Error(`/metrics answered ${res.status}`);
  if (!/^text\/plain/.test(res.headers.get('content-type') ?? '')) throw new Error(`/metrics content-type ${res.headers.get('content-type')}`);
  return parsePrometheus(await res.text());
}

/** Scrapes until `check` holds (the database gauges are cached for a few seconds); bounded. */
export async function scrapeUntil(baseUrl: string, what: string, check: (s: Sample[]) => boolean, timeoutMs = 15_000): Promise<Sample[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const samples = await scrape(baseUrl);
    if (check(samples)) return samples;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

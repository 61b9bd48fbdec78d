// A lean HTTP client, run as a process of its own, for latency figures of sequential requests
// (figure 6, messages_history): POSTs one JSON body N times over one keep-alive connection, one
// request at a time, and prints each request's time from the first byte written to the last byte
// of the answer read. The answer is read in full but not parsed (the bench checks one answer
// itself): the timings are the service's and the network's, not the pauses of a client's heap.
// In the bench's own process, whose heap holds the other figures' results, a fetch() and a
// JSON.parse of each 250-record page added collector pauses of 2-8 ms to about one request in
// fifty, which is the whole of a p99 of 100 samples (docs/decisions/0003-performance.md).
//
//   node --import tsx bench/lib/sequential-client.ts URL BODY_FILE COUNT
//   -> stdout: {"ms":[...], "statuses":{"200":COUNT}, "bytes":N, "elapsedMs":T}
import fs from 'node:fs';
import http from 'node:http';

export interface SequentialRun {
  /** each request's time, ms, in the order sent */
  ms: number[];
  /** answers by HTTP status */
  statuses: Record<string, number>;
  /** bytes of the last answer */
  bytes: number;
  /** from the first request to the last answer, ms */
  elapsedMs: number;
}

async function main(): Promise<void> {
  const [url, bodyFile, countText] = process.argv.slice(2);
  const count = Number(countText);
  if (!url || !bodyFile || !Number.isInteger(count) || count < 1) throw new Error('usage: sequential-client.ts URL BODY_FILE COUNT');
  const target = new URL(url);
  const body = fs.readFileSync(bodyFile);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const post = () =>
    new Promise<{ ms: number; status: number; bytes: number }>((resolve, reject) => {
      const started = performance.now();
      const req = http.request(
        { host: target.hostname, port: target.port, path: target.pathname, method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': body.length } },
        (res) => {
          let bytes = 0;
          res.on('data', (chunk: Buffer) => (bytes += chunk.length));
          res.on('end', () => resolve({ ms: performance.now() - started, status: res.statusCode ?? 0, bytes }));
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  const run: SequentialRun = { ms: [], statuses: {}, bytes: 0, elapsedMs: 0 };
  const started = performance.now();
  for (let i = 0; i < count; i++) {
    const answer = await post();
    run.ms.push(answer.ms);
    run.statuses[answer.status] = (run.statuses[answer.status] ?? 0) + 1;
    run.bytes = answer.bytes;
  }
  run.elapsedMs = performance.now() - started;
  agent.destroy();
  process.stdout.write(JSON.stringify(run));
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main().catch((error) => {
    process.stderr.write(`${(error as Error).message}\n`);
    process.exit(1);
  });
}

// One HTTP POST of an outbound request: to the address the URL policy checked (the socket's
// lookup is pinned to it, while Host and TLS SNI keep the URL's name), with one overall timeout,
// never following redirects (a 3xx is a failed attempt like any non-2xx). The outcome is a value.
import http from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';

export interface PostRequest {
  url: URL;
  address: string;
  family: 4 | 6;
  headers: Record<string, string>;
  body: string;
  timeoutMs: number;
}

export interface PostOutcome {
  /** true on a 2xx */
  ok: boolean;
  statusCode: number | null;
  /** why it failed, short and free of secrets */
  error: string | null;
  durationMs: number;
}

/** How much of a response body is read (and thrown away) before the connection is closed. */
const MAX_RESPONSE_BYTES = 64 * 1024;

export function postOnce(req: PostRequest): Promise<PostOutcome> {
  const started = performance.now();
  const lookup: LookupFunction = (_hostname, options, callback) => {
    if ((options as { all?: boolean }).all) (callback as (e: null, a: Array<{ address: string; family: number }>) => void)(null, [{ address: req.address, family: req.family }]);
    else callback(null, req.address, req.family);
  };
  const body = Buffer.from(req.body, 'utf8');
  const client = req.url.protocol === 'https:' ? https : http;
  return new Promise<PostOutcome>((resolve) => {
    let settled = false;
    const finish = (statusCode: number | null, error: string | null) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      const ok = error === null && statusCode !== null && statusCode >= 200 && statusCode < 300;
      resolve({ ok, statusCode, error: ok ? null : (error ?? `HTTP ${statusCode}`), durationMs: Math.round(performance.now() - started) });
    };
    const request = client.request(
      req.url,
      {
        method: 'POST',
        lookup,
        agent: false,
        headers: { ...req.headers, 'content-length': String(body.length), connection: 'close' },
      },
      (res) => {
        let seen = 0;
        res.on('data', (chunk: Buffer) => {
          seen += chunk.length;
          if (seen > MAX_RESPONSE_BYTES) {
            res.destroy();
            finish(res.statusCode ?? null, null);
          }
        });
        res.on('end', () => finish(res.statusCode ?? null, null));
        res.on('error', () => finish(res.statusCode ?? null, null));
      },
    );
    const timer = setTimeout(() => {
      request.destroy();
      finish(null, `timed out after ${req.timeoutMs} ms`);
    }, req.timeoutMs);
    request.on('error', (error: NodeJS.ErrnoException) => finish(null, describeError(error)));
    request.end(body);
  });
}

function describeError(error: NodeJS.ErrnoException): string {
  return error.code ? `${error.code}: ${error.message}`.slice(0, 300) : String(error.message).slice(0, 300);
}

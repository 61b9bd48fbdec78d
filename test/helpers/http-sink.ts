// A real HTTP receiver on 127.0.0.1:0 for webhooks and postbacks: records every request (raw
// body, headers), answers what the test scripts (a status, a redirect, a stall), and offers the
// receivers' signature checks: Posthorn's webhook signature and the Ruby gem's Rails ingress check
// of X-PostageApp-Signature, reimplemented here.
import { createHmac, timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface SinkRequest {
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

export interface SinkAnswer {
  status: number;
  headers?: Record<string, string>;
  body?: string;
  /** wait this long before answering */
  delayMs?: number;
  /** never answer (the client's timeout must fire) */
  stall?: boolean;
}

export type SinkScript = (req: SinkRequest, index: number) => SinkAnswer | number;

export interface HttpSink {
  url: string;
  requests: SinkRequest[];
  /** replaces how requests are answered (default: 200) */
  answer(script: SinkScript): void;
  /** resolves once at least n requests arrived; rejects after timeoutMs */
  waitFor(n: number, timeoutMs?: number): Promise<SinkRequest[]>;
  close(): Promise<void>;
}

export async function startHttpSink(): Promise<HttpSink> {
  const requests: SinkRequest[] = [];
  let script: SinkScript = () => 200;
  const waiters: Array<() => void> = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const record: SinkRequest = { method: req.method ?? '', path: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString('utf8') };
      const index = requests.push(record) - 1;
      for (const w of waiters.splice(0)) w();
      const raw = script(record, index);
      const answer = typeof raw === 'number' ? { status: raw } : raw;
      if (answer.stall) return;
      const send = () => {
        if (res.destroyed) return;
        res.writeHead(answer.status, answer.headers ?? { 'content-type': 'text/plain' });
        res.end(answer.body ?? 'ok');
      };
      if (answer.delayMs) setTimeout(send, answer.delayMs);
      else send();
    });
  });
  const sockets = new Set<import('node:net').Socket>();
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    answer(s) {
      script = s;
    },
    async waitFor(n, timeoutMs = 10_000) {
      const deadline = Date.now() + timeoutMs;
      while (requests.length < n) {
        const left = deadline - Date.now();
        if (left <= 0) throw new Error(`HTTP sink: expected ${n} requests, got ${requests.length}`);
        await new Promise<void>((resolve) => {
          const t = setTimeout(resolve, Math.min(left, 200));
          waiters.push(() => {
            clearTimeout(t);
            resolve();
          });
        });
      }
      return requests;
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A receiver's check of a Posthorn webhook (docs/webhooks.md): HMAC-SHA256 over `${t}.${body}`. */
export function verifyWebhookSignature(secret: string, req: SinkRequest, toleranceSeconds = Infinity, nowSeconds = Date.now() / 1000): boolean {
  const timestamp = String(req.headers['x-posthorn-timestamp'] ?? '');
  const signature = String(req.headers['x-posthorn-signature'] ?? '');
  if (!/^\d+$/.test(timestamp) || Math.abs(nowSeconds - Number(timestamp)) > toleranceSeconds) return false;
  const expected = 'v1=' + createHmac('sha256', secret).update(`${timestamp}.${req.body}`).digest('hex');
  return signature.length === expected.length && timingSafeEqual(Buffer.from(signature), Buffer.from(expected));
}

/**
 * The Ruby gem's Rails ingress check, reimplemented: parse the JSON, take
 * inbound_email.message, and compare X-PostageApp-Signature with
 * Base64.strict_encode64(OpenSSL::HMAC.digest('sha1', secret, message)). A mismatch is 401.
 */
export function verifyPostageAppSignature(secret: string, req: SinkRequest): { ok: boolean; message: string | null } {
  let message: string | null = null;
  try {
    const parsed = JSON.parse(req.body) as { inbound_email?: { message?: unknown } };
    message = typeof parsed.inbound_email?.message === 'string' ? parsed.inbound_email.message : null;
  } catch {
    return { ok: false, message: null };
  }
  if (message === null) return { ok: false, message };
  const expected = createHmac('sha1', secret).update(message, 'utf8').digest('base64');
  const given = String(req.headers['x-postageapp-signature'] ?? '');
  return { ok: given.length === expected.length && timingSafeEqual(Buffer.from(given), Buffer.from(expected)), message };
}

// Slow and idle clients are cut on every listener (src/listener-limits.ts, docs/reliability.md):
// 300 idle and 50 slow-body connections against the API are all answered 408 and closed within a
// bounded time while a legitimate client keeps being answered; a per-IP limit refuses the excess at once; an
// idle and a slow (trickling) client of the bounce SMTP listener are closed, and its per-IP limit
// answers 421. Every wait is on the 'close' events, bounded; nothing sleeps. Loopback only; the
// counts are fixed.
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import { BounceListener } from '../../src/smtp/bounce-listener.ts';
import { startTestApp, type Seed, type TestApp } from '../helpers/app.ts';

const IDLE = 300;
const SLOW_BODY = 50;

/** Resolves with the time the socket closed, or rejects after `ms`. */
function closedWithin(socket: net.Socket, ms: number, what: string): Promise<number> {
  if (socket.destroyed) return Promise.resolve(performance.now());
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${what} still open after ${ms} ms`)), ms);
    socket.once('close', () => {
      clearTimeout(timer);
      resolve(performance.now());
    });
  });
}

function connect(port: number, localAddress = '127.0.0.1'): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ port, host: '127.0.0.1', localAddress });
    socket.on('error', () => {}); // a reset by the server is an expected way to be cut
    socket.once('connect', () => resolve(socket));
    socket.once('error', reject);
  });
}

/** Connections opened in bounded batches (the listen backlog is finite). */
async function connectMany(n: number, port: number, localAddress?: string): Promise<net.Socket[]> {
  const sockets: net.Socket[] = [];
  for (let i = 0; i < n; i += 50) sockets.push(...(await Promise.all(Array.from({ length: Math.min(50, n - i) }, () => connect(port, localAddress)))));
  return sockets;
}

/** Writes one byte every `everyMs` until the socket closes or `max` bytes were sent. */
function trickle(socket: net.Socket, everyMs: number, max: number, byte = 'x'): void {
  let sent = 0;
  const timer = setInterval(() => {
    if (socket.destroyed || sent >= max) return clearInterval(timer);
    socket.write(byte);
    sent++;
  }, everyMs);
  socket.once('close', () => clearInterval(timer));
}

describe('slow and idle clients', () => {
  describe('HTTP API', () => {
    let t: TestApp;
    let seed: Seed;
    let port: number;
    const HEADERS_MS = 1000;
    const REQUEST_MS = 1500;
    before(async () => {
      t = await startTestApp({
        background: false,
        config: { httpHeadersTimeoutMs: HEADERS_MS, httpRequestTimeoutMs: REQUEST_MS, httpKeepAliveTimeoutMs: 1000, maxConnectionsPerIp: IDLE + SLOW_BODY + 20 },
      });
      seed = await t.seed();
      port = Number(new URL(t.url).port);
    });
    after(() => t.close());

    const accountInfo = () => t.call('get_account_info', { api_key: seed.accountKey });

    it(`closes ${IDLE} idle and ${SLOW_BODY} slow-body connections within bounded time; a legitimate client is answered meanwhile`, async () => {
      const started = performance.now();
      const idle = await connectMany(IDLE, port);
      const slow = await connectMany(SLOW_BODY, port);
      // What each is told before it is cut (read, so that the close is seen once it was).
      const told = new Map<net.Socket, string>();
      for (const sock of [...idle, ...slow]) sock.on('data', (d) => told.set(sock, (told.get(sock) ?? '') + d.toString('latin1')));
      const body = JSON.stringify({ api_key: seed.accountKey, padding: 'x'.repeat(1000) });
      for (const s of slow) {
        // Complete headers, then the body a byte at a time: never idle, never done.
        s.write(`POST /v.1.1/get_account_info HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body.slice(0, 10)}`);
        trickle(s, 100, body.length - 10);
      }
      const closings = [
        ...idle.map((s, i) => closedWithin(s, 15_000, `idle connection ${i}`)),
        ...slow.map((s, i) => closedWithin(s, 15_000, `slow-body connection ${i}`)),
      ];
      // Meanwhile the API answers.
      for (let i = 0; i < 5; i++) {
        const r = await accountInfo();
        assert.equal(r.status, 200, JSON.stringify(r.body));
      }
      const closedAt = await Promise.all(closings);
      const slowest = Math.max(...closedAt) - started;
      // Each is cut at its own deadline (1 s for headers, 1.5 s for a body); the bound leaves room
      // for a loaded machine, and is far below what an unlimited server allows (they never close).
      assert.ok(slowest < 15_000, `all closed after ${Math.round(slowest)} ms`);
      console.log(`# slow clients: ${IDLE} idle and ${SLOW_BODY} slow-body connections all closed ${Math.round(slowest)} ms after the first opened (headers ${HEADERS_MS} ms, body ${REQUEST_MS} ms)`);
      // Each was answered 408 in the API's envelope before it was cut (docs/reliability.md).
      for (const [what, sockets] of [['idle', idle], ['slow-body', slow]] as const) {
        sockets.forEach((sock, i) => {
          const text = told.get(sock) ?? '';
          assert.match(text, /^HTTP\/1\.1 408 /, `${what} connection ${i}: ${JSON.stringify(text.slice(0, 80))}`);
          assert.equal(JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4)).response.status, 'request_timeout');
        });
      }
      assert.equal((await accountInfo()).status, 200);
    });

    it('an idle kept-alive connection is closed after the keep-alive timeout; a prompt request on it is answered', async () => {
      const socket = await connect(port);
      const reply = new Promise<string>((resolve) => socket.once('data', (d) => resolve(d.toString('latin1'))));
      const body = JSON.stringify({ api_key: seed.accountKey });
      socket.write(`POST /v.1.1/get_account_info HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
      assert.match(await reply, /^HTTP\/1\.1 200 /);
      await closedWithin(socket, 10_000, 'kept-alive idle connection');
    });
  });

  describe('per-IP connection limit (HTTP)', () => {
    let t: TestApp;
    let seed: Seed;
    let port: number;
    before(async () => {
      // Long timeouts: here only the per-IP limit closes anything.
      t = await startTestApp({ background: false, config: { httpHeadersTimeoutMs: 60_000, httpRequestTimeoutMs: 60_000, maxConnectionsPerIp: 20 } });
      seed = await t.seed();
      port = Number(new URL(t.url).port);
    });
    after(() => t.close());

    it('refuses connections beyond the limit from one address at once; other addresses are served', { timeout: 60_000 }, async () => {
      const allowed = await connectMany(20, port, '127.0.0.2');
      try {
        await checkLimit(allowed);
      } finally {
        for (const s of allowed) s.destroy();
      }
    });

    async function checkLimit(allowed: net.Socket[]): Promise<void> {
      let allowedClosed = 0;
      for (const s of allowed) s.once('close', () => allowedClosed++);
      const excess = await connectMany(5, port, '127.0.0.2');
      await Promise.all(excess.map((s, i) => closedWithin(s, 5000, `excess connection ${i}`)));
      // Another address is not affected.
      const r = await t.call('get_account_info', { api_key: seed.accountKey });
      assert.equal(r.status, 200);
      assert.equal(allowedClosed, 0, 'the connections within the limit stay open');
      // A freed slot can be used again.
      allowed[0].destroy();
      await closedWithin(allowed[0], 1000, 'freed connection');
      // The server releases the slot when it sees the close: a bounded number of tries.
      let answer = '';
      for (let i = 0; i < 50 && answer === ''; i++) {
        const again = await connect(port, '127.0.0.2');
        answer = await new Promise<string>((resolve) => {
          again.once('data', (d) => resolve(d.toString('latin1')));
          again.once('close', () => resolve(''));
          again.write('GET /v.1.1/get_account_info HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n');
        });
        again.destroy();
      }
      assert.match(answer, /^HTTP\/1\.1 \d{3} /);
    }
  });

  describe('bounce SMTP listener', () => {
    let t: TestApp;
    let listener: BounceListener;
    let port: number;
    before(async () => {
      t = await startTestApp({ background: false, config: { bounceIdleTimeoutMs: 1000, bounceSessionTimeoutMs: 2500, maxConnectionsPerIp: 3 } });
      listener = new BounceListener(t.app.services, 0, '127.0.0.1');
      await listener.start();
      port = listener.address().port;
    });
    after(async () => {
      await listener.stop();
      await t.close();
    });

    /** Connects and resolves with the socket and its greeting line. */
    async function greeted(localAddress = '127.0.0.1'): Promise<{ socket: net.Socket; greeting: string }> {
      const socket = await connect(port, localAddress);
      const greeting = await new Promise<string>((resolve) => socket.once('data', (d) => resolve(d.toString('latin1'))));
      return { socket, greeting };
    }

    it('closes an idle session and a trickling one; a legitimate session works meanwhile', async () => {
      const idle = await greeted();
      assert.match(idle.greeting, /^220 /);
      const slow = await greeted();
      // A command every 300 ms: never idle, so only the session bound cuts it.
      const timer = setInterval(() => !slow.socket.destroyed && slow.socket.write('NOOP\r\n'), 300);
      slow.socket.once('close', () => clearInterval(timer));
      const idleClosed = closedWithin(idle.socket, 10_000, 'idle SMTP session');
      const slowClosed = closedWithin(slow.socket, 10_000, 'trickling SMTP session');

      const legit = await greeted();
      const bye = new Promise<string>((resolve) => legit.socket.once('data', (d) => resolve(d.toString('latin1'))));
      legit.socket.write('QUIT\r\n');
      assert.match(await bye, /^221 /);
      await closedWithin(legit.socket, 5000, 'legitimate session after QUIT');

      await Promise.all([idleClosed, slowClosed]);
      clearInterval(timer);
    });

    it('answers 421 to sessions beyond the per-IP limit', async () => {
      const held = await Promise.all([greeted('127.0.0.4'), greeted('127.0.0.4'), greeted('127.0.0.4')]);
      for (const h of held) assert.match(h.greeting, /^220 /);
      const refused = await greeted('127.0.0.4');
      assert.match(refused.greeting, /^421 4\.7\.0 Too many connections from your address/);
      await closedWithin(refused.socket, 5000, 'refused session');
      // Another address still gets in.
      const other = await greeted('127.0.0.5');
      assert.match(other.greeting, /^220 /);
      for (const s of [...held.map((h) => h.socket), other.socket]) s.destroy();
    });
  });
});

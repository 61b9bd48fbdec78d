// Limits on every listener (docs/reliability.md, "Slow and idle clients"): a client that connects
// and sends nothing, sends its headers or body a byte at a time, or idles on a kept-alive
// connection is cut after a bounded time, and no single address holds more than its share of
// connections. Without them, a few hundred such sockets held open from one machine were enough to
// exhaust file descriptors while costing the client nothing.
//
//   HTTP (API, dashboard: one Fastify instance; any other node http/https server)
//     headers    the request line and headers must arrive within headersTimeoutMs of the
//                connection (or of the previous response, plus the keep-alive allowance);
//     request    the whole request, body included, within requestTimeoutMs of its headers;
//     keep-alive an idle kept-alive connection is closed after keepAliveTimeoutMs;
//     per IP     at most maxConnectionsPerIp open connections from one address: more are closed
//                at once, before a byte is read.
//   Node enforces its own headersTimeout/requestTimeout too, but only on a 30-second sweep; the
//   timers here make the bounds exact. The time a handler takes to answer is not limited: only
//   what the client owes is. A client that runs out of time is answered 408 (the server's
//   timeoutJson: the API's envelope) and disconnected; an idle kept-alive connection is closed.
//
//   SMTP (smtp-server instances: the bounce listener, submission)
//     idle       socketTimeout: no command for idleTimeoutMs closes the session;
//     session    a session open longer than sessionTimeoutMs is closed, busy or not (a client
//                trickling bytes never goes idle);
//     clients    maxClients sessions per listener, with smtp-server's 421;
//     per IP     maxConnectionsPerIp sessions from one address, refused with 421 4.7.0;
//     no PTR     no reverse lookup before the greeting (it would let a slow resolver hold sessions).
import type http from 'node:http';
import type { Socket } from 'node:net';
import { Server as TlsServer } from 'node:tls';
import type { SMTPServer, SMTPServerSession } from 'smtp-server';
import type { Config } from './config.ts';

export interface HttpListenerLimits {
  headersTimeoutMs: number;
  requestTimeoutMs: number;
  keepAliveTimeoutMs: number;
  /** 0: no limit */
  maxConnectionsPerIp: number;
}

export interface SmtpListenerLimits {
  idleTimeoutMs: number;
  sessionTimeoutMs: number;
  maxClients: number;
  /** 0: no limit */
  maxConnectionsPerIp: number;
  /** how long close() waits for sessions before it ends them */
  closeTimeoutMs?: number;
}

type LimitConfig = Pick<Config, 'httpHeadersTimeoutMs' | 'httpRequestTimeoutMs' | 'httpKeepAliveTimeoutMs' | 'maxConnectionsPerIp' | 'bounceIdleTimeoutMs' | 'bounceSessionTimeoutMs'>;

/** The HTTP limits the configuration sets (--http-*-timeout-ms, --max-connections-per-ip). */
export function httpLimitsFrom(config: LimitConfig): HttpListenerLimits {
  return {
    headersTimeoutMs: config.httpHeadersTimeoutMs,
    requestTimeoutMs: config.httpRequestTimeoutMs,
    keepAliveTimeoutMs: config.httpKeepAliveTimeoutMs,
    maxConnectionsPerIp: config.maxConnectionsPerIp,
  };
}

/** The SMTP limits the configuration sets (--smtp-*-timeout-ms, --max-connections-per-ip). */
export function smtpLimitsFrom(config: LimitConfig, maxClients: number): SmtpListenerLimits {
  return { idleTimeoutMs: config.bounceIdleTimeoutMs, sessionTimeoutMs: config.bounceSessionTimeoutMs, maxClients, maxConnectionsPerIp: config.maxConnectionsPerIp };
}

/** Open connections per remote address, with the release of one. */
class AddressCounts {
  private readonly counts = new Map<string, number>();
  constructor(private readonly max: number) {}

  /** Counts one more from `address`; false (nothing counted) when that would exceed the limit. */
  take(address: string): boolean {
    const n = this.counts.get(address) ?? 0;
    if (this.max > 0 && n >= this.max) return false;
    this.counts.set(address, n + 1);
    return true;
  }

  release(address: string): void {
    const n = (this.counts.get(address) ?? 1) - 1;
    if (n <= 0) this.counts.delete(address);
    else this.counts.set(address, n);
  }
}

const connectionKey = (socket: Socket) => `${socket.remoteAddress}|${socket.remotePort}`;

/** What a client that did not send its request in time is told before it is disconnected. */
export interface HttpTimeoutAnswer {
  /** the JSON body of the 408 (the API's envelope); without it the connection is only closed */
  timeoutJson?: string;
}

/** A whole HTTP/1.1 408 response with `json` as its body, closing the connection. */
function timeoutResponse(json: string): string {
  return (
    'HTTP/1.1 408 Request Timeout\r\nContent-Type: application/json; charset=utf-8\r\nX-Content-Type-Options: nosniff\r\n' +
    `Content-Length: ${Buffer.byteLength(json)}\r\nConnection: close\r\n\r\n${json}`
  );
}

/**
 * Applies the limits to a node http or https server (Fastify's app.server). Call it once, before
 * the server listens.
 */
export function limitHttpServer(server: http.Server, limits: HttpListenerLimits, answers: HttpTimeoutAnswer = {}): void {
  const { timeoutJson } = answers;
  // Node's own enforcement, as a backstop (checked every 30 s) and for what it does precisely
  // (keep-alive is a socket timeout).
  server.headersTimeout = limits.headersTimeoutMs;
  server.requestTimeout = limits.requestTimeoutMs;
  server.keepAliveTimeout = limits.keepAliveTimeoutMs;

  const perIp = new AddressCounts(limits.maxConnectionsPerIp);
  /**
   * The deadline of each connection for its next request's headers, by address and port: an https
   * server's requests carry the TLS socket, not the TCP socket 'connection' gave, and both have
   * the same remote address and port.
   */
  const headerDeadlines = new Map<string, { socket: Socket; http: Socket | null; idle: boolean; timer: NodeJS.Timeout | null }>();
  const tls = server instanceof TlsServer;
  const armHeaders = (key: string, ms: number, idle: boolean) => {
    const entry = headerDeadlines.get(key);
    if (!entry) return;
    if (entry.timer) clearTimeout(entry.timer);
    entry.idle = idle;
    entry.timer = setTimeout(() => answerTimeout(entry), ms);
    entry.timer.unref();
  };
  /**
   * The request line and headers did not come in time: 408 on the socket HTTP is spoken on (the
   * TLS socket once its handshake is done), then the connection goes. A kept-alive connection
   * past its allowance after an answer is only closed, as Node closes one.
   */
  const answerTimeout = (entry: { socket: Socket; http: Socket | null; idle: boolean }) => {
    if (timeoutJson === undefined || entry.idle || entry.http === null || !entry.http.writable) {
      entry.socket.destroy();
      return;
    }
    entry.http.end(timeoutResponse(timeoutJson));
    entry.http.destroySoon();
    // A client that does not read its answer does not keep the socket.
    setTimeout(() => entry.socket.destroy(), 1000).unref();
  };

  server.on('connection', (socket: Socket) => {
    const address = socket.remoteAddress ?? '';
    if (!perIp.take(address)) {
      socket.destroy();
      return;
    }
    const key = connectionKey(socket);
    headerDeadlines.set(key, { socket, http: tls ? null : socket, idle: false, timer: null });
    armHeaders(key, limits.headersTimeoutMs, false);
    socket.once('close', () => {
      perIp.release(address);
      const entry = headerDeadlines.get(key);
      if (entry?.socket === socket) {
        if (entry.timer) clearTimeout(entry.timer);
        headerDeadlines.delete(key);
      }
    });
  });

  if (tls) {
    server.on('secureConnection', (socket: Socket) => {
      const entry = headerDeadlines.get(connectionKey(socket));
      if (entry) entry.http = socket;
    });
  }

  server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
    const key = connectionKey(req.socket);
    const entry = headerDeadlines.get(key);
    if (entry?.timer) {
      clearTimeout(entry.timer);
      entry.timer = null;
    }
    // The body is the client's to send in time (408 when it does not); the answer is the handler's.
    const bodyDeadline = setTimeout(() => {
      if (req.complete) return;
      if (timeoutJson === undefined || res.headersSent || !req.socket.writable) {
        req.socket.destroy();
        return;
      }
      // Connection: close: Node ends the socket once the answer is written; the body never completes.
      res.writeHead(408, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(timeoutJson), 'x-content-type-options': 'nosniff', connection: 'close' });
      res.end(timeoutJson);
      setTimeout(() => req.socket.destroy(), 1000).unref();
    }, limits.requestTimeoutMs);
    bodyDeadline.unref();
    res.once('close', () => clearTimeout(bodyDeadline));
    // After the answer, the next request's headers are due within the keep-alive allowance.
    res.once('finish', () => armHeaders(key, limits.keepAliveTimeoutMs + limits.headersTimeoutMs, true));
  });
}

/**
 * Applies the limits to an smtp-server instance (before it listens): its options are read per
 * connection, and its onConnect/onClose hooks are wrapped, so the listener's own hooks still run
 * for every session that is let in.
 */
export function limitSmtpServer(server: SMTPServer, limits: SmtpListenerLimits): void {
  const options = (server as unknown as { options: Record<string, unknown> }).options;
  options.socketTimeout = limits.idleTimeoutMs;
  options.maxClients = limits.maxClients;
  if (limits.closeTimeoutMs !== undefined) options.closeTimeout = limits.closeTimeoutMs;
  // No PTR lookup of the client: the session waits for its answer before the greeting, so whoever
  // controls the PTR zone of their address could hold every connection for the resolver's whole
  // timeout; and no listener uses the name.
  options.disableReverseLookup = true;

  const perIp = new AddressCounts(limits.maxConnectionsPerIp);
  const counted = new Set<string>();
  const hooks = server as unknown as {
    onConnect(session: SMTPServerSession, callback: (error?: Error | null) => void): void;
    onClose(session: SMTPServerSession, callback: () => void): void;
  };
  const onConnect = hooks.onConnect.bind(server);
  const onClose = hooks.onClose.bind(server);
  hooks.onConnect = (session, callback) => {
    if (!perIp.take(session.remoteAddress)) {
      callback(Object.assign(new Error('4.7.0 Too many connections from your address, try again later'), { responseCode: 421 }));
      return;
    }
    counted.add(session.id);
    onConnect(session, callback);
  };
  hooks.onClose = (session, callback) => {
    if (counted.delete(session.id)) perIp.release(session.remoteAddress);
    onClose(session, callback);
  };

  // The whole session's bound, on the TCP socket: a client that keeps sending a byte now and then
  // is never idle.
  server.server.on('connection', (socket: Socket) => {
    const timer = setTimeout(() => socket.destroy(), limits.sessionTimeoutMs);
    timer.unref();
    socket.once('close', () => clearTimeout(timer));
  });
}

// The SMTP adapter: Nodemailer's pooled client, one pool per destination (address, port, TLS mode,
// credentials), and the translation of whatever happened on the wire into an SmtpExchange value.
// Nothing here throws for a delivery problem; a throw out of send() is a defect, or the caller's
// fence (MayStart) failing.
//
// Limits:
// - per destination: at most maxConnectionsPerDestination connections (the pool's maxConnections),
//   and no more transactions in flight than that (a semaphore in front of the pool, so a busy
//   destination queues here instead of holding global slots);
// - in total: at most maxConnections SMTP transactions in flight across all destinations. Idle
//   pooled connections close after socketTimeoutMs of inactivity (the server's or ours), and a pool
//   unused for POOL_IDLE_MS is closed whole.
// - many messages per connection (MESSAGES_PER_CONNECTION), then a fresh connection.
//
// TLS: STARTTLS whenever the server offers it (opportunistic, certificates not verified: Postfix's
// "may" level, because an unverified encryption still beats plain text); with requireTls, STARTTLS
// is mandatory and the certificate must verify against the destination's host name (Postfix's
// "verify"), otherwise the attempt is deferred with TLS_REQUIRED / TLS_FAILED. A failed STARTTLS
// handshake in opportunistic mode is retried in plain text (see send()).
import nodemailer, { type Transporter } from 'nodemailer';
import PoolResource from 'nodemailer/lib/smtp-pool/pool-resource.js';
import net from 'node:net';
import { Readable } from 'node:stream';
import type { Logger } from 'pino';
import type { Config } from '../config.ts';
import { splitReply, type SmtpExchange, type SmtpFailure, type SmtpStage } from '../domain/classify-smtp-reply.ts';
import type { DkimKey } from './dkim.ts';
import { DkimSigners, nodemailerSigner } from './dkim-signing.ts';
import type { Destination } from './routes.ts';
import { installSmtpPipelining, NO_8BITMIME, NO_SMTPUTF8 } from './smtp-pipelining.ts';
import { withFields } from '../domain/objects.ts';
import { maskAddresses } from '../domain/mask-addresses.ts';

export const MESSAGES_PER_CONNECTION = 1000;
const POOL_IDLE_MS = 60_000;
/** How long a destination whose STARTTLS failed is sent plain text before TLS is tried again. */
const TLS_BROKEN_MS = 3_600_000;

/** The delivery settings of the configuration (documented there), and a logger. */
export type SmtpClientOptions = Pick<
  Config,
  'ehloName' | 'requireTls' | 'maxConnectionsPerDestination' | 'maxConnections' | 'connectTimeoutMs' | 'greetingTimeoutMs' | 'socketTimeoutMs' | 'dataDoneTimeoutMs'
> &
  Partial<Pick<Config, 'logAddresses'>> & { log: Logger };

export interface Envelope {
  from: string;
  to: string;
  /**
   * The message needs SMTPUTF8 (a UTF-8 address in the envelope or the headers) or BODY=8BITMIME
   * (an 8-bit body): announced on MAIL FROM where the server offers them, a permanent failure
   * before MAIL FROM where it does not (smtp-pipelining.ts; domain/smtp-extensions.ts decides).
   */
  smtpUtf8?: boolean;
  eightBitMime?: boolean;
}

/** A whole message, or its parts in order (large messages: the shared MIME is never copied). */
export type MessageBytes = Buffer | readonly Buffer[];

export interface SendResult extends SmtpExchange {
  /** the destination's host name (what the attempt records) */
  host: string;
  /** whether the SMTP session used TLS (implicit or STARTTLS); null when no session was set up */
  tls?: boolean | null;
  /** not sent: the caller's fence (`mayStart`) said no once a connection was free */
  fenced?: true;
}

/**
 * Asked right before a transaction starts (after the wait for a connection, which a stalled process
 * may have spent presumed dead): false, and nothing is sent (workers/lease-runner.ts, the fence).
 */
export type MayStart = () => Promise<boolean>;

/** A counting semaphore: acquire() resolves when a slot is free. */
class Semaphore {
  private waiting: Array<() => void> = [];
  constructor(private free: number) {}
  get busy(): boolean {
    return this.waiting.length > 0;
  }
  acquire(): Promise<void> {
    if (this.free > 0) {
      this.free--;
      return Promise.resolve();
    }
    return new Promise((resolve) => this.waiting.push(resolve));
  }
  release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.free++;
  }
}

interface Pool {
  transport: Transporter;
  slots: Semaphore;
  inFlight: number;
  lastUsedMs: number;
}

export class SmtpClient {
  private readonly pools = new Map<string, Pool>();
  /** destinations whose STARTTLS failed, until when they are sent plain text */
  private readonly tlsBroken = new Map<string, number>();
  private readonly total: Semaphore;
  private readonly sweeper: NodeJS.Timeout;
  private closed = false;
  /** SMTP connections open now, every destination together (posthorn_smtp_connections_open) */
  private open = 0;
  /** their sockets (the TCP connections under any TLS) */
  private readonly sockets = new Set<net.Socket>();
  private readonly signers = new DkimSigners();

  constructor(private readonly opts: SmtpClientOptions) {
    installSmtpPipelining();
    releaseFailedConnects();
    this.total = new Semaphore(Math.max(1, opts.maxConnections));
    this.sweeper = setInterval(() => this.closeIdlePools(), POOL_IDLE_MS / 2);
    this.sweeper.unref();
  }

  /**
   * Sends one message to the destinations in order: the next one is tried only when a destination
   * could not be talked to at all (refused, unreachable, timed out before its greeting, or a 421
   * greeting). Any reply to the transaction itself ends the attempt.
   */
  async sendVia(destinations: readonly Destination[], envelope: Envelope, raw: MessageBytes, dkim: DkimKey | null, mayStart?: MayStart): Promise<SendResult> {
    let last: SendResult | null = null;
    for (const destination of destinations) {
      last = await this.send(destination, envelope, raw, dkim, mayStart);
      if (last.fenced || !isConnectionFailure(last)) return last;
    }
    return last ?? { code: null, text: 'no destination to try', stage: 'connect', failure: 'unreachable', host: '' };
  }

  async send(destination: Destination, envelope: Envelope, raw: MessageBytes, dkim: DkimKey | null, mayStart?: MayStart): Promise<SendResult> {
    // Opportunistic TLS, like Postfix's "may": a STARTTLS that fails (broken TLS stack, no
    // common cipher) is retried at once in plain text rather than deferring the mail for days, and
    // the destination is sent plain text for a while. Not for implicit TLS (smtps), not with
    // --require-tls (TLS is the point), not with credentials (they must not travel in clear).
    const mayFallBack = !this.opts.requireTls && !destination.secure && !destination.auth;
    const key = `${destination.address}|${destination.port}`;
    const brokenUntil = this.tlsBroken.get(key);
    if (mayFallBack && brokenUntil !== undefined && brokenUntil > Date.now()) return this.sendOnce(destination, envelope, raw, dkim, true, mayStart);
    const result = await this.sendOnce(destination, envelope, raw, dkim, false, mayStart);
    if (result.failure === 'tls' && mayFallBack) {
      this.opts.log.info({ host: destination.name, reason: this.opts.logAddresses ? result.text : maskAddresses(result.text ?? '') }, 'STARTTLS failed; sending without TLS');
      this.tlsBroken.set(key, Date.now() + TLS_BROKEN_MS);
      return this.sendOnce(destination, envelope, raw, dkim, true, mayStart);
    }
    return result;
  }

  private async sendOnce(destination: Destination, envelope: Envelope, raw: MessageBytes, dkim: DkimKey | null, plain: boolean, mayStart?: MayStart): Promise<SendResult> {
    if (this.closed) return { code: null, text: 'delivery is shutting down', stage: 'connect', failure: 'dropped', host: destination.name };
    const pool = this.poolFor(destination, plain);
    pool.inFlight++;
    await pool.slots.acquire();
    await this.total.acquire();
    try {
      // The fence's own failure (the database away) is thrown, for the caller to wait out.
      if (mayStart && !(await mayStart())) return { code: null, text: 'not sent: the claim was lost', stage: 'connect', failure: 'dropped', host: destination.name, tls: null, fenced: true };
      try {
        const info = await sendRaw(pool.transport, envelope, raw, dkim, this.signers);
        const reply = splitReply(String(info.response ?? ''));
        return { code: reply.code ?? 250, text: reply.text, stage: 'message', host: destination.name, tls: info.posthornTls ?? null };
      } catch (error) {
        return withFields(exchangeFromError(error), { host: destination.name, tls: tlsOfError(error) });
      }
    } finally {
      this.total.release();
      pool.slots.release();
      pool.inFlight--;
      pool.lastUsedMs = Date.now();
    }
  }

  /** `plain`: never STARTTLS (the fallback after a failed handshake). */
  private poolFor(d: Destination, plain = false): Pool {
    const key = `${d.address}|${d.port}|${d.name}|${d.secure ? 's' : plain ? 'n' : 'p'}|${d.auth?.user ?? ''}`;
    let pool = this.pools.get(key);
    if (pool) return pool;
    const verify = this.opts.requireTls;
    const transport = nodemailer.createTransport({
      pool: true,
      host: d.address,
      port: d.port,
      secure: d.secure,
      name: this.opts.ehloName,
      // Credentials never travel in clear: with them, a server that does not offer STARTTLS gets
      // no AUTH (the attempt defers with TLS_REQUIRED), as Postfix's noplaintext default does.
      requireTLS: (verify || d.auth !== null) && !d.secure,
      ignoreTLS: plain,
      tls: {
        rejectUnauthorized: verify,
        // SNI and certificate checks against the host's name, never the IP connected to.
        ...(net.isIP(d.name) ? {} : { servername: d.name }),
      },
      auth: d.auth ? { user: d.auth.user, pass: d.auth.pass } : undefined,
      maxConnections: Math.max(1, this.opts.maxConnectionsPerDestination),
      maxMessages: MESSAGES_PER_CONNECTION,
      // MAIL, RCPT and DATA in one write where the server offers PIPELINING (smtp-pipelining.ts).
      posthornPipelining: true,
      // A connection closed under a message is retried once on a fresh connection (a pooled
      // connection the server closed while idle), then reported: nodemailer's default would
      // requeue without end.
      maxRequeues: 1,
      connectionTimeout: this.opts.connectTimeoutMs,
      greetingTimeout: this.opts.greetingTimeoutMs,
      socketTimeout: this.opts.socketTimeoutMs,
      // The reply to the end of the message waits this long instead (smtp-pipelining.ts).
      posthornDataDoneTimeout: this.opts.dataDoneTimeoutMs,
      disableFileAccess: true,
      disableUrlAccess: true,
      // Nagle's algorithm off (see connectWithoutNagle): ~45 ms per message otherwise.
      getSocket: (options: ConnectOptions, callback: ConnectCallback) => connectWithoutNagle(options, callback, (socket) => this.countOpen(socket)),
      logger: false,
      debug: false,
    } as nodemailer.TransportOptions);
    pool = { transport, slots: new Semaphore(Math.max(1, this.opts.maxConnectionsPerDestination)), inFlight: 0, lastUsedMs: Date.now() };
    this.pools.set(key, pool);
    return pool;
  }

  private closeIdlePools(): void {
    const now = Date.now();
    for (const [key, pool] of this.pools) {
      if (pool.inFlight === 0 && now - pool.lastUsedMs > POOL_IDLE_MS) {
        this.pools.delete(key);
        pool.transport.close();
      }
    }
    for (const [key, until] of this.tlsBroken) if (until <= now) this.tlsBroken.delete(key);
  }

  openConnections(): number {
    return this.open;
  }

  private countOpen(socket: net.Socket): void {
    this.open++;
    this.sockets.add(socket);
    socket.once('close', () => {
      this.open--;
      this.sockets.delete(socket);
    });
  }

  /**
   * Closes every pool; connections still in a transaction are cut. It is called when a stop's grace
   * is over (workers/lease-runner.ts): what is still in flight then has been given back, and an
   * SMTP conversation left open would keep the process alive until its timeout (up to
   * --data-done-timeout-ms). Its sends end at once (CONNECTION_LOST), recorded by no one.
   */
  close(): void {
    this.closed = true;
    void this.signers.close();
    clearInterval(this.sweeper);
    // Idle connections are ended by their pools; the rest are in a transaction.
    for (const pool of this.pools.values()) pool.transport.close();
    this.pools.clear();
    for (const socket of this.sockets) if (!socket.writableEnded) socket.destroy();
  }
}

/**
 * Nodemailer's getSocket hook: the TCP connection with Nagle's algorithm off, handed over connected
 * (its pool passes only `connection` on; TLS, implicit or STARTTLS, is still set up by Nodemailer
 * over it). Nodemailer writes a message's body and the final ".\r\n" as two writes; with Nagle on,
 * the small second write waits for the ACK of the first, which the receiver delays (40 ms on Linux):
 * about 45 ms per message per connection, 10 connections topping out near 210 msg/s
 * (bench/, docs/decisions/0003-performance.md).
 */
type ConnectOptions = { host?: string; port: number; connectionTimeout?: number };
type ConnectCallback = (error: Error | null, socketOptions?: { connection: net.Socket }) => void;

/**
 * Nodemailer's pool (7.0) keeps a connection whose getSocket reported an error in its list, busy,
 * for good: its pool resource calls back with the error but never emits it, and the error event is
 * how the pool lets go of a connection. Each refused or timed-out connect so took one of the
 * destination's connection slots; after maxConnections of them, every later message to it waited
 * forever, holding a delivery slot (and, soon, all of them). Installed once: the resource emits the
 * error, as it does for an error of its own connect; the pool then removes it, answers its message
 * with the error, and goes on with the queue.
 */
function releaseFailedConnects(): void {
  const proto = PoolResource.prototype as unknown as Record<string | symbol, unknown>;
  if (proto[RELEASE_MARK]) return;
  proto[RELEASE_MARK] = true;
  const original = proto.connect as (this: PoolResource, callback: (err: Error | null) => void) => void;
  proto.connect = function connectOrRelease(this: PoolResource, callback: (err: Error | null) => void): void {
    original.call(this, (err: Error | null) => {
      // Only getSocket's errors come here before the resource has a connection of its own; the
      // connection's errors the resource emits itself.
      if (err && !(this as unknown as { connection?: unknown }).connection) this.emit('error', err);
      else callback(err);
    });
  };
}
const RELEASE_MARK = Symbol.for('posthorn.pool-release-failed-connects');

/** `onConnected`: told of every socket that connected (the open-connection count). */
export function connectWithoutNagle(options: ConnectOptions, callback: ConnectCallback, onConnected?: (socket: net.Socket) => void): void {
  const socket = net.connect({ host: options.host, port: options.port }).setNoDelay(true);
  const timer = setTimeout(() => socket.destroy(new Error('Connection timeout')), options.connectionTimeout ?? 120_000);
  socket.once('connect', () => {
    clearTimeout(timer);
    socket.removeAllListeners('error');
    socket.setKeepAlive(true);
    onConnected?.(socket);
    callback(null, { connection: socket });
  });
  socket.once('error', (error) => {
    clearTimeout(timer);
    callback(error);
  });
}

/**
 * Hands one finished message to the pool's transporter (Nodemailer's SMTPPool) directly, skipping
 * Mailer.sendMail: the message is already composed (domain/compose-mime.ts), and sendMail would wrap it in a
 * MailMessage, compile a MIME node around the raw bytes and stream them through newline
 * transforms, a third of the client's CPU per message (measured with --cpu-prof). The pool needs
 * only the envelope and the bytes (a Buffer is written as is, dot-stuffed by the connection);
 * DKIM signing is Nodemailer's signer over the same bytes.
 */
/** What smtp-pipelining.ts notes on an error: the session's TLS state when it failed, if it had one. */
function tlsOfError(error: unknown): boolean | null {
  const tls = (error as { posthornTls?: unknown } | null)?.posthornTls;
  return typeof tls === 'boolean' ? tls : null;
}

interface SentInfo {
  response?: string;
  /** set by smtp-pipelining.ts: whether the session was encrypted */
  posthornTls?: boolean;
}

async function sendRaw(transport: Transporter, envelope: Envelope, raw: MessageBytes, dkim: DkimKey | null, signers: DkimSigners): Promise<SentInfo> {
  const pool = (transport as unknown as { transporter: { send(mail: unknown, cb: (err: Error | null, info?: SentInfo) => void): boolean } }).transporter;
  // A message in one Buffer is signed before it is handed over (on a signing thread, dkim-signing.ts),
  // into one Buffer, which the connection writes straight to its socket (smtp-pipelining.ts); a
  // message in parts (a large one) is signed as a stream, never held whole twice.
  const signed = dkim && Buffer.isBuffer(raw) ? await signers.sign(raw, dkim) : null;
  const signer = dkim && !signed ? nodemailerSigner(dkim) : null;
  const mail = {
    data: {},
    message: {
      // use8BitMime is Nodemailer's own flag (BODY=8BITMIME where offered); posthornSmtpUtf8 is
      // read by smtp-pipelining.ts.
      getEnvelope: () => ({ from: envelope.from, to: [envelope.to], use8BitMime: envelope.eightBitMime === true, posthornSmtpUtf8: envelope.smtpUtf8 === true }),
      messageId: () => '',
      getHeader: () => '',
      // Called again when the pool requeues the message on a fresh connection.
      createReadStream: () => {
        if (signed) return signed;
        const bytes = Buffer.isBuffer(raw) ? raw : Readable.from(raw, { objectMode: false });
        return signer ? signer.sign(bytes) : bytes;
      },
    },
  };
  return new Promise((resolve, reject) => {
    const queued = pool.send(mail, (err, info) => (err ? reject(err) : resolve(info ?? {})));
    if (queued === false) reject(Object.assign(new Error('Connection pool was closed'), { code: 'ECONNECTION' }));
  });
}

/** True when the server was never talked to (or turned us away at the greeting): try the next host. */
export function isConnectionFailure(result: SmtpExchange): boolean {
  if (result.stage !== 'connect' && result.stage !== 'greeting') return false;
  if (result.code === null) return result.failure === 'refused' || result.failure === 'timeout' || result.failure === 'unreachable' || result.failure === 'dropped';
  return result.code === 421 || (result.code >= 400 && result.code < 500);
}

const STAGES: Record<string, SmtpStage> = {
  CONN: 'connect',
  EHLO: 'ehlo',
  HELO: 'ehlo',
  LHLO: 'ehlo',
  STARTTLS: 'starttls',
  'MAIL FROM': 'mail',
  'RCPT TO': 'rcpt',
  RSET: 'mail',
};

const MISSING_EXTENSION = new Map<string | undefined, SmtpFailure>([
  [NO_SMTPUTF8, 'no_smtputf8'],
  [NO_8BITMIME, 'no_8bitmime'],
]);

interface NodemailerError {
  code?: string;
  command?: string;
  response?: string;
  responseCode?: number;
  message?: string;
  /** smtp-pipelining.ts: the transaction's stage a reply was awaited for when the socket failed */
  posthornStage?: SmtpStage;
  /** ... and the whole message had been sent (its final reply was awaited) */
  posthornDataDone?: boolean;
}

/** What a timeout waited for, by the stage it ended at. */
function awaited(stage: SmtpStage, dataDone: boolean): string {
  if (stage === 'connect') return 'the connection or the greeting';
  if (stage === 'message') return dataDone ? 'the reply to the end of the message data' : 'the message data to be taken';
  return `the reply to ${stage === 'mail' ? 'MAIL FROM' : stage === 'rcpt' ? 'RCPT TO' : stage.toUpperCase()}`;
}

/** What a Nodemailer error says happened, as a value. */
export function exchangeFromError(error: unknown): SmtpExchange {
  const e = (typeof error === 'object' && error !== null ? error : { message: String(error) }) as NodemailerError;
  const message = e.message ?? 'unknown error';
  let stage: SmtpStage = STAGES[e.command ?? ''] ?? 'connect';
  if (e.command === 'DATA') stage = e.code === 'EMESSAGE' ? 'message' : 'data';
  else if (e.command?.startsWith('AUTH')) stage = 'auth';
  else if (e.command === 'API' || e.command === undefined) stage = e.code === 'EMESSAGE' ? 'message' : 'connect';
  // A failure of the socket itself (a timeout, a close) in the middle of a transaction: Nodemailer
  // names the connection, smtp-pipelining.ts the stage.
  if (e.command === 'CONN' && e.posthornStage) stage = e.posthornStage;
  // TLS first: a refused STARTTLS comes with the server's reply, but it is a TLS matter (the server
  // cannot do what --require-tls demands), not a rejection of the message.
  if (e.code === 'ETLS') {
    const refused = /upgrading connection with STARTTLS/i.test(message);
    const text = refused ? `server does not offer STARTTLS${e.response ? ` (${splitReply(e.response).text})` : ''}` : message;
    return { code: null, text, stage: 'starttls', failure: refused ? 'tls_required' : 'tls' };
  }
  if (typeof e.responseCode === 'number' && e.responseCode >= 200 && e.response) {
    const reply = splitReply(e.response);
    // A reply to the connection itself is the greeting.
    if (e.command === 'CONN' && !e.posthornStage) stage = 'greeting';
    return { code: e.responseCode, text: reply.text || message, stage };
  }
  // Refused before MAIL FROM: the server lacks an extension the message needs (smtp-pipelining.ts).
  const missing = MISSING_EXTENSION.get(e.code);
  if (missing) return { code: null, text: message, stage: 'mail', failure: missing };
  const text = `${message}`.replace(/^Error: /, '');
  if (e.code === 'ETIMEDOUT' || /timeout|timed out/i.test(message)) {
    return { code: null, text: `timed out waiting for ${awaited(stage, e.posthornDataDone === true)} (${text})`, stage, failure: 'timeout' };
  }
  if (/ECONNREFUSED/.test(message)) return { code: null, text, stage: 'connect', failure: 'refused' };
  if (/EHOSTUNREACH|ENETUNREACH|EADDRNOTAVAIL/.test(message)) return { code: null, text, stage: 'connect', failure: 'unreachable' };
  if (/certificate|self[- ]signed|SSL|TLS/i.test(message)) return { code: null, text, stage: 'starttls', failure: 'tls' };
  if (e.code === 'EPROTOCOL') return { code: null, text, stage, failure: 'protocol' };
  return { code: null, text, stage, failure: 'dropped' };
}

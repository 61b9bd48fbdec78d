// SMTP submission (docs/smtp-submission.md): an edge that lets any SMTP client send through the
// same pipeline as send_message. It speaks SMTP only; who the client is comes from
// operations/authenticate.ts and what is accepted from operations/submit-message.ts.
//
// - Two listeners: STARTTLS on --submission-port, implicit TLS on --submission-tls-port.
// - AUTH PLAIN or LOGIN before MAIL FROM: user = the project's uid, password = a project API key.
//   Only after TLS, unless plaintext is allowed (--submission-allow-plaintext, or no certificate
//   and a loopback address). Every failure is 535; too many failures from one address in
//   AUTH_FAILURE_WINDOW_MS get 421 and the connection is closed.
// - The key is checked again at the end of each DATA: once it no longer answers, 535, and the
//   connection's identity is cleared so that the client may AUTH again on it.
// - The message gets a Received field naming the client (EHLO name, address, protocol, TLS).
// - Each MAIL FROM takes one token of the key's --rate-limit-per-key budget (the API's, shared):
//   none left answers 451 with the seconds to wait.
// - RCPT TO is checked as the API checks a recipient: an address it would refuse is 553 at once.
// - The 250 after DATA is sent only once the message is committed (submitMessage resolves); any
//   other failure answers 451 so the client retries: nothing accepted is ever lost. A
//   retransmission of a message accepted before (its uid known) is answered 250 with that
//   message's id, and nothing is stored.
// - SMTP smuggling: smtp-server ends DATA only on <CRLF>.<CRLF>; a message holding a "." line
//   reached through a bare CR or LF (<LF>.<LF>, <CR><LF>.<LF>, <LF>.<CR><LF>, <CR>.<CR>...) is
//   refused whole, so no hop after us can read it as the end of the message.
import fs from 'node:fs';
import net, { type AddressInfo } from 'node:net';
import { SMTPServer, type SMTPServerAuthentication, type SMTPServerDataStream, type SMTPServerSession } from 'smtp-server';
import type { BackgroundService, Services } from '../services.ts';
import { ApiError } from '../domain/errors.ts';
import { authenticate } from '../operations/authenticate.ts';
import type { ProjectCaller } from '../operations/context.ts';
import { takeKeyToken } from '../operations/rate-limits.ts';
import { checkSubmissionRecipient, checkSubmissionSender, submitMessage, SubmissionRefused, type SubmissionTrace } from '../operations/submit-message.ts';
import { isLoopback } from '../config.ts';

/** Failed AUTH attempts allowed per client address per window before it is turned away. */
export const MAX_AUTH_FAILURES = 10;
export const AUTH_FAILURE_WINDOW_MS = 5 * 60_000;

class SmtpReply extends Error {
  constructor(
    readonly responseCode: number,
    message: string,
  ) {
    super(message);
  }
}

interface SessionState {
  caller: ProjectCaller | null;
  /** the key the session authenticated with, checked again for each message: a key rotated or a
   * project or account disabled during the session stops it as it stops a new login */
  key: string | null;
  /** the socket smtp-server writes the session's replies to: its TLS socket once there is one
   * (onSecure), else the raw TCP socket, found at the first reply answerLater holds */
  socket: net.Socket | null;
}

export interface SubmissionOptions {
  /** STARTTLS (or plaintext) port; null: not listening */
  port: number | null;
  /** implicit TLS port; null: not listening */
  tlsPort: number | null;
  host: string;
}

export class SubmissionListener implements BackgroundService {
  readonly name = 'smtp-submission';
  private readonly servers: Array<{ server: SMTPServer; port: number; secure: boolean }> = [];
  private readonly sessions = new Map<string, SessionState>();
  private readonly connectionsPerIp = new Map<string, number>();
  private readonly authFailures = new Map<string, number[]>();
  private readonly rawSockets = new Map<string, net.Socket>();
  private listening = false;

  constructor(
    private readonly services: Services,
    private readonly opts: SubmissionOptions,
  ) {
    const config = services.config;
    const tls =
      config.submissionTlsCert !== null && config.submissionTlsKey !== null
        ? { cert: fs.readFileSync(config.submissionTlsCert), key: fs.readFileSync(config.submissionTlsKey) }
        : null;
    const plaintext = config.submissionAllowPlaintext || (tls === null && isLoopback(opts.host));
    if (tls === null && !plaintext) {
      throw new Error('SMTP submission needs a certificate (--submission-tls-cert or --tls-cert) or --submission-allow-plaintext');
    }
    if (opts.port !== null) this.servers.push({ server: this.createServer(false, tls, plaintext), port: opts.port, secure: false });
    if (opts.tlsPort !== null) {
      if (tls === null) throw new Error('--submission-tls-port needs a certificate');
      this.servers.push({ server: this.createServer(true, tls, plaintext), port: opts.tlsPort, secure: true });
    }
  }

  /** The bound addresses (port 0 picks one): for tests and the startup log. */
  addresses(): { host: string; port: number | null; tlsPort: number | null } {
    const portOf = (secure: boolean) => {
      const entry = this.servers.find((s) => s.secure === secure);
      if (!entry) return null;
      return (entry.server.server.address() as AddressInfo | null)?.port ?? entry.port;
    };
    return { host: this.opts.host, port: portOf(false), tlsPort: portOf(true) };
  }

  /** Sessions open now (admitted and not yet closed), over both listeners. */
  openSessions(): number {
    return this.sessions.size;
  }

  async start(): Promise<void> {
    for (const entry of this.servers) {
      await new Promise<void>((resolve, reject) => {
        const onError = (error: Error) => reject(error);
        entry.server.server.once('error', onError);
        entry.server.listen(entry.port, this.opts.host, () => {
          entry.server.server.off('error', onError);
          resolve();
        });
      });
    }
    this.listening = true;
    this.services.log.info(this.addresses(), 'SMTP submission listening');
  }

  async stop(): Promise<void> {
    if (!this.listening) return;
    this.listening = false;
    // smtp-server's close waits for open connections (a DATA in flight commits and is answered).
    await Promise.all(this.servers.map((s) => new Promise<void>((resolve) => s.server.close(() => resolve()))));
  }

  private createServer(secure: boolean, tls: { cert: Buffer; key: Buffer } | null, plaintext: boolean): SMTPServer {
    const config = this.services.config;
    const server = new SMTPServer({
      secure,
      ...(tls ?? {}),
      name: config.mailerHost,
      // smtp-server writes "220 <name> ESMTP <banner>".
      banner: 'Posthorn submission',
      size: config.submissionMaxBytes,
      authMethods: ['PLAIN', 'LOGIN'],
      allowInsecureAuth: plaintext,
      hideSTARTTLS: secure || tls === null,
      // DSN parameters (NOTIFY, RET) would be accepted and then not honoured: not offered.
      hideDSN: true,
      disabledCommands: secure || tls === null ? ['STARTTLS'] : [],
      logger: false,
      // No PTR lookup of clients: the service resolves nothing it does not have to.
      disableReverseLookup: true,
      maxClients: config.submissionMaxClients,
      socketTimeout: config.submissionIdleTimeoutMs,
      // At stop, open connections get this long to finish (a DATA in flight commits and is
      // answered), then 421. A message cut off before its 250 was not accepted: the client retries.
      closeTimeout: 10_000,
      onConnect: (session, callback) => callback(this.admit(session) ?? undefined),
      onSecure: (socket, session, callback) => {
        const state = this.sessions.get(session.id);
        if (state) state.socket = socket;
        callback();
      },
      onClose: (session) => this.release(session),
      onAuth: (auth, session, callback) => {
        this.checkAuth(auth, session).then(
          (user) => callback(null, { user }),
          (error: unknown) => callback(error instanceof SmtpReply ? error : this.temporaryFailure(error, 'authentication')),
        );
      },
      // Answered after the current callback (answerLater): smtp-server 3.21 stops reading a
      // connection when both hooks call back synchronously and whole transactions arrive pipelined
      // in one write (the client then waits for replies that never come, until the idle timeout).
      onMailFrom: (address, session, callback) => this.answerLater(session, () => callback(this.checkMailFrom(address.address, session) ?? undefined)),
      onRcptTo: (address, session, callback) => this.answerLater(session, () => callback(this.checkRecipient(address.address, session) ?? undefined)),
      onData: (stream, session, callback) => {
        this.receive(stream, session).then(
          (reply) => callback(null, reply),
          (error: unknown) => callback(error instanceof SmtpReply ? error : this.temporaryFailure(error, 'submission')),
        );
      },
    });
    // The raw TCP socket of every connection: for the total connection time limit (smtp-server's
    // own timeout is an idle one, and a client trickling bytes would never meet it), and for
    // answerLater's one write per pipelined group.
    server.server.on('connection', (socket: net.Socket) => {
      const key = socketKey(socket.remoteAddress, socket.remotePort);
      const timer = setTimeout(() => this.endOverTime(server, socket, key), config.submissionTotalTimeoutMs);
      timer.unref();
      this.rawSockets.set(key, socket);
      socket.once('close', () => {
        clearTimeout(timer);
        this.rawSockets.delete(key);
      });
    });
    server.on('error', (error) => this.services.log.debug({ err: error }, 'SMTP submission connection error'));
    return server;
  }

  /**
   * A connection past the total time limit: 421 on the connection's own (perhaps TLS) socket, then
   * closed; the raw socket is destroyed a moment later whatever the client does.
   */
  private endOverTime(server: SMTPServer, socket: net.Socket, key: string): void {
    for (const connection of server.connections) {
      if (socketKey(connection.remoteAddress, connection.remotePort) !== key) continue;
      connection.send(421, '4.4.2 Connection time limit reached, closing');
      connection.close();
    }
    setTimeout(() => socket.destroy(), 1000).unref();
  }

  /**
   * Answers MAIL FROM or RCPT TO once the current callback has returned, and holds the session's
   * writes until the end of the event-loop turn: a client's pipelined MAIL, RCPT... and DATA
   * (RFC 2920) get their replies in one write (on TLS, one record), not one write, one packet and
   * one wake-up of the client per reply.
   */
  private answerLater(session: SMTPServerSession, answer: () => void): void {
    const state = this.sessions.get(session.id);
    const socket = state ? (state.socket ??= this.rawSockets.get(socketKey(session.remoteAddress, session.remotePort)) ?? null) : null;
    if (socket) {
      socket.cork();
      setImmediate(() => socket.uncork());
    }
    process.nextTick(answer);
  }

  private admit(session: SMTPServerSession): SmtpReply | null {
    const ip = session.remoteAddress;
    const open = this.connectionsPerIp.get(ip) ?? 0;
    if (open >= this.services.config.submissionMaxConnectionsPerIp) return new SmtpReply(421, '4.7.0 Too many connections from your address, try again later');
    this.connectionsPerIp.set(ip, open + 1);
    this.sessions.set(session.id, { caller: null, key: null, socket: null });
    return null;
  }

  private release(session: SMTPServerSession): void {
    if (!this.sessions.delete(session.id)) return;
    const ip = session.remoteAddress;
    const open = (this.connectionsPerIp.get(ip) ?? 1) - 1;
    if (open <= 0) this.connectionsPerIp.delete(ip);
    else this.connectionsPerIp.set(ip, open);
  }

  private async checkAuth(auth: SMTPServerAuthentication, session: SMTPServerSession): Promise<string> {
    const ip = session.remoteAddress;
    const now = Date.now();
    const recent = (this.authFailures.get(ip) ?? []).filter((t) => now - t < AUTH_FAILURE_WINDOW_MS);
    if (recent.length >= MAX_AUTH_FAILURES) throw new SmtpReply(421, '4.7.0 Too many failed authentication attempts, try again later');
    const fail = () => {
      recent.push(now);
      this.authFailures.set(ip, recent);
      if (this.authFailures.size > 100_000) this.forgetOldFailures(now);
      return new SmtpReply(535, '5.7.8 Authentication credentials invalid');
    };
    const user = auth.username ?? '';
    const password = auth.password ?? '';
    const caller = await this.projectCaller(password, user);
    if (!caller) throw fail();
    const state = this.sessions.get(session.id);
    if (state) {
      state.caller = caller;
      state.key = password;
    }
    return user;
  }

  /**
   * The caller of `key` when it is an active key of the project whose uid is `projectUid`, else
   * null: 401 (unknown or rotated key) and 423 (disabled account or project) alike, an account key,
   * another project's key.
   */
  private async projectCaller(key: string, projectUid: string): Promise<ProjectCaller | null> {
    let caller;
    try {
      caller = await authenticate(this.services, key);
    } catch (error) {
      if (error instanceof ApiError) return null;
      throw error;
    }
    return caller.keyKind === 'project' && caller.project !== null && caller.project.uid === projectUid ? (caller as ProjectCaller) : null;
  }

  private forgetOldFailures(now: number): void {
    for (const [ip, times] of this.authFailures) {
      if (times.every((t) => now - t >= AUTH_FAILURE_WINDOW_MS)) this.authFailures.delete(ip);
    }
  }

  private checkMailFrom(address: string, session: SMTPServerSession): SmtpReply | null {
    // session.transaction counts from 1: this MAIL FROM starts that transaction.
    if (session.transaction > this.services.config.submissionMaxMessagesPerConnection) {
      return new SmtpReply(421, `4.7.0 At most ${this.services.config.submissionMaxMessagesPerConnection} messages per connection, reconnect to send more`);
    }
    // The sender becomes the From of a message that has none: the API's address check, now.
    const refused = checkSubmissionSender(address);
    if (refused) return new SmtpReply(refused.code, refused.text);
    // One token of the key's budget per message, shared with the API (--rate-limit-per-key).
    const caller = this.sessions.get(session.id)?.caller;
    if (caller) {
      const token = takeKeyToken(this.services, `project:${caller.project.id}`);
      if (!token.ok) {
        const seconds = Math.max(1, Math.ceil(token.retryAfterMs / 1000));
        return new SmtpReply(451, `4.7.0 Rate limit of this API key exceeded (--rate-limit-per-key ${this.services.config.rateLimitPerKey}); retry in ${seconds} s`);
      }
    }
    return null;
  }

  private checkRecipient(address: string, session: SMTPServerSession): SmtpReply | null {
    if (session.envelope.rcptTo.length >= this.services.config.maxRecipients) {
      return new SmtpReply(452, `4.5.3 At most ${this.services.config.maxRecipients} recipients per message`);
    }
    // The address check of submitMessage (and of the API), answered now rather than failing the
    // copy after a 250.
    const refused = checkSubmissionRecipient(address);
    return refused ? new SmtpReply(refused.code, refused.text) : null;
  }

  /** The text of the 250 after DATA. */
  private async receive(stream: SMTPServerDataStream, session: SMTPServerSession): Promise<string> {
    const max = this.services.config.submissionMaxBytes;
    const chunks: Buffer[] = [];
    let bytes = 0;
    try {
      for await (const chunk of stream as AsyncIterable<Buffer>) {
        // Keep draining past the limit (the client must reach the end of DATA), but stop storing.
        if (bytes + chunk.length <= max) chunks.push(chunk);
        bytes += chunk.length;
      }
    } catch (error) {
      // The client went away before the end of DATA: nothing was accepted, nothing is stored, and
      // no one is left to answer. Not a failure of the service.
      if ((error as { code?: unknown }).code !== 'ECONNECTION') throw error;
      this.services.log.info({ remoteAddress: session.remoteAddress, bytes }, 'SMTP submission: the client closed the connection before the end of a message; nothing stored');
      throw new SmtpReply(451, '4.4.2 Connection closed before the end of the message');
    }
    if (stream.sizeExceeded || bytes > max) throw new SmtpReply(552, `5.3.4 Message exceeds the ${max} byte limit`);
    const raw = Buffer.concat(chunks, bytes);
    const smuggled = findBareLineEndDot(raw);
    if (smuggled !== -1) {
      throw new SmtpReply(550, '5.6.0 A "." line is reached through a bare CR or LF (SMTP smuggling); send CRLF line ends');
    }
    const state = this.sessions.get(session.id);
    if (!state?.caller) throw new SmtpReply(530, '5.7.0 Authentication required');
    const caller = await this.stillAuthorized(state, session);
    try {
      const sent = await submitMessage(this.services, caller, {
        envelopeFrom: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
        recipients: session.envelope.rcptTo.map((r) => r.address),
        raw,
        trace: traceOf(session),
      });
      // A retransmission of a message accepted before (docs/smtp-submission.md, "The uid"): the
      // 2xx a client that lost the first 250 expects, naming what it already has.
      if (sent.repeated) return `2.0.0 Ok: queued as ${sent.id} (already accepted${printableUid(sent.uid)}; nothing new stored)`;
      return `2.0.0 Ok: queued as ${sent.id}`;
    } catch (error) {
      if (error instanceof SubmissionRefused) throw new SmtpReply(error.code, error.text);
      throw error;
    }
  }

  /** The session's caller as its key answers now: a rotated key or a disabled project or account ends the session's sending. */
  private async stillAuthorized(state: SessionState, session: SMTPServerSession): Promise<ProjectCaller> {
    const caller = state.caller && state.key !== null ? await this.projectCaller(state.key, state.caller.project.uid) : null;
    if (caller) return (state.caller = caller);
    state.caller = null;
    state.key = null;
    // smtp-server's own identity too: the client may AUTH again on this connection (until then,
    // MAIL FROM is answered 530), where smtp-server would answer 503 "No identity changes".
    session.user = undefined;
    throw new SmtpReply(535, '5.7.8 The credentials of this session are no longer valid (key rotated, or project or account disabled)');
  }

  private temporaryFailure(error: unknown, what: string): SmtpReply {
    this.services.log.error({ err: error }, `SMTP ${what} failed; the client will retry`);
    return new SmtpReply(451, '4.3.0 Temporary failure, try again later');
  }
}

/**
 * What the Received field of a submitted message says of its client (operations/submit-message.ts):
 * the EHLO name, the address, the protocol (ESMTPSA: EHLO, TLS, AUTH) and the TLS version and
 * cipher. Nothing of the credentials.
 */
function traceOf(session: SMTPServerSession): SubmissionTrace {
  const tls = session.tlsOptions as { version?: unknown; standardName?: unknown; name?: unknown } | false | undefined;
  const cipher = tls ? String(tls.standardName ?? tls.name ?? '') : '';
  return {
    ehlo: session.hostNameAppearsAs || '',
    address: session.remoteAddress,
    protocol: session.transmissionType,
    tls: tls ? { version: String(tls.version ?? ''), cipher } : null,
  };
}

/**
 * ", uid <uid>" for a reply line, when the uid is printable ASCII (a uid header may hold UTF-8,
 * which a reply must not carry to a client that did not ask for SMTPUTF8); else nothing.
 */
function printableUid(uid: string): string {
  return /^[\x21-\x7e]+$/.test(uid) ? `, uid ${uid}` : '';
}

/**
 * The offset of the first "." that stands alone on a line whose line ends are not both CRLF (a
 * bare CR or LF before or after it), or -1. Such a line is an end-of-data sequence to a lenient
 * reader: the published SMTP smuggling sequences are all of this shape.
 */
export function findBareLineEndDot(raw: Buffer): number {
  let from = 0;
  for (;;) {
    const i = raw.indexOf(0x2e, from);
    if (i === -1) return -1;
    from = i + 1;
    const before = i > 0 ? raw[i - 1] : -1;
    const after = i + 1 < raw.length ? raw[i + 1] : -1;
    if ((before !== 0x0a && before !== 0x0d) || (after !== 0x0a && after !== 0x0d)) continue;
    const cleanBefore = before === 0x0a && i >= 2 && raw[i - 2] === 0x0d;
    const cleanAfter = after === 0x0d && raw[i + 2] === 0x0a;
    if (!cleanBefore || !cleanAfter) return i;
  }
}

/** A connection's client address and port, as smtp-server writes the address (no ::ffff: prefix). */
function socketKey(address: string | undefined, port: number | undefined): string {
  return `${(address ?? '').replace(/^::ffff:/i, '')}|${port ?? 0}`;
}

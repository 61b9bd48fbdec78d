// SMTP command pipelining (RFC 2920) for Nodemailer's client, which pipelines RCPT commands but
// waits for the MAIL FROM reply before sending them, and for the RCPT replies before DATA: four
// round trips per message on a reused connection. Where the server announces PIPELINING, this
// sends MAIL FROM, RCPT TO and DATA in one write and reads the three replies in order: two round
// trips per message (envelope, then the message itself), which on a pooled connection is what
// bounds a connection's rate (docs/decisions/0003-performance.md).
//
// It replaces SMTPConnection.prototype._setEnvelope, but acts only for connections created with
// the option `posthornPipelining: true` (delivery's pools) and one recipient (delivery sends one
// transmission per transaction); everything else, including other users of Nodemailer in the same
// process, runs the original code. The replacement keeps the original's envelope validation and
// MAIL FROM parameters (SMTPUTF8, 8BITMIME, SIZE, DSN) by letting it run, then taking over its
// queued MAIL reply handler.
//
// For the same connections, before any of that, the message's needs (the envelope's
// posthornSmtpUtf8 and use8BitMime, set by smtp-client.ts) are checked against what the server's
// EHLO announced: a message that needs SMTPUTF8 or 8BITMIME from a server without it is refused
// before MAIL FROM (NO_SMTPUTF8, NO_8BITMIME: a permanent failure, docs/delivery.md, "SMTP"),
// and SMTPUTF8 is added to MAIL FROM when the headers need it (Nodemailer adds it only for UTF-8
// addresses; it adds BODY=8BITMIME itself).
//
// For the same connections, a message given as a Buffer is written to the socket by this module
// (smtpDataPieces: dot-stuffed, with its terminator, in one writev) instead of through Nodemailer's
// data stream; the reply to it is still Nodemailer's to read.
//
// Reply handling follows RFC 2920 3.1: each reply is matched to its command in order; when MAIL or
// RCPT failed, the DATA reply is a 503/554 and the failure reported is the first one. A server that
// (against the RFC) answers 354 to DATA after a failed RCPT gets an empty message terminated at
// once, which it must reject for lack of recipients. A server that fails MAIL or RCPT and then
// closes the connection (`421 4.3.2 Service shutting down`) never answers the rest: its reply is
// what is reported, not the close (or a timeout) that follows it.
//
// For the same connections, the stage of the transaction a reply is awaited for (MAIL, RCPT, DATA,
// the message) is noted, so that a timeout or a close names it (smtp-client.ts reads
// `posthornStage` on the error; Nodemailer reports every socket event as the connection's), and
// once the whole message is written, the reply to its end gets its own timeout, the
// connection's `posthornDataDoneTimeout` (RFC 5321 4.5.3.2.6 "data termination": 10 minutes;
// Postfix's smtp_data_done_timeout), instead of the socket's inactivity timeout: a server that
// takes longer than that to answer the final dot already has the message, and giving up on it
// sends it again (docs/delivery.md, "SMTP").
import SMTPConnection from 'nodemailer/lib/smtp-connection/index.js';

/** The transaction's stages a reply is awaited for (domain/classify-smtp-reply.ts names them). */
type TransactionStage = 'mail' | 'rcpt' | 'data' | 'message';

interface PipelinedConnection {
  options: { posthornPipelining?: boolean; posthornDataDoneTimeout?: number; socketTimeout?: number; lmtp?: boolean; debug?: boolean };
  /** set by send(): the message being sent is a Buffer (written by DirectData) */
  _posthornBytes?: boolean;
  /** the stage whose reply is awaited, while a transaction is under way */
  _posthornStage?: TransactionStage | null;
  /** the whole message is written; its final reply is awaited under the data-done timeout */
  _posthornDataDone?: boolean;
  /** a pipelined MAIL or RCPT failure not reported yet (it is, with the DATA reply) */
  _posthornFailure?: (Error & { code?: string; command?: string }) | null;
  _destroyed?: boolean;
  _actionSMTPStream(str: string, callback: unknown): void;
  _supportedExtensions: string[];
  _responseActions: Array<(str: string) => void>;
  _responseQueue: string[];
  _processResponse(): void;
  _envelope: { to: string[]; rcptQueue: string[]; accepted: string[]; rejected: string[]; rejectedErrors: unknown[]; dsn?: unknown };
  _recipientQueue: string[];
  _socket: { cork(): void; uncork(): void; write(data: string | Buffer, callback?: () => void): boolean; setTimeout(ms: number): unknown };
  _ehloLines?: string[];
  _sendCommand(str: string): void;
  _formatError(message: string, type: string, response: string | false, command: string): Error & { recipient?: string; rejected?: string[]; rejectedErrors?: unknown[] };
  _getDsnRcptToArgs(): string;
}

type EnvelopeCallback = (err: Error | null, info?: unknown) => void;

/** What smtp-client.ts puts in the envelope: what the message needs of the server. */
interface NeedsOfEnvelope {
  to?: unknown;
  posthornSmtpUtf8?: boolean;
  use8BitMime?: boolean;
}

/** Error codes of a message the server cannot take by what it announced (smtp-client.ts reads them). */
export const NO_SMTPUTF8 = 'EPOSTHORN_NO_SMTPUTF8';
export const NO_8BITMIME = 'EPOSTHORN_NO_8BITMIME';

const proto = (SMTPConnection as unknown as { prototype: Record<string, unknown> }).prototype;
const MARK = Symbol.for('posthorn.smtp-pipelining');

/** Installs the pipelined envelope once per process (idempotent). */
export function installSmtpPipelining(): void {
  if (proto[MARK as unknown as string]) return;
  const original = proto._setEnvelope as (this: PipelinedConnection, envelope: unknown, callback: EnvelopeCallback) => void;
  const originalSendStream = proto._createSendStream as (this: PipelinedConnection, callback: unknown) => NodeJS.ReadWriteStream;
  proto[MARK as unknown as string] = true;
  // A message given as bytes (delivery's composed messages, signed or not, every one but the large
  // ones, which come as streams) is written straight to the socket, dot-stuffed, with its
  // terminating ".\r\n", in one writev: Nodemailer's data stream piped into the socket cost more
  // than the write itself (a Transform, a pipe set up and torn down, their events and ticks per
  // message; docs/decisions/0003-performance.md). A stream keeps Nodemailer's data stream, with
  // the socket corked until it ends, so that its bytes and the terminator, written separately,
  // still leave in one writev.
  proto._createSendStream = function corkedSendStream(this: PipelinedConnection, callback: unknown): NodeJS.ReadWriteStream {
    if (this.options.posthornPipelining) this._posthornStage = 'message';
    if (this.options.posthornPipelining && this._posthornBytes && !this.options.lmtp && !this.options.debug) {
      this._responseActions.push((str: string) => this._actionSMTPStream(str, callback));
      return new DirectData(this._socket, () => awaitDataDone(this)) as unknown as NodeJS.ReadWriteStream;
    }
    const stream = originalSendStream.call(this, callback);
    if (!this.options.posthornPipelining) return stream;
    stream.once('end', () => awaitDataDone(this));
    const socket = this._socket as PipelinedConnection['_socket'] & { writableLength: number; writableHighWaterMark: number };
    socket.cork();
    let corked = true;
    const uncork = () => {
      if (!corked) return;
      corked = false;
      process.nextTick(() => socket.uncork());
    };
    // A message must never pile up behind the cork: once the socket reports backpressure the pipe
    // waits for a 'drain' that a corked socket never emits. This listener runs after the pipe's
    // write of each chunk (it was added later), so it uncorks exactly then.
    const onData = () => {
      if (corked && socket.writableLength >= socket.writableHighWaterMark) {
        corked = false;
        socket.uncork();
      }
    };
    stream.on('data', onData);
    stream.once('end', () => {
      stream.removeListener('data', onData);
      uncork();
    });
    stream.once('error', uncork);
    return stream;
  };
  // Whether the session used TLS (implicit or after STARTTLS) is the connection's `secure` at the
  // end of the transaction: it is handed on with the result, or the error, for the attempt row
  // (smtp-client.ts, `tls`).
  // The reply to the end of the message ends the data-done wait: the socket's inactivity timeout
  // again, for the next message or while the connection idles in its pool.
  const originalSmtpStream = proto._actionSMTPStream as (this: PipelinedConnection, str: string, callback: unknown) => void;
  proto._actionSMTPStream = function endOfDataReply(this: PipelinedConnection, str: string, callback: unknown): void {
    if (this.options.posthornPipelining) endTransaction(this);
    return originalSmtpStream.call(this, str, callback);
  };
  // Without PIPELINING (or on the way to it) Nodemailer sends each command once the previous one
  // was answered: the last command sent is the one whose reply is awaited.
  const originalSendCommand = proto._sendCommand as (this: PipelinedConnection, str: string, logStr?: string) => void;
  proto._sendCommand = function sendCommandNotingStage(this: PipelinedConnection, str: string, logStr?: string): void {
    if (this._posthornStage) {
      if (str.startsWith('RCPT TO:')) this._posthornStage = 'rcpt';
      else if (str === 'DATA') this._posthornStage = 'data';
    }
    return originalSendCommand.call(this, str, logStr);
  };
  // Nodemailer reports every event of the socket (a timeout, a close, a socket error) as the
  // connection's ('CONN'), whatever was awaited: the stage is added, and a pipelined failure
  // already answered wins over the close or timeout that followed it.
  const originalOnError = proto._onError as (this: PipelinedConnection, err: unknown, type: string, data: unknown, command: string) => void;
  proto._onError = function onErrorWithStage(this: PipelinedConnection, err: unknown, type: string, data: unknown, command: string): void {
    if (!this.options?.posthornPipelining || this._destroyed) return originalOnError.call(this, err, type, data, command);
    if (command === 'CONN' && this._posthornStage) {
      // Replies that came in with the close and wait for their turn (Nodemailer handles one per
      // turn of the event loop) are the server's answer: handled first.
      while (this._responseQueue.length > 0 && this._posthornStage && !this._destroyed) this._processResponse();
      if (this._destroyed) return;
    }
    const answered = this._posthornFailure;
    if (answered) {
      this._posthornFailure = null;
      return originalOnError.call(this, answered, answered.code ?? type, false, answered.command ?? command);
    }
    const stage = this._posthornStage;
    if (!stage || command !== 'CONN') return originalOnError.call(this, err, type, data, command);
    const error = this._formatError(err as string, type, typeof data === 'string' ? data : false, command);
    Object.assign(error, { posthornStage: stage, posthornDataDone: this._posthornDataDone === true });
    return originalOnError.call(this, error, type, false, command);
  };
  const originalSend = proto.send as (this: PipelinedConnection & { secure?: boolean }, envelope: unknown, message: unknown, callback: EnvelopeCallback) => void;
  proto.send = function sendNotingTls(this: PipelinedConnection & { secure?: boolean }, envelope: unknown, message: unknown, callback: EnvelopeCallback): void {
    if (!this.options.posthornPipelining) return originalSend.call(this, envelope, message, callback);
    this._posthornBytes = Buffer.isBuffer(message);
    this._posthornStage = 'mail';
    this._posthornDataDone = false;
    this._posthornFailure = null;
    return originalSend.call(this, envelope, message, (err: Error | null, info?: unknown) => {
      endTransaction(this);
      const tls = Boolean(this.secure);
      if (err) Object.assign(err, { posthornTls: tls });
      else if (info && typeof info === 'object') Object.assign(info, { posthornTls: tls });
      callback(err, info);
    });
  };
  proto._setEnvelope = function pipelinedSetEnvelope(this: PipelinedConnection, envelope: NeedsOfEnvelope, callback: EnvelopeCallback): void {
    if (!this.options.posthornPipelining) return original.call(this, envelope, callback);
    const missing = missingExtension(this, envelope);
    if (missing) return callback(missing);
    const toCount = ([] as unknown[]).concat(envelope?.to ?? []).length;
    if (this.options.lmtp || toCount !== 1 || !this._supportedExtensions.includes('PIPELINING')) {
      return withSmtpUtf8(this, envelope, () => original.call(this, envelope, callback));
    }
    const socket = this._socket;
    socket.cork();
    try {
      const before = this._responseActions.length;
      let refused = false;
      withSmtpUtf8(this, envelope, () => original.call(this, envelope, (err: Error | null, info?: unknown) => {
        // Only reached synchronously (validation errors): its MAIL handler is replaced below.
        refused = true;
        callback(err, info);
      }));
      // The original either refused the envelope (nothing sent) or queued its MAIL handler and
      // wrote MAIL FROM: take the handler over and send the rest in the same write.
      if (refused || this._responseActions.length !== before + 1) return;
      pipelineRest(this, callback);
    } finally {
      socket.uncork();
    }
  };
}

/** The refusal of a message the server cannot take by what its EHLO announced, or null. */
function missingExtension(conn: PipelinedConnection, envelope: NeedsOfEnvelope): Error | null {
  if (envelope.posthornSmtpUtf8 && !conn._supportedExtensions.includes('SMTPUTF8')) {
    return conn._formatError('5.6.7 the receiving server does not support SMTPUTF8, which this message needs for its UTF-8 addresses or headers (RFC 6531)', NO_SMTPUTF8, false, 'MAIL FROM');
  }
  if (envelope.use8BitMime && !conn._supportedExtensions.includes('8BITMIME')) {
    return conn._formatError('5.6.3 the receiving server does not support 8BITMIME, which this message needs for its 8-bit body (RFC 6152)', NO_8BITMIME, false, 'MAIL FROM');
  }
  return null;
}

/**
 * Runs Nodemailer's _setEnvelope, adding SMTPUTF8 to the MAIL FROM it writes when the message
 * needs it and Nodemailer did not add it (its own test looks at the addresses only). The command is
 * written synchronously by _setEnvelope, so the connection's _sendCommand is shadowed just for it.
 */
function withSmtpUtf8(conn: PipelinedConnection, envelope: NeedsOfEnvelope, run: () => void): void {
  if (!envelope.posthornSmtpUtf8) return run();
  const sendCommand = conn._sendCommand;
  conn._sendCommand = (command: string) => {
    const params = command.slice(command.lastIndexOf('>') + 1);
    const add = command.startsWith('MAIL FROM:') && !/(?:^| )SMTPUTF8(?: |$)/.test(params);
    sendCommand.call(conn, add ? `${command} SMTPUTF8` : command);
  };
  try {
    run();
  } finally {
    delete (conn as Partial<PipelinedConnection>)._sendCommand;
  }
}

const EMPTY = Buffer.alloc(0);

/**
 * Once everything written so far has left (the message and its final dot), the reply to the
 * message's end is awaited under the data-done timeout instead of the socket's (RFC 5321
 * 4.5.3.2.6; the header comment).
 */
function awaitDataDone(conn: PipelinedConnection): void {
  const socket = conn._socket;
  const timeoutMs = conn.options.posthornDataDoneTimeout;
  socket.write(EMPTY, () => {
    if (conn._posthornStage !== 'message' || conn._destroyed || conn._socket !== socket) return;
    conn._posthornDataDone = true;
    if (timeoutMs) socket.setTimeout(timeoutMs);
  });
}

/** The transaction is answered (or over): no stage awaited, the socket's own timeout again. */
function endTransaction(conn: PipelinedConnection): void {
  conn._posthornStage = null;
  conn._posthornFailure = null;
  if (conn._posthornDataDone) {
    conn._posthornDataDone = false;
    if (conn.options.socketTimeout) conn._socket.setTimeout(conn.options.socketTimeout);
  }
}

function pipelineRest(conn: PipelinedConnection, callback: EnvelopeCallback): void {
  const envelope = conn._envelope;
  const recipient = envelope.rcptQueue.shift()!;
  conn._recipientQueue = [recipient];
  let failure: ReturnType<PipelinedConnection['_formatError']> | null = null;

  conn._responseActions[conn._responseActions.length - 1] = (str: string) => {
    conn._posthornStage = 'rcpt';
    if (str.charAt(0) !== '2') conn._posthornFailure = failure = conn._formatError('Mail command failed', 'EENVELOPE', str, 'MAIL FROM');
  };

  conn._responseActions.push((str: string) => {
    conn._posthornStage = 'data';
    conn._recipientQueue.shift();
    if (str.charAt(0) === '2') {
      envelope.accepted.push(recipient);
      return;
    }
    envelope.rejected.push(recipient);
    const err = conn._formatError('Recipient command failed', 'EENVELOPE', str, 'RCPT TO');
    err.recipient = recipient;
    envelope.rejectedErrors.push(err);
    if (!failure) {
      conn._posthornFailure = failure = conn._formatError("Can't send mail - all recipients were rejected", 'EENVELOPE', str, 'RCPT TO');
      failure.rejected = envelope.rejected;
      failure.rejectedErrors = envelope.rejectedErrors;
    }
  });
  conn._sendCommand('RCPT TO:<' + recipient + '>' + conn._getDsnRcptToArgs());

  conn._responseActions.push((str: string) => {
    const dataAccepted = /^[23]/.test(str);
    conn._posthornFailure = null;
    if (failure) {
      if (str.charAt(0) === '3') {
        // 354 despite a failed MAIL/RCPT: end the data phase at once and ignore the reply.
        conn._responseActions.push(() => {});
        conn._socket.write('.\r\n');
      }
      return callback(failure);
    }
    if (!dataAccepted) return callback(conn._formatError('Data command failed', 'EENVELOPE', str, 'DATA'));
    const info: Record<string, unknown> = { accepted: envelope.accepted, rejected: envelope.rejected };
    if (conn._ehloLines?.length) info.ehlo = conn._ehloLines;
    callback(null, info);
  });
  conn._sendCommand('DATA');
  // All three went out in one write: the first reply awaited is MAIL's.
  conn._posthornStage = 'mail';
}

const TERMINATOR_AFTER_LF = Buffer.from('.\r\n');
const TERMINATOR_AFTER_CR = Buffer.from('\n.\r\n');
const TERMINATOR = Buffer.from('\r\n.\r\n');
const DOT = Buffer.from('.');
const CRLF = Buffer.from('\r\n');
const CRLF_DOT = Buffer.from('\r\n.');

/**
 * A message's DATA as the wire carries it, in pieces to write in order: a dot doubled at the start
 * of every line (RFC 5321 4.5.2), every bare LF made CRLF, then the terminating "<CRLF>.<CRLF>"
 * (without the first CRLF when the message already ends a line). The same bytes as Nodemailer's
 * DataStream for a message written in one chunk (tested against it); the message is not copied
 * where nothing needs changing.
 */
export function smtpDataPieces(message: Buffer): Buffer[] {
  const pieces: Buffer[] = [];
  let from = 0;
  if (message.length > 0 && message[0] === 0x2e) pieces.push(DOT);
  for (let lf = message.indexOf(0x0a); lf !== -1; lf = message.indexOf(0x0a, lf + 1)) {
    const bare = lf === 0 || message[lf - 1] !== 0x0d;
    const dot = message[lf + 1] === 0x2e;
    if (!bare && !dot) continue;
    if (bare) {
      if (lf > from) pieces.push(message.subarray(from, lf));
      pieces.push(dot ? CRLF_DOT : CRLF);
    } else {
      pieces.push(message.subarray(from, lf + 1), DOT);
    }
    from = lf + 1;
  }
  if (from < message.length) pieces.push(from === 0 ? message : message.subarray(from));
  const last = message.length > 0 ? message[message.length - 1] : -1;
  pieces.push(last === 0x0a ? TERMINATOR_AFTER_LF : last === 0x0d ? TERMINATOR_AFTER_CR : TERMINATOR);
  return pieces;
}

/**
 * What Nodemailer's send() needs of a data stream when the message is a Buffer: write(), end() and
 * the byte count it reports. Everything leaves in one writev at end().
 */
class DirectData {
  outByteCount = 0;
  private readonly chunks: Buffer[] = [];
  constructor(
    private readonly socket: PipelinedConnection['_socket'],
    /** after the last piece is written */
    private readonly written: () => void,
  ) {}
  write(chunk: Buffer | string): boolean {
    this.chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
    return true;
  }
  end(): void {
    const message = this.chunks.length === 1 ? this.chunks[0] : Buffer.concat(this.chunks);
    const socket = this.socket;
    socket.cork();
    for (const piece of smtpDataPieces(message)) {
      this.outByteCount += piece.length;
      socket.write(piece);
    }
    socket.uncork();
    this.written();
  }
}

// Real SMTP servers (smtp-server) on 127.0.0.1:0, scripted per test: accept, answer 421/451/550 at
// the greeting, MAIL, RCPT or after the message, drop the connection in the middle of DATA, stall
// past the client's timeout, offer STARTTLS (smtp-server's built-in self-signed certificate), speak
// implicit TLS, require AUTH. Every message received is kept (envelope, raw bytes, Message-ID,
// TLS and auth state) so tests assert on what really arrived.
//
//   const peer = await startSmtpPeer({ rcpt: (to) => to.startsWith('gone@') ? reply(550, '5.1.1 User unknown') : null });
//   ... config.transportMap = [`example.test=127.0.0.1:${peer.port}`]
//   await peer.close();
import net from 'node:net';
import { SMTPServer, type SMTPServerAddress, type SMTPServerSession } from 'smtp-server';

export interface ScriptedReply {
  code: number;
  text: string;
}

/** A reply for a script hook: null/undefined accepts. */
export function reply(code: number, text: string): ScriptedReply {
  return { code, text };
}

export type Hook<T> = (value: T, session: SMTPServerSession) => ScriptedReply | null | undefined | 'drop' | 'stall';

export interface SmtpPeerScript {
  /** at connection: a reply code refuses the session (421/554), 'stall' never greets */
  connect?: (session: SMTPServerSession) => ScriptedReply | null | undefined | 'stall';
  mail?: Hook<string>;
  rcpt?: Hook<string>;
  /** after the message is received: 'drop' closes the connection mid-DATA (before reading it all) */
  data?: Hook<ReceivedMail>;
  /** offer STARTTLS (default true); false disables it */
  starttls?: boolean;
  /** implicit TLS on connect (smtps) */
  secure?: boolean;
  /** require AUTH with these credentials */
  auth?: { user: string; pass: string };
  /** the reply to a successful message (default "250 2.0.0 Ok: queued as <n>") */
  acceptText?: (n: number) => string;
  /** wait this long before answering the end of DATA (a slow server) */
  dataDelayMs?: number;
  /** a message accepted only once the promise returned resolves (a gate the test opens); null: at once */
  hold?: (mail: ReceivedMail) => Promise<void> | null;
  /** advertise SMTPUTF8 (default true) and 8BITMIME (default true) in the EHLO reply */
  smtputf8?: boolean;
  eightBitMime?: boolean;
  /** advertise PIPELINING (default true) */
  pipelining?: boolean;
  /** listen address (default 127.0.0.1; any 127.x.y.z works on Linux) and port (default 0) */
  host?: string;
  port?: number;
}

export interface ReceivedMail {
  from: string;
  to: string[];
  /** the parameters of MAIL FROM (smtp-server's mailFrom.args: { SMTPUTF8: true, BODY: '8BITMIME' }) */
  mailArgs: Record<string, string | boolean>;
  raw: Buffer;
  /** the Message-ID header value (with brackets), or null */
  messageId: string | null;
  /** the session was TLS (STARTTLS or implicit) */
  secure: boolean;
  /** the name the client gave in EHLO/HELO */
  clientHostname: string;
  /** the user that authenticated, if any */
  user: string | null;
}

export interface SmtpPeer {
  readonly port: number;
  readonly host: string;
  /** `domain=127.0.0.1:PORT` for config.transportMap */
  transportFor(domain: string): string;
  /** every message accepted (250) */
  readonly received: ReceivedMail[];
  /** every message whose DATA arrived, accepted or not */
  readonly attempts: ReceivedMail[];
  /** every command line received, as sent (smtp-server shows addresses with IDN domains decoded) */
  readonly commands: string[];
  /** TCP connections opened to this peer */
  readonly connectionCount: number;
  /** connections open now */
  openConnections(): number;
  /** resolves when `n` messages have been accepted, or rejects after timeoutMs */
  waitForReceived(n: number, timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

export async function startSmtpPeer(script: SmtpPeerScript = {}): Promise<SmtpPeer> {
  const received: ReceivedMail[] = [];
  const attempts: ReceivedMail[] = [];
  const commands: string[] = [];
  const sockets = new Set<net.Socket>();
  let connectionCount = 0;
  let waiters: Array<() => void> = [];
  const notify = () => {
    const w = waiters;
    waiters = [];
    for (const f of w) f();
  };
  const error = (r: ScriptedReply) => Object.assign(new Error(r.text), { responseCode: r.code });
  /** the TCP socket of a session, found by the client's port */
  const socketOf = (session: SMTPServerSession) => [...sockets].find((s) => s.remotePort === session.remotePort);

  const server = new SMTPServer({
    secure: script.secure ?? false,
    hideSTARTTLS: script.starttls === false,
    hideSMTPUTF8: script.smtputf8 === false,
    hide8BITMIME: script.eightBitMime === false,
    hidePIPELINING: script.pipelining === false,
    authOptional: !script.auth,
    allowInsecureAuth: true,
    disabledCommands: [...(script.auth ? [] : ['AUTH']), ...(script.starttls === false ? ['STARTTLS'] : [])],
    logger: false,
    // No PTR lookups of the client: tests send no DNS query anywhere but the test's own server.
    disableReverseLookup: true,
    banner: 'posthorn test peer',
    size: 50 * 1024 * 1024,
    onConnect(session, callback) {
      const r = script.connect?.(session);
      if (r === 'stall') return;
      if (r) return callback(error(r));
      callback();
    },
    onAuth(auth, _session, callback) {
      if (script.auth && auth.username === script.auth.user && auth.password === script.auth.pass) return callback(null, { user: auth.username });
      callback(Object.assign(new Error('5.7.8 Authentication credentials invalid'), { responseCode: 535 }));
    },
    onMailFrom(address: SMTPServerAddress, session, callback) {
      const r = script.mail?.(address.address, session);
      if (r === 'stall') return;
      if (r === 'drop') return void socketOf(session)?.destroy();
      if (r) return callback(error(r));
      callback();
    },
    onRcptTo(address: SMTPServerAddress, session, callback) {
      const r = script.rcpt?.(address.address, session);
      if (r === 'stall') return;
      if (r === 'drop') return void socketOf(session)?.destroy();
      if (r) return callback(error(r));
      callback();
    },
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      // 'drop' is decided before reading on: the connection dies in the middle of DATA.
      const probe: ReceivedMail = {
        from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
        to: session.envelope.rcptTo.map((r) => r.address),
        mailArgs: session.envelope.mailFrom ? argsOf(session.envelope.mailFrom) : {},
        raw: Buffer.alloc(0),
        messageId: null,
        secure: session.secure,
        clientHostname: session.hostNameAppearsAs ?? '',
        user: (session.user as string | undefined) ?? null,
      };
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.once('data', () => {
        if (script.data && script.data(probe, session) === 'drop') socketOf(session)?.destroy();
      });
      stream.on('end', () => {
        const raw = Buffer.concat(chunks);
        const mail: ReceivedMail = { ...probe, raw, messageId: headerOf(raw, 'message-id') };
        attempts.push(mail);
        const r = script.data?.(mail, session);
        if (r === 'stall' || r === 'drop') return;
        if (r) return callback(error(r));
        const accept = () => {
          received.push(mail);
          notify();
          callback(null, script.acceptText ? script.acceptText(received.length) : `2.0.0 Ok: queued as ${received.length}`);
        };
        const held = script.hold?.(mail);
        if (held) void held.then(accept);
        else if (script.dataDelayMs) setTimeout(accept, script.dataDelayMs);
        else accept();
      });
    },
  });
  // The command lines as they arrived: smtp-server logs each one ('C:', line) at debug level.
  const quiet = () => {};
  (server as unknown as { logger: unknown }).logger = {
    trace: quiet,
    info: quiet,
    warn: quiet,
    error: quiet,
    fatal: quiet,
    debug: (meta: { tnx?: string }, _format: string, line: unknown) => {
      if (meta?.tnx === 'command' && typeof line === 'string') commands.push(line);
    },
  };
  server.on('error', () => {
    /* client errors (dropped sockets) are part of the scripts */
  });
  const netServer = (server as unknown as { server: net.Server }).server;
  netServer.on('connection', (socket: net.Socket) => {
    connectionCount++;
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve, reject) => {
    netServer.once('error', reject);
    server.listen(script.port ?? 0, script.host ?? '127.0.0.1', () => resolve());
  });
  const port = (netServer.address() as net.AddressInfo).port;

  return {
    port,
    host: script.host ?? '127.0.0.1',
    transportFor: (domain) => `${domain}=${script.host ?? '127.0.0.1'}:${port}`,
    received,
    attempts,
    commands,
    get connectionCount() {
      return connectionCount;
    },
    openConnections: () => sockets.size,
    waitForReceived(n, timeoutMs = 10_000) {
      return new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`peer received ${received.length} of ${n} messages within ${timeoutMs} ms`)), timeoutMs);
        const check = () => {
          if (received.length >= n) {
            clearTimeout(timer);
            resolve();
          } else waiters.push(check);
        };
        check();
      });
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** The parameters of a MAIL FROM or RCPT TO (smtp-server types them as `false` when absent). */
function argsOf(address: SMTPServerAddress): Record<string, string | boolean> {
  return { ...((address.args || {}) as Record<string, string | boolean>) };
}

/** One header's unfolded value from raw message bytes, or null. */
export function headerOf(raw: Buffer, name: string): string | null {
  const text = raw.toString('utf8');
  const end = text.indexOf('\r\n\r\n');
  const head = (end === -1 ? text : text.slice(0, end)).replace(/\r\n[ \t]+/g, ' ');
  const m = new RegExp(`^${name}:[ \\t]*(.*)$`, 'im').exec(head);
  return m ? m[1].trim() : null;
}

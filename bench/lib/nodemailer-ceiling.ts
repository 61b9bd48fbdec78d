// Nodemailer's pooled SMTP client alone, sending pre-composed raw messages to smtp-sink: the
// ceiling of any delivery engine built on it (no database, no composition, no HTTP). Runs in its
// own process so that it has a core to itself, like the service's worker would:
//   node --import tsx bench/lib/nodemailer-ceiling.ts PORT MESSAGES CONNECTIONS IN_FLIGHT NODELAY(0|1)
// prints {"messages":N,"elapsedMs":T,"failed":F}.
import nodemailer from 'nodemailer';
import net from 'node:net';

/**
 * Nodemailer's getSocket hook: a TCP connection with Nagle's algorithm off, handed over already
 * connected (the pool only passes on `connection`).
 */
export function connectWithoutNagle(
  options: { host?: string; port: number; connectionTimeout?: number },
  callback: (error: Error | null, socketOptions?: { connection: net.Socket }) => void,
): void {
  const socket = net.connect({ host: options.host, port: options.port }).setNoDelay(true);
  const timer = setTimeout(() => socket.destroy(new Error('Connection timeout')), options.connectionTimeout ?? 30_000);
  socket.once('connect', () => {
    clearTimeout(timer);
    socket.removeAllListeners('error');
    callback(null, { connection: socket });
  });
  socket.once('error', (error) => {
    clearTimeout(timer);
    callback(error);
  });
}

export async function runNodemailerCeiling(opts: { port: number; messages: number; connections: number; inFlight: number; noDelay?: boolean }): Promise<{ elapsedMs: number; failed: number }> {
  const transport = nodemailer.createTransport({
    // Nagle's algorithm off: the final "." line is a small write after the body; with Nagle on it
    // waits for the ACK of the body, which the receiver delays (40 ms on Linux).
    ...(opts.noDelay ? { getSocket: connectWithoutNagle } : {}),
    pool: true,
    host: '127.0.0.1',
    port: opts.port,
    secure: false,
    ignoreTLS: true,
    name: 'bench.local',
    maxConnections: opts.connections,
    maxMessages: 1000,
    logger: false,
    debug: false,
  } as nodemailer.TransportOptions);
  const body = 'x'.repeat(1000);
  const raw = (n: number) =>
    Buffer.from(
      `From: sender@sender.bench.local\r\nTo: rcpt${n}@bench.local\r\nSubject: ceiling ${n}\r\nMessage-ID: <ceiling-${n}@bench.local>\r\n\r\n${body}\r\n`,
    );
  let next = 0;
  let failed = 0;
  const started = performance.now();
  const lane = async () => {
    while (next < opts.messages) {
      const n = next++;
      try {
        await transport.sendMail({ envelope: { from: 'sender@sender.bench.local', to: [`rcpt${n}@bench.local`] }, raw: raw(n) });
      } catch {
        failed++;
      }
    }
  };
  await Promise.all(Array.from({ length: opts.inFlight }, lane));
  const elapsedMs = performance.now() - started;
  transport.close();
  return { elapsedMs, failed };
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1].split('/').pop()!)) {
  const [port, messages, connections, inFlight, noDelay] = process.argv.slice(2).map(Number);
  const result = await runNodemailerCeiling({ port, messages, connections, inFlight, noDelay: noDelay === 1 });
  process.stdout.write(JSON.stringify({ messages, ...result }) + '\n');
}

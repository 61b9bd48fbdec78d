// A hand-driven SMTP client on a plain TCP socket, for what real clients never send: smuggling
// sequences, pipelined batches, connections held open. send() writes bytes as given; reply()
// resolves with the next complete reply (all its lines), or rejects after a bounded wait.
import net from 'node:net';
import tls from 'node:tls';

export interface SmtpReplyText {
  code: number;
  text: string;
}

export interface Dialog {
  send(data: string | Buffer): void;
  reply(timeoutMs?: number): Promise<SmtpReplyText>;
  /** resolves when the server closes the connection (bounded) */
  closed(timeoutMs?: number): Promise<void>;
  /** EHLO, AUTH PLAIN: ready for MAIL FROM */
  login(user: string, pass: string): Promise<void>;
  close(): void;
}

/** `secure`: implicit TLS (the test certificate is not checked). */
export async function openDialog(port: number, opts: { secure?: boolean } = {}): Promise<Dialog> {
  const socket = opts.secure ? tls.connect({ port, host: '127.0.0.1', rejectUnauthorized: false }) : net.connect(port, '127.0.0.1');
  let buffer = '';
  const replies: SmtpReplyText[] = [];
  let waiters: Array<() => void> = [];
  const notify = () => {
    const w = waiters;
    waiters = [];
    for (const f of w) f();
  };
  let ended = false;
  socket.setEncoding('utf8');
  socket.on('data', (chunk: string) => {
    buffer += chunk;
    for (;;) {
      const m = /^(?:\d{3}-[^\r\n]*\r\n)*(\d{3})(?: [^\r\n]*)?\r\n/.exec(buffer);
      if (!m) break;
      replies.push({ code: Number(m[1]), text: m[0] });
      buffer = buffer.slice(m[0].length);
    }
    notify();
  });
  const onEnd = () => {
    ended = true;
    notify();
  };
  socket.on('close', onEnd);
  socket.on('error', onEnd);
  await new Promise<void>((resolve, reject) => {
    socket.once(opts.secure ? 'secureConnect' : 'connect', () => resolve());
    socket.once('error', reject);
  });
  const wait = (done: () => boolean, what: string, timeoutMs: number) =>
    new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no ${what} within ${timeoutMs} ms (buffer: ${JSON.stringify(buffer)})`)), timeoutMs);
      const check = () => {
        if (done()) {
          clearTimeout(timer);
          resolve();
        } else waiters.push(check);
      };
      check();
    });
  const dialog: Dialog = {
    send(data) {
      socket.write(data);
    },
    async reply(timeoutMs = 10_000) {
      await wait(() => replies.length > 0 || ended, 'reply', timeoutMs);
      const next = replies.shift();
      if (!next) throw new Error('the server closed the connection');
      return next;
    },
    closed(timeoutMs = 10_000) {
      return wait(() => ended, 'close', timeoutMs);
    },
    async login(user, pass) {
      const greeting = await dialog.reply();
      if (greeting.code !== 220) throw new Error(`greeting ${greeting.text}`);
      dialog.send('EHLO client.test\r\n');
      const ehlo = await dialog.reply();
      if (ehlo.code !== 250) throw new Error(`EHLO ${ehlo.text}`);
      dialog.send(`AUTH PLAIN ${Buffer.from(`\0${user}\0${pass}`).toString('base64')}\r\n`);
      const auth = await dialog.reply();
      if (auth.code !== 235) throw new Error(`AUTH ${auth.text}`);
    },
    close() {
      socket.destroy();
    },
  };
  return dialog;
}

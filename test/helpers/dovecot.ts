// A real Dovecot IMAP server (Debian's dovecot-imapd) for a test: its own config, passwd-file users
// and maildirs in a temp directory, listening on free loopback ports, run in the foreground as a
// child process and stopped (with everything it forked) by stop(). Optional implicit TLS with a
// self-signed certificate made by openssl, and an option to hide IDLE so polling is exercised.
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { ImapFlow } from 'imapflow';

export const DOVECOT_BINARY = '/usr/sbin/dovecot';

export interface DovecotUser {
  name: string;
  password: string;
}

export interface Dovecot {
  host: string;
  /** plain IMAP (STARTTLS offered when tls is on) */
  port: number;
  /** implicit TLS port, when started with tls */
  tlsPort: number | null;
  /** PEM of the self-signed certificate (the CA a client must trust), when started with tls */
  certPem: string | null;
  dir: string;
  /** puts a message into the user's INBOX over IMAP APPEND; returns its UID */
  append(user: DovecotUser, raw: string, flags?: string[]): Promise<number>;
  /** the flags of every message in the user's INBOX, by UID */
  flags(user: DovecotUser): Promise<Map<number, Set<string>>>;
  stop(): Promise<void>;
}

export function dovecotAvailable(): boolean {
  return fs.existsSync(DOVECOT_BINARY);
}

/**
 * A suite's skip option: skipped with the reason where Dovecot is not installed, except under
 * CI=true, where .ci/run installs it and its absence must fail loudly instead of passing silently.
 */
export function dovecotSkip(): string | false {
  if (dovecotAvailable() || process.env.CI === 'true') return false;
  return 'dovecot-imapd is not installed (apt-get install dovecot-imapd)';
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

async function waitForPort(port: number, child: ChildProcess, logFile: string, opts: { greeting: boolean }, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`dovecot exited (${child.exitCode}): ${readLog(logFile)}`);
    const ok = await new Promise<boolean>((resolve) => {
      const s = net.connect(port, '127.0.0.1');
      // The plain port greets first; the TLS port waits for a handshake, so connecting is enough.
      s.once(opts.greeting ? 'data' : 'connect', () => {
        s.destroy();
        resolve(true);
      });
      s.once('error', () => resolve(false));
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`dovecot did not listen on ${port}: ${readLog(logFile)}`);
}

function readLog(file: string): string {
  try {
    return fs.readFileSync(file, 'utf8').slice(-2000);
  } catch {
    return '(no log)';
  }
}

export async function startDovecot(opts: { users: DovecotUser[]; tls?: boolean; idle?: boolean }): Promise<Dovecot> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'posthorn-dovecot-'));
  fs.chmodSync(dir, 0o755);
  // Mail processes never run as root: the maildirs belong to nobody.
  const mailUid = 65534;
  const mailGid = 65534;
  for (const sub of ['run', 'state', 'mail']) fs.mkdirSync(path.join(dir, sub));
  fs.chownSync(path.join(dir, 'mail'), mailUid, mailGid);
  const users = opts.users.map((u) => `${u.name}:{PLAIN}${u.password}:${mailUid}:${mailGid}::${path.join(dir, 'mail', u.name)}::`).join('\n');
  fs.writeFileSync(path.join(dir, 'users'), users + '\n', { mode: 0o644 });
  const port = await freePort();
  const tlsPort = opts.tls ? await freePort() : null;
  let certPem: string | null = null;
  if (opts.tls) {
    execFileSync('openssl', [
      'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', '/CN=127.0.0.1',
      '-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', path.join(dir, 'key.pem'), '-out', path.join(dir, 'cert.pem'),
    ], { stdio: 'ignore' });
    certPem = fs.readFileSync(path.join(dir, 'cert.pem'), 'utf8');
  }
  const logFile = path.join(dir, 'dovecot.log');
  const conf = [
    `base_dir = ${dir}/run`,
    `state_dir = ${dir}/state`,
    `log_path = ${logFile}`,
    'protocols = imap',
    'listen = 127.0.0.1',
    opts.tls ? `ssl = yes\nssl_cert = <${dir}/cert.pem\nssl_key = <${dir}/key.pem` : 'ssl = no',
    'disable_plaintext_auth = no',
    'auth_mechanisms = plain login',
    'first_valid_uid = 1',
    // Failed logins are answered at once (the default delays them to slow down guessing).
    'auth_failure_delay = 0',
    `passdb {\n  driver = passwd-file\n  args = scheme=PLAIN username_format=%u ${dir}/users\n}`,
    `userdb {\n  driver = passwd-file\n  args = username_format=%u ${dir}/users\n}`,
    'mail_location = maildir:~/Maildir',
    opts.idle === false
      ? 'protocol imap {\n  imap_capability = IMAP4rev1 LITERAL+ SASL-IR LOGIN-REFERRALS ID ENABLE SORT UIDPLUS NAMESPACE UNSELECT CHILDREN\n}'
      : '',
    `service imap-login {\n  chroot =\n  inet_listener imap {\n    address = 127.0.0.1\n    port = ${port}\n  }\n  inet_listener imaps {\n    address = 127.0.0.1\n    port = ${tlsPort ?? 0}\n  }\n}`,
    'service anvil {\n  chroot =\n}',
    'service stats {\n  unix_listener stats-writer {\n    mode = 0666\n  }\n}',
  ].join('\n');
  fs.writeFileSync(path.join(dir, 'dovecot.conf'), conf + '\n');
  const child = spawn(DOVECOT_BINARY, ['-F', '-c', path.join(dir, 'dovecot.conf')], { stdio: 'ignore' });
  try {
    await waitForPort(port, child, logFile, { greeting: true });
    if (tlsPort) await waitForPort(tlsPort, child, logFile, { greeting: false });
  } catch (error) {
    child.kill('SIGKILL');
    fs.rmSync(dir, { recursive: true, force: true });
    throw error;
  }

  async function client(user: DovecotUser): Promise<ImapFlow> {
    const c = new ImapFlow({ host: '127.0.0.1', port, secure: false, doSTARTTLS: false, auth: { user: user.name, pass: user.password }, logger: false, tls: { rejectUnauthorized: false } });
    await c.connect();
    return c;
  }

  return {
    host: '127.0.0.1',
    port,
    tlsPort,
    certPem,
    dir,
    async append(user, raw, flags = []) {
      const c = await client(user);
      try {
        const res = await c.append('INBOX', raw, flags);
        if (!res || !res.uid) throw new Error('APPEND did not return a UID');
        return res.uid;
      } finally {
        await c.logout();
      }
    },
    async flags(user) {
      const c = await client(user);
      const out = new Map<number, Set<string>>();
      try {
        await c.mailboxOpen('INBOX', { readOnly: true });
        for await (const msg of c.fetch('1:*', { uid: true, flags: true })) out.set(msg.uid, new Set(msg.flags ?? []));
      } catch (error) {
        // An empty mailbox: no messages to fetch.
        if (!/Invalid messageset|No messages|BAD/.test(String(error))) throw error;
      } finally {
        await c.logout();
      }
      return out;
    },
    async stop() {
      if (child.exitCode === null) {
        const exited = new Promise((r) => child.once('exit', r));
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
        await exited;
        clearTimeout(timer);
      }
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

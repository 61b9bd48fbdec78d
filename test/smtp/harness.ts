// A Posthorn with SMTP submission for the tests of test/smtp: the real app on a fresh database,
// STARTTLS and implicit-TLS listeners on free loopback ports with a self-signed certificate made by
// openssl, delivery running into a real smtp-server sink (example.test and exämple.test route to
// it), and a seeded account and project.
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import nodemailer from 'nodemailer';
import type { Logger } from 'pino';
import type { Config } from '../../src/config.ts';
import type { SubmissionListener } from '../../src/smtp/submission.ts';
import { startTestApp, type Seed, type TestApp } from '../helpers/app.ts';
import { startSmtpPeer, type SmtpPeer } from '../helpers/smtp-peers.ts';

export interface Certificate {
  dir: string;
  certFile: string;
  keyFile: string;
  certPem: string;
}

/** A self-signed certificate for 127.0.0.1 and localhost (openssl, two days). */
export function makeCertificate(): Certificate {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'posthorn-smtp-cert-'));
  const certFile = path.join(dir, 'cert.pem');
  const keyFile = path.join(dir, 'key.pem');
  execFileSync(
    'openssl',
    ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', '/CN=localhost', '-addext', 'subjectAltName=IP:127.0.0.1,DNS:localhost', '-keyout', keyFile, '-out', certFile],
    { stdio: 'ignore' },
  );
  return { dir, certFile, keyFile, certPem: fs.readFileSync(certFile, 'utf8') };
}

export interface SubmissionHarness {
  t: TestApp;
  seed: Seed;
  sink: SmtpPeer;
  cert: Certificate;
  listener: SubmissionListener;
  /** STARTTLS (or plaintext) port */
  port: number;
  /** implicit TLS port (null when not configured) */
  tlsPort: number | null;
  /** messages rows of the project, newest last */
  messages(): Promise<Array<{ id: number; uid: string; subject: string | null; from_address: string | null; recipient_count: number; payload: string }>>;
  transmissions(messageId: number): Promise<Array<{ recipient: string; status: string; result_code: string | null }>>;
  /**
   * A Nodemailer client of the listener: STARTTLS required and the harness's certificate trusted,
   * the seeded project's credentials unless others are given; `secure` for the implicit-TLS port.
   */
  client(opts?: { secure?: boolean; user?: string; pass?: string; ignoreTLS?: boolean; pool?: boolean }): nodemailer.Transporter;
  close(): Promise<void>;
}

export async function startSubmissionHarness(
  opts: { config?: Partial<Config>; delivery?: boolean; tls?: boolean; log?: Logger } = {},
): Promise<SubmissionHarness> {
  const sink = await startSmtpPeer({ starttls: false });
  const cert = makeCertificate();
  const tls = opts.tls ?? true;
  const t = await startTestApp({
    config: {
      submissionPort: 0,
      submissionTlsPort: tls ? 0 : null,
      submissionHost: '127.0.0.1',
      submissionTlsCert: tls ? cert.certFile : null,
      submissionTlsKey: tls ? cert.keyFile : null,
      workers: opts.delivery === false ? 0 : 8,
      pollMs: 50,
      transportMap: [sink.transportFor('example.test'), sink.transportFor('xn--exmple-cua.test')],
      connectTimeoutMs: 5000,
      greetingTimeoutMs: 5000,
      socketTimeoutMs: 10_000,
      ...opts.config,
    },
    ...(opts.log ? { log: opts.log } : {}),
  });
  const seed = await t.seed();
  const listener = t.app.background.find((s) => s.name === 'smtp-submission') as SubmissionListener | undefined;
  if (!listener) throw new Error('the submission listener did not start');
  const { port, tlsPort } = listener.addresses();
  const db = t.app.services.store.db;
  return {
    t,
    seed,
    sink,
    cert,
    listener,
    port: port as number,
    tlsPort,
    async messages() {
      return (await db
        .selectFrom('messages')
        .select(['id', 'uid', 'subject', 'from_address', 'recipient_count', 'payload'])
        .where('project_id', '=', seed.projectId)
        .orderBy('id')
        .execute()) as any;
    },
    async transmissions(messageId) {
      return (await db
        .selectFrom('transmissions')
        .select(['recipient', 'status', 'result_code'])
        .where('message_id', '=', messageId)
        .orderBy('id')
        .execute()) as any;
    },
    client(opts = {}) {
      const secure = opts.secure ?? false;
      return nodemailer.createTransport({
        host: '127.0.0.1',
        port: secure ? (tlsPort as number) : (port as number),
        secure,
        requireTLS: !secure && !opts.ignoreTLS,
        ignoreTLS: opts.ignoreTLS ?? false,
        tls: { ca: cert.certPem, servername: 'localhost' },
        auth: { user: opts.user ?? seed.projectUid, pass: opts.pass ?? seed.projectKey },
        connectionTimeout: 10_000,
        greetingTimeout: 10_000,
        socketTimeout: 30_000,
        ...(opts.pool ? { pool: true, maxConnections: 1 } : {}),
      });
    },
    async close() {
      await t.close();
      await sink.close();
      fs.rmSync(cert.dir, { recursive: true, force: true });
    },
  };
}

/** A MIME message as an SMTP client would send it (CRLF line ends). */
export function mimeMessage(headers: Record<string, string>, body: string): string {
  return `${Object.entries(headers)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('')}\r\n${body}`;
}

/** Runs a command (a real client: python3, swaks; bounded: 60 s), resolving with its exit code and output. */
export function run(command: string, args: string[], input?: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c) => (stdout += c));
    child.stderr.on('data', (c) => (stderr += c));
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
    child.stdin.end(input ?? '');
  });
}

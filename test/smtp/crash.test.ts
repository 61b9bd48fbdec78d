// Nothing accepted over SMTP is lost: `posthorn serve` (a real child process) takes messages over
// SMTP submission from several Nodemailer connections and is killed with SIGKILL right after a 250,
// while more are in flight. Restarted on the same database with delivery on, every message that got
// its 250 arrives at the sink (counted by Message-ID).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import nodemailer from 'nodemailer';
import { freshDatabaseUrl } from '../helpers/databases.ts';
import { initInstallation, startPosthorn, stopAll, type PosthornProcess } from '../helpers/processes.ts';
import { startSmtpPeer, type SmtpPeer } from '../helpers/smtp-peers.ts';

const TOTAL = 400;
const KILL_AFTER = 120;
const CLIENTS = 8;

describe('a SIGKILL right after a 250 over SMTP loses nothing', () => {
  let sink: SmtpPeer;
  let dataDir: string;
  let databaseUrl: string | null;
  let projectKey: string;
  let projectUid: string;

  before(async () => {
    sink = await startSmtpPeer({ starttls: false });
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'posthorn-smtp-crash-'));
    databaseUrl = await freshDatabaseUrl();
    const project = initInstallation(commonArgs(), { DATABASE_URL: '' });
    projectKey = project.api_key;
    projectUid = project.uid;
  });
  after(async () => {
    await stopAll();
    await sink?.close();
    if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
  });

  function commonArgs(): string[] {
    return ['--data', dataDir, '--secret-key', 'smtp-crash-secret', '--mailer-host', 'crash.posthorn.test', ...(databaseUrl ? ['--database-url', databaseUrl] : [])];
  }

  function serve(name: string, workers: number): PosthornProcess {
    return startPosthorn(
      name,
      [
        'serve', ...commonArgs(),
        '--port', '0',
        '--submission-port', '0', '--submission-host', '127.0.0.1',
        '--workers', String(workers), '--poll-ms', '100',
        '--transport-map', `example.test=127.0.0.1:${sink.port}`,
        '--dns-server', '127.0.0.1:9',
        '--log-level', 'info',
      ],
      { DATABASE_URL: '', LOG_LEVEL: '' },
    );
  }

  async function submissionPort(proc: PosthornProcess): Promise<number> {
    const line = await proc.waitForLog((l) => l.msg === 'SMTP submission listening', 'the submission listener');
    return line.port as number;
  }

  it('delivers every message that got its 250 after a restart', async () => {
    // No delivery in the first process: the kill then finds every accepted message still queued.
    const first = serve('first', 0);
    const port = await submissionPort(first);
    const accepted = new Set<string>();
    let killed = false;
    let next = 0;
    const client = async () => {
      const transport = nodemailer.createTransport({ host: '127.0.0.1', port, secure: false, ignoreTLS: true, auth: { user: projectUid, pass: projectKey } });
      try {
        while (next < TOTAL && !killed) {
          const i = next++;
          const messageId = `<smtp-crash-${i}@client.test>`;
          try {
            await transport.sendMail({ from: 'load@example.test', to: `r${i}@example.test`, subject: `load ${i}`, text: `message ${i}`, messageId });
            accepted.add(messageId);
            if (accepted.size === KILL_AFTER && !killed) {
              // Right after this 250, with the other clients' messages in flight.
              killed = true;
              first.child.kill('SIGKILL');
            }
          } catch (error) {
            if (!killed) throw error;
            // The process died under this message: it was not answered 250, so it may be lost.
          }
        }
      } finally {
        transport.close();
      }
    };
    await Promise.all(Array.from({ length: CLIENTS }, client));
    await first.exited;
    assert.ok(killed, 'the process was killed in the middle of the load');
    assert.ok(accepted.size >= KILL_AFTER);

    const second = serve('second', 8);
    await second.waitUntilRunning();
    const deadline = Date.now() + 120_000;
    for (;;) {
      const arrived = new Set(sink.received.map((m) => m.messageId));
      const missing = [...accepted].filter((id) => !arrived.has(id));
      if (missing.length === 0) break;
      if (Date.now() > deadline) assert.fail(`${missing.length} of ${accepted.size} messages answered 250 never arrived, e.g. ${missing.slice(0, 3).join(', ')}`);
      await sink.waitForReceived(sink.received.length + 1, 2000).catch(() => undefined);
    }
    await second.stop();
    console.log(`# smtp crash test: ${accepted.size} answered 250 before or at the kill, all delivered after the restart (${sink.received.length} received)`);
  });
});

// A graceful stop (SIGTERM) of `posthorn serve` while a delivery waits for the reply to the end of
// its message (docs/delivery.md, "Workers, leases and restarts"): the process exits once the grace
// for deliveries in flight is over, its SMTP connection closed, not when that connection would have
// timed out; the transmission is given back unrecorded, said so in the log, and delivered by the
// next process.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { openStore, type Store } from '../../src/storage/store.ts';
import { freshDatabaseUrl, releaseDatabaseUrl, testDatabase } from '../helpers/databases.ts';
import { initInstallation, startPosthorn, stopAll, type PosthornProcess } from '../helpers/processes.ts';
import { startSmtpPeer, type SmtpPeer } from '../helpers/smtp-peers.ts';
import { until } from '../helpers/wait.ts';

const RECIPIENT = 'slow@sink.test';
/** far above the 10 s grace, far below the socket timeout (120 s) a stuck stop waited for */
const EXIT_BOUND_MS = 60_000;

describe(`SIGTERM while a delivery waits for the reply to its message (${testDatabase()}, real processes)`, { timeout: 240_000 }, () => {
  /** the sink never answers the end of the message while this is true */
  let stall = true;
  let sink: SmtpPeer;
  let dataDir: string;
  let databaseUrl: string | null;
  let apiKey: string;
  let store: Store;

  before(async () => {
    sink = await startSmtpPeer({ starttls: false, data: () => (stall ? 'stall' : null) });
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'posthorn-stop-'));
    databaseUrl = await freshDatabaseUrl();
    const project = initInstallation(commonArgs(), { DATABASE_URL: '' });
    apiKey = project.api_key;
    store = await openStore({ databaseUrl, data: dataDir });
  });
  after(async () => {
    await stopAll();
    await store?.close();
    await sink?.close();
    await releaseDatabaseUrl(databaseUrl);
    if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
  });

  function commonArgs(): string[] {
    return ['--data', dataDir, '--secret-key', 'stop-test-secret', '--mailer-host', 'stop.posthorn.test', ...(databaseUrl ? ['--database-url', databaseUrl] : [])];
  }

  function serve(): PosthornProcess {
    return startPosthorn(
      'serve',
      ['serve', ...commonArgs(), '--port', '0', '--processes', '1', '--workers', '4', '--poll-ms', '200', '--transport-map', `sink.test=127.0.0.1:${sink.port}`, '--dns-server', '127.0.0.1:9', '--log-level', 'info'],
      { DATABASE_URL: '', LOG_LEVEL: '', POSTHORN_OPS_PORT: '0' },
    );
  }

  const transmission = () => store.db.selectFrom('transmissions').selectAll().where('recipient', '=', RECIPIENT).executeTakeFirstOrThrow();

  it('exits after the grace, gives the transmission back unrecorded, and the next process delivers it', async () => {
    const first = serve();
    const running = await first.waitUntilRunning(120_000);
    const res = await fetch(`${running.url}/v.1.1/send_message`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ api_key: apiKey, arguments: { recipients: RECIPIENT, headers: { from: 'sender@posthorn.test', subject: 'slow' }, content: { 'text/plain': 'slow' } } }),
    });
    assert.equal(res.status, 200, await res.text());
    // The whole message is at the sink, which never answers its end.
    await until('the message at the sink', () => sink.attempts.length > 0, 60_000);

    first.child.kill('SIGTERM');
    let timer: NodeJS.Timeout | undefined;
    const exit = await Promise.race([
      first.exited,
      new Promise<'still running'>((resolve) => (timer = setTimeout(() => resolve('still running'), EXIT_BOUND_MS))),
    ]);
    clearTimeout(timer);
    assert.deepEqual(exit, { code: 0, signal: null }, `the process exits once the grace is over\n${first.tail()}`);
    const t = await transmission();
    const released = first.lines.find((l) => typeof l.msg === 'string' && l.msg.startsWith('stopped with work in flight; releasing it'));
    assert.ok(released, `the release says so\n${first.tail()}`);
    assert.deepEqual(released.ids, [t.id]);
    assert.deepEqual([t.status, t.locked_by, t.attempts], ['queued', null, 0], 'given back, no attempt recorded');
    await until('its SMTP connection closed at the sink', () => sink.openConnections() === 0, 10_000);

    stall = false;
    const second = serve();
    await second.waitUntilRunning(120_000);
    const done = await until('delivered by the next process', async () => {
      const row = await transmission();
      return row.status === 'completed' && row;
    }, 60_000, 100);
    assert.equal(done.attempts, 1);
    assert.equal(sink.received.length, 1);
    assert.deepEqual(await second.stop(), { code: 0, signal: null });
  });
});

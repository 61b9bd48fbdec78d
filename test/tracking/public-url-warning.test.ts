// Tracking on while --public-url names this machine alone (docs/tracking.md, "The public URL"):
// the links and the open pixel would point where no reader's mail client goes. A process with the
// worker role (the one that writes the links) logs one warning at start saying so and what to set;
// the dashboard's overview says it on the card of each project that tracks. Neither says anything
// when no project tracks, with a public URL readers reach, or with --tracking false.
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import { startApp } from '../../src/app.ts';
import type { Config } from '../../src/config.ts';
import { isLocalOnlyUrl } from '../../src/domain/public-url.ts';
import { startTestApp, type Seed, type TestApp } from '../helpers/app.ts';
import { signedInClient } from '../dashboard/session-client.ts';
import { testDatabase } from '../helpers/databases.ts';

const WARNING = /^tracking links and the open pixel point at (\S+), which readers' mail clients cannot reach, so no open or click is recorded: set --public-url \(POSTHORN_PUBLIC_URL\)/;

describe(`tracking links readers cannot reach (${testDatabase()})`, () => {
  let t: TestApp;
  let seed: Seed;

  before(async () => {
    // The API alone: the starts below are the processes with the worker role.
    t = await startTestApp({ background: false });
    seed = await t.seed('tracked');
  });
  after(() => t.close());

  const setTracking = async (projectUid: string, tracking: boolean) => {
    const r = await t.call('update_project', { api_key: seed.accountKey, arguments: { uid: projectUid, settings: { tracking } } });
    assert.equal(r.status, 200, JSON.stringify(r.body));
  };

  /** Starts another process on the same database and returns the warnings it logged while starting. */
  const warningsAtStart = async (overrides: Partial<Config>) => {
    const lines: Array<Record<string, unknown>> = [];
    const log = pino({ level: 'info' }, new Writable({ write: (chunk, _e, cb) => (lines.push(JSON.parse(String(chunk))), cb()) }));
    const app = await startApp(Object.freeze({ ...t.app.services.config, ...overrides }), { log });
    await app.close();
    return lines.filter((l) => l.level === 40 && WARNING.test(String(l.msg)));
  };

  it('knows which URLs no reader reaches', () => {
    for (const url of ['http://127.0.0.1:8080', 'http://127.1.2.3', 'http://localhost:8080', 'http://[::1]:8080', 'http://0.0.0.0:8080', 'http://[::]:8080']) assert.equal(isLocalOnlyUrl(url), true, url);
    for (const url of ['https://track.example.com', 'http://192.0.2.10:8080', 'http://10.0.0.5', 'https://127.example.com']) assert.equal(isLocalOnlyUrl(url), false, url);
  });

  it('a process with the worker role warns once at start while a project tracks, naming the URL and --public-url', async () => {
    assert.deepEqual(await warningsAtStart({ role: 'all', publicUrl: 'http://127.0.0.1:8080' }), [], 'no project tracks yet');
    await setTracking(seed.projectUid, true);
    const warned = await warningsAtStart({ role: 'all', publicUrl: 'http://127.0.0.1:8080' });
    assert.equal(warned.length, 1, JSON.stringify(warned));
    assert.equal(WARNING.exec(String(warned[0].msg))![1], 'http://127.0.0.1:8080');
    assert.equal(warned[0].public_url, 'http://127.0.0.1:8080');
    assert.equal((await warningsAtStart({ role: 'worker', opsPort: 0, publicUrl: 'http://0.0.0.0:8080' })).length, 1, 'a container\'s default');
    // Nothing to say: a URL readers reach, tracking off for every project, or an API process (a
    // serve with several processes says it once, from its delivery process).
    assert.deepEqual(await warningsAtStart({ role: 'all', publicUrl: 'https://track.example.test' }), []);
    assert.deepEqual(await warningsAtStart({ role: 'all', publicUrl: 'http://127.0.0.1:8080', tracking: false }), []);
    assert.deepEqual(await warningsAtStart({ role: 'api', publicUrl: 'http://127.0.0.1:8080' }), []);
    await setTracking(seed.projectUid, false);
    assert.deepEqual(await warningsAtStart({ role: 'all', publicUrl: 'http://127.0.0.1:8080' }), []);
  });

  it('the dashboard overview says it on the card of a project that tracks', async () => {
    const created = await t.call('create_project', { api_key: seed.accountKey, arguments: { name: 'Untracked', uid: 'untracked' } });
    assert.equal(created.status, 200, JSON.stringify(created.body));
    await setTracking(seed.projectUid, true);
    const { client } = await signedInClient(t, seed.accountUid);
    const overview = await client.get('/');
    assert.equal(overview.status, 200);
    const cards = overview.text.split('<section class="card project-overview"').slice(1);
    assert.equal(cards.length, 2);
    const [tracked, untracked] = cards;
    assert.match(tracked, /<p class="notice warn" role="status"><bdi>Tracking: tracking links and the open pixel point at http:\/\/127\.0\.0\.1:0, which readers&#39; mail clients cannot reach, so no open or click is recorded: set --public-url \(POSTHORN_PUBLIC_URL\)/);
    assert.doesNotMatch(untracked, /notice warn/);
    const page = await client.get(`/projects/${encodeURIComponent(seed.projectUid)}`);
    assert.match(page.text, /notice warn[^>]*><bdi>Tracking: tracking links/);
    assert.doesNotMatch((await client.get('/projects/untracked')).text, /notice warn/);
    await setTracking(seed.projectUid, false);
    assert.doesNotMatch((await client.get('/')).text, /notice warn/);
  });
});

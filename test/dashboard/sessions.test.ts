// Sessions end: SESSION_TTL_MS after sign-in (by the injected clock, no sleeping), and the
// throttle's window passes; a used form token is forgotten once it could no longer be sent. Both
// databases, through the real server.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ManualClock } from '../../src/domain/clock.ts';
import { SESSION_TTL_MS, SIGN_IN_LIMITS, createUser } from '../../src/operations/users.ts';
import { startTestApp, type Seed, type TestApp } from '../helpers/app.ts';
import { SessionClient } from './session-client.ts';

describe('dashboard sessions over time', () => {
  const clock = new ManualClock(Date.UTC(2026, 5, 1, 12));
  let t: TestApp;
  let seed: Seed;

  before(async () => {
    t = await startTestApp({ clock });
    seed = await t.seed('sessions');
  });
  after(() => t.close());

  it('a session expires SESSION_TTL_MS after sign-in, and its rows are removed at the next sign-in', async () => {
    const { password } = await createUser(t.app.services, { accountUid: seed.accountUid, email: 'ttl@example.test' });
    const client = new SessionClient(t.url);
    assert.equal((await client.signIn('ttl@example.test', password)).status, 303);
    clock.advance(SESSION_TTL_MS - 1);
    assert.equal((await client.get('/')).status, 200);
    clock.advance(1);
    const expired = await client.get('/');
    assert.equal(expired.status, 303);
    assert.equal(expired.headers.get('location'), '/login');
    assert.equal((await new SessionClient(t.url).signIn('ttl@example.test', password)).status, 303);
    const rows = await t.app.services.store.db.selectFrom('dashboard_sessions').select('expires_at').execute();
    assert.equal(rows.length, 1, 'the expired session was removed');
  });

  it('keeps a used form token only as long as it could be sent: older rows go at the next submission', async () => {
    const { password } = await createUser(t.app.services, { accountUid: seed.accountUid, email: 'forms@example.test' });
    const client = new SessionClient(t.url);
    assert.equal((await client.signIn('forms@example.test', password)).status, 303);
    const page = `/suppressions?project=${seed.projectUid}`;
    await client.get(page);
    assert.equal((await client.post('/suppressions/add', { project: seed.projectUid, addresses: 'first@example.test' })).status, 303);
    const uses = () => t.app.services.store.db.selectFrom('dashboard_form_uses').select('expires_at').execute();
    const [first] = await uses();
    assert.equal(Number(first.expires_at), clock.now() + SESSION_TTL_MS);
    clock.advance(SESSION_TTL_MS);
    assert.equal((await client.signIn('forms@example.test', password)).status, 303);
    await client.get(page);
    assert.equal((await client.post('/suppressions/add', { project: seed.projectUid, addresses: 'second@example.test' })).status, 303);
    assert.deepEqual((await uses()).map((u) => Number(u.expires_at)), [clock.now() + SESSION_TTL_MS], 'the first use is gone');
  });

  it('a throttled email may sign in again once the window has passed', async () => {
    const { password } = await createUser(t.app.services, { accountUid: seed.accountUid, email: 'slow@example.test' });
    const client = new SessionClient(t.url);
    for (let i = 0; i < SIGN_IN_LIMITS.perEmail; i++) assert.equal((await client.signIn('slow@example.test', 'wrong-password!')).status, 401);
    assert.equal((await client.signIn('slow@example.test', password)).status, 429);
    clock.advance(SIGN_IN_LIMITS.windowMs);
    assert.equal((await client.signIn('slow@example.test', password)).status, 303);
  });

  it('failures counted by one process count in every other on the database, and outlive a restart; no email or address is stored in clear', async () => {
    const { password } = await createUser(t.app.services, { accountUid: seed.accountUid, email: 'shared@example.test' });
    const onSameDatabase = () => startTestApp({ clock, config: { data: t.dataDir, databaseUrl: t.app.services.config.databaseUrl } });
    const other = await onSameDatabase();
    try {
      for (let i = 0; i < SIGN_IN_LIMITS.perEmail; i++) {
        const through = i % 2 === 0 ? t.url : other.url;
        assert.equal((await new SessionClient(through).signIn('shared@example.test', 'wrong-password!')).status, 401);
      }
      assert.equal((await new SessionClient(t.url).signIn('shared@example.test', password)).status, 429);
      assert.equal((await new SessionClient(other.url).signIn('shared@example.test', password)).status, 429);
    } finally {
      await other.close();
    }
    const restarted = await onSameDatabase();
    try {
      assert.equal((await new SessionClient(restarted.url).signIn('shared@example.test', password)).status, 429);
    } finally {
      await restarted.close();
    }
    const rows = await t.app.services.store.db.selectFrom('sign_in_failures').select('key').execute();
    assert.ok(rows.length >= 2);
    for (const { key } of rows) {
      assert.match(key, /^[ae]:[0-9a-f]{64}$/);
      assert.ok(!key.includes('shared@example.test') && !key.includes('127.0.0.1'));
    }
  });
});

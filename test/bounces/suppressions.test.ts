// The suppression rules (storage/suppressions.ts, against the real database) and the add/remove
// methods over the real HTTP API.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Kysely } from 'kysely';
import { ManualClock } from '../../src/domain/clock.ts';
import { SOFT_BOUNCE_BLOCK_MS, SOFT_BOUNCE_WINDOW_MS } from '../../src/domain/suppression-policy.ts';
import { findActiveSuppression, recordBounce, recordComplaint, type BounceRecord } from '../../src/storage/suppressions.ts';
import { up as migrateSuppressionKeys } from '../../src/storage/migrations/240-suppression-address-keys.ts';
import { startTestApp, type Seed, type TestApp } from '../helpers/app.ts';

describe('suppression list', () => {
  let t: TestApp;
  let seed: Seed;
  const clock = new ManualClock(Date.UTC(2026, 10, 22, 5, 0, 0));

  before(async () => {
    t = await startTestApp({ background: false, clock });
    seed = await t.seed();
  });
  after(() => t.close());

  const record = (b: Omit<BounceRecord, 'projectId' | 'now' | 'message'> & { message?: string }) =>
    t.app.services.store.write((trx) => recordBounce(trx, { projectId: seed.projectId, now: clock.now(), message: b.message ?? 'x', ...b }));
  const active = (address: string, at = clock.now()) => findActiveSuppression(t.app.services.store.db, seed.projectId, address, at);
  const call = (method: string, args: unknown, key = seed.projectKey) => t.call(method, { api_key: key, arguments: args });

  it('a hard bounce rejects the address until it is removed', async () => {
    await record({ address: 'hard@Example.com', kind: 'hard', message: '550 5.1.1 no such user' });
    const entry = await active('hard@EXAMPLE.COM', clock.now() + 10 * 365 * 86_400_000);
    assert.equal(entry?.status, 'rejected');
    assert.equal(entry?.suppression_state, 'hard_bounce');
    assert.equal(entry?.blocked_until, null);
    assert.equal(entry?.message, '550 5.1.1 no such user');
    // Scoped to the project.
    const other = await t.seed('other');
    assert.equal(await findActiveSuppression(t.app.services.store.db, other.projectId, 'hard@example.com', clock.now()), undefined);
  });

  it('soft bounces count within the window, once per transmission, and block for a day', async () => {
    const a = 'soft@example.com';
    await record({ address: a, kind: 'soft', transmissionId: 1 });
    await record({ address: a, kind: 'soft', transmissionId: 1 }); // a retry of the same transmission
    await record({ address: a, kind: 'soft', transmissionId: 2 });
    assert.equal(await active(a), undefined, 'two distinct soft failures do not suppress');

    // The window passes: counting starts again.
    clock.advance(SOFT_BOUNCE_WINDOW_MS + 1);
    await record({ address: a, kind: 'soft', transmissionId: 3 });
    await record({ address: a, kind: 'soft', transmissionId: 4 });
    assert.equal(await active(a), undefined, 'the old failures fell out of the window');
    await record({ address: a, kind: 'soft', transmissionId: 5, message: '452 mailbox full' });
    const warning = await active(a);
    assert.equal(warning?.status, 'warning');
    assert.equal(warning?.suppression_state, 'soft_bounce');
    assert.equal(warning?.blocked_until, clock.now() + SOFT_BOUNCE_BLOCK_MS);
    assert.equal(warning?.soft_failures, 3);
    assert.equal(warning?.message, '452 mailbox full');

    // Blocks until blocked_until, not after.
    assert.ok(await active(a, clock.now() + SOFT_BOUNCE_BLOCK_MS - 1));
    assert.equal(await active(a, clock.now() + SOFT_BOUNCE_BLOCK_MS), undefined);

    // Three more later renew the warning.
    clock.advance(SOFT_BOUNCE_BLOCK_MS + 1);
    for (const id of [6, 7, 8]) await record({ address: a, kind: 'soft', transmissionId: id });
    const renewed = await active(a);
    assert.equal(renewed?.blocked_until, clock.now() + SOFT_BOUNCE_BLOCK_MS);
    assert.equal(renewed?.soft_failures, 6);

    // A hard bounce upgrades it; soft ones change nothing afterwards.
    await record({ address: a, kind: 'hard' });
    for (const id of [9, 10, 11]) await record({ address: a, kind: 'soft', transmissionId: id });
    const hard = await active(a, clock.now() + 365 * 86_400_000);
    assert.equal(hard?.status, 'rejected');
    assert.equal(hard?.suppression_state, 'hard_bounce');
    assert.equal(hard?.blocked_until, null);
  });

  it('add_to_suppression_list adds manual entries and keeps hard bounces as they are', async () => {
    const r = await call('add_to_suppression_list', { addresses: ['Manual@Example.COM', 'hard@example.com', 'Ann <ann@example.com>'], message: 'asked to stop' });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    const list = r.body.data.suppression_list;
    assert.deepEqual(list['Manual@example.com'], { status: 'rejected', suppression_state: 'manual', blocked_until: null, message: 'asked to stop' });
    assert.deepEqual(list['ann@example.com'].suppression_state, 'manual');
    assert.equal(list['hard@example.com'].suppression_state, 'hard_bounce');
    assert.ok(await active('manual@example.com'.replace('manual', 'Manual')));

    const one = await call('add_to_suppression_list', { address: 'single@example.com' });
    assert.equal(one.body.data.suppression_list['single@example.com'].message, 'Added manually');

    // The reports engineer's listing shows them.
    const shown = await call('get_suppression_list', {});
    assert.equal(shown.status, 200, JSON.stringify(shown.body));
    assert.ok('single@example.com' in shown.body.data, JSON.stringify(shown.body.data));
  });

  it('an internationalised domain is one address in either form: a bounce under its ASCII form suppresses the form written', async () => {
    // A DSN names the recipient as the remote server saw it: the domain in its ASCII (A-label) form.
    await record({ address: 'carl@xn--bcher-kva.example', kind: 'hard' });
    assert.ok(await active('carl@bücher.example'));
    assert.ok(await active('carl@XN--BCHER-KVA.example'));
    const manual = await call('add_to_suppression_list', { address: 'dora@BÜCHER.example' });
    assert.equal(manual.status, 200, JSON.stringify(manual.body));
    assert.ok('dora@bücher.example' in manual.body.data.suppression_list, JSON.stringify(manual.body.data));
    assert.ok(await active('dora@xn--bcher-kva.example'));
    const removed = await call('remove_from_suppression_list', { addresses: ['carl@bücher.example', 'dora@xn--bcher-kva.example'] });
    assert.equal(removed.status, 200, JSON.stringify(removed.body));
    assert.equal(await active('carl@xn--bcher-kva.example'), undefined);
    assert.equal(await active('dora@bücher.example'), undefined);
  });

  it('remove_from_suppression_list removes any kind of entry and says what was not there', async () => {
    const r = await call('remove_from_suppression_list', { addresses: ['manual@EXAMPLE.com'.replace('manual', 'Manual'), 'hard@example.com', 'never@example.com'] });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.deepEqual(r.body.data, { removed: ['Manual@example.com', 'hard@example.com'], not_found: ['never@example.com'] });
    assert.equal(await active('hard@example.com'), undefined);
    assert.equal(await active('Manual@example.com'), undefined);

    const none = await call('remove_from_suppression_list', { address: 'never@example.com' });
    assert.equal(none.status, 404);
    assert.equal(none.body.response.status, 'not_found');
    assert.match(none.body.response.message, /never@example\.com/);

    // After a removal the soft count starts from zero.
    await record({ address: 'soft2@example.com', kind: 'soft', transmissionId: 20 });
    await record({ address: 'soft2@example.com', kind: 'soft', transmissionId: 21 });
    await call('add_to_suppression_list', { address: 'soft2@example.com' });
    await call('remove_from_suppression_list', { address: 'soft2@example.com' });
    await record({ address: 'soft2@example.com', kind: 'soft', transmissionId: 22 });
    assert.equal(await active('soft2@example.com'), undefined);
  });

  it('is case-insensitive on the whole address for every path, and shows the spelling an entry was first stored with', async () => {
    const listed = async () => (await call('get_suppression_list', {})).body.data as Record<string, { suppression_state: string }>;
    const spellings = async (key: string) => Object.keys(await listed()).filter((a) => a.toLowerCase() === key);

    // Added by hand under one spelling: every other is suppressed (delivery's check), and adding
    // another spelling adds nothing.
    const added = await call('add_to_suppression_list', { addresses: ['Sup.Case@Example.test', 'SUP.CASE@example.test'] });
    assert.equal(added.status, 200, JSON.stringify(added.body));
    assert.deepEqual(Object.keys(added.body.data.suppression_list), ['Sup.Case@example.test']);
    assert.ok(await active('sup.case@example.test'));
    assert.ok(await active('SUP.case@EXAMPLE.TEST'));
    const again = await call('add_to_suppression_list', { address: 'sup.case@example.test' });
    assert.deepEqual(Object.keys(again.body.data.suppression_list), ['Sup.Case@example.test']);
    assert.deepEqual(await spellings('sup.case@example.test'), ['Sup.Case@example.test']);

    // A hard bounce under another spelling turns that entry into a hard bounce; a complaint is found by any.
    await record({ address: 'sup.CASE@example.test', kind: 'hard' });
    assert.equal((await listed())['Sup.Case@example.test'].suppression_state, 'hard_bounce');
    assert.deepEqual(await spellings('sup.case@example.test'), ['Sup.Case@example.test']);
    await t.app.services.store.write((trx) => recordComplaint(trx, { projectId: seed.projectId, address: 'Spam.Report@example.test', message: 'abuse', now: clock.now() }));
    assert.equal((await active('spam.report@EXAMPLE.test'))?.suppression_state, 'complaint');

    // Soft failures under three spellings count for one address; the entry they make shows the
    // spelling of the failure that made it.
    for (const [id, address] of [[31, 'Soft.Mix@example.test'], [32, 'soft.mix@example.test'], [33, 'SOFT.MIX@example.test']] as const) {
      await record({ address, kind: 'soft', transmissionId: id });
    }
    const warning = await active('soft.mix@example.test');
    assert.equal(warning?.status, 'warning');
    assert.deepEqual(await spellings('soft.mix@example.test'), ['SOFT.MIX@example.test']);

    // Removed under any spelling; the answer names the addresses as given.
    const removed = await call('remove_from_suppression_list', { addresses: ['sup.case@EXAMPLE.test', 'SOFT.mix@example.test'] });
    assert.equal(removed.status, 200, JSON.stringify(removed.body));
    assert.deepEqual(removed.body.data, { removed: ['sup.case@example.test', 'SOFT.mix@example.test'], not_found: [] });
    assert.equal(await active('Sup.Case@example.test'), undefined);
    assert.equal(await active('Soft.Mix@example.test'), undefined);
  });

  it('answers the lookups of one turn together exactly as it answers each alone', async () => {
    const store = t.app.services.store;
    const second = await t.seed('batched');
    const now = clock.now();
    const entry = (projectId: number, address: string, status: string, blockedUntil: number | null) => ({
      project_id: projectId, address, status, suppression_state: status === 'rejected' ? 'hard_bounce' : 'soft_bounce',
      blocked_until: blockedUntil, message: `${status} ${address}`, soft_failures: 0, created_at: now, updated_at: now,
    });
    await store.write((trx) =>
      trx.insertInto('suppressions').values([
        entry(seed.projectId, 'b-rejected@example.com', 'rejected', null),
        entry(seed.projectId, 'b-warned@example.com', 'warning', now + 60_000),
        entry(seed.projectId, 'b-expired@example.com', 'warning', now - 1),
        entry(second.projectId, 'b-other@example.com', 'rejected', null),
        // "it's" and a quote: the lookups travel as JSON on SQLite.
        entry(second.projectId, `b-"it's"@example.com`, 'rejected', null),
      ]).execute(),
    );
    const asks: Array<[number, string, number]> = [];
    for (const projectId of [seed.projectId, second.projectId]) {
      for (const address of ['b-rejected@example.com', 'b-warned@EXAMPLE.com', 'b-expired@example.com', 'b-other@example.com', `b-"it's"@example.com`, 'b-none@example.com']) {
        for (const at of [now, now + 120_000]) asks.push([projectId, address, at]);
      }
    }
    asks.push(asks[0], asks[3]);
    // Outside a transaction, in one turn: batched. Inside one: each alone (the reference).
    const together = await Promise.all(asks.map(([p, a, at]) => findActiveSuppression(store.db, p, a, at)));
    const alone = await store.write(async (trx) => {
      const out = [];
      for (const [p, a, at] of asks) out.push(await findActiveSuppression(trx, p, a, at));
      return out;
    });
    assert.deepEqual(together, alone);
    const found = together.map((row) => row?.address ?? null);
    assert.deepEqual(found.slice(0, 12), ['b-rejected@example.com', 'b-rejected@example.com', 'b-warned@example.com', null, null, null, null, null, null, null, null, null]);
    assert.deepEqual(found.slice(12, 24), [null, null, null, null, null, null, 'b-other@example.com', 'b-other@example.com', `b-"it's"@example.com`, `b-"it's"@example.com`, null, null]);
  });

  it('migration 240 stores each entry written before it under its key, and makes the spellings of one address one entry', async () => {
    const store = t.app.services.store;
    const db = store.dialect.db as unknown as Kysely<any>;
    const projectId = (await t.seed('migrated')).projectId;
    const now = clock.now();
    // The tables as the previous version wrote them: addresses as spelled, no display_address.
    await db.schema.alterTable('suppressions').dropColumn('display_address').execute();
    const entry = (address: string, status: string, blockedUntil: number | null) => ({
      project_id: projectId, address, status, suppression_state: status === 'rejected' ? 'manual' : 'soft_bounce',
      blocked_until: blockedUntil, message: address, soft_failures: 0, created_at: now, updated_at: now,
    });
    await db.insertInto('suppressions').values([
      entry('Old.Case@example.test', 'warning', now + 1000),
      entry('old.case@example.test', 'rejected', null),
      entry('OLD.CASE@example.test', 'warning', now + 5000),
      entry('Keep.Me@example.test', 'rejected', null),
      entry('Two.Warn@example.test', 'warning', now + 1000),
      entry('TWO.WARN@example.test', 'warning', now + 9000),
      entry('plain@example.test', 'rejected', null),
    ]).execute();
    const failures = (address: string, count: number, first: number, last: number, transmission: number) => ({
      project_id: projectId, address, failures: count, first_failure_at: first, last_failure_at: last, last_transmission_id: transmission,
    });
    await db.insertInto('soft_bounces').values([
      failures('Soft.Old@example.test', 1, now - 10, now - 5, 7),
      failures('soft.old@example.test', 1, now - 3, now - 1, 8),
      failures('Alone@example.test', 2, now - 3, now - 2, 9),
    ]).execute();

    await migrateSuppressionKeys(db, store.dialect);

    const rows = await db.selectFrom('suppressions').select(['address', 'display_address', 'status', 'blocked_until']).where('project_id', '=', projectId).orderBy('address').execute();
    assert.deepEqual(rows.map((r) => [r.address, r.display_address, r.status, r.blocked_until === null ? null : Number(r.blocked_until) - now]), [
      ['keep.me@example.test', 'Keep.Me@example.test', 'rejected', null],
      // The entry that blocks most: rejected over warnings; of two warnings, the one blocking longer.
      ['old.case@example.test', 'old.case@example.test', 'rejected', null],
      ['plain@example.test', 'plain@example.test', 'rejected', null],
      ['two.warn@example.test', 'TWO.WARN@example.test', 'warning', 9000],
    ]);
    const counts = await db.selectFrom('soft_bounces').select(['address', 'failures', 'first_failure_at', 'last_failure_at', 'last_transmission_id']).where('project_id', '=', projectId).orderBy('address').execute();
    assert.deepEqual(counts.map((c) => [c.address, Number(c.failures), Number(c.first_failure_at) - now, Number(c.last_failure_at) - now, Number(c.last_transmission_id)]), [
      ['alone@example.test', 2, -3, -2, 9],
      ['soft.old@example.test', 2, -10, -1, 8],
    ]);
    // Found by any spelling now, and the counts go on: a third failure makes the warning.
    assert.equal((await findActiveSuppression(store.db, projectId, 'OLD.case@example.test', now))?.status, 'rejected');
    assert.ok(await findActiveSuppression(store.db, projectId, 'keep.me@EXAMPLE.test', now));
    await store.write((trx) => recordBounce(trx, { projectId, address: 'SOFT.OLD@example.test', kind: 'soft', transmissionId: 10, message: '452', now }));
    assert.equal((await findActiveSuppression(store.db, projectId, 'soft.old@example.test', now))?.status, 'warning');
  });

  it('refuses bad arguments with clear errors', async () => {
    const cases: Array<[string, unknown, number, RegExp]> = [
      ['add_to_suppression_list', {}, 400, /address/],
      ['add_to_suppression_list', { addresses: [] }, 400, /address/],
      ['add_to_suppression_list', { address: 'not an address' }, 412, /Invalid email address "not an address"/],
      ['add_to_suppression_list', { addresses: ['ok@example.com', 'bad@'] }, 412, /bad@/],
      ['add_to_suppression_list', { addresses: [42] }, 406, /addresses\[0\]/],
      ['add_to_suppression_list', { addresses: { a: 1 } }, 406, /addresses/],
      ['add_to_suppression_list', { addresses: Array.from({ length: 1001 }, (_, i) => `u${i}@example.com`) }, 406, /at most 1000/],
      ['remove_from_suppression_list', { address: '' }, 400, /address/],
      ['remove_from_suppression_list', { address: ['x'] }, 406, /address/],
    ];
    for (const [method, args, status, message] of cases) {
      const r = await call(method, args);
      assert.equal(r.status, status, `${method} ${JSON.stringify(args).slice(0, 80)}: ${JSON.stringify(r.body)}`);
      assert.match(r.body.response.message, message);
    }
    assert.equal(await active('ok@example.com'), undefined, 'a refused call adds nothing');
    // An account key is refused: these are project methods.
    const wrongKey = await call('add_to_suppression_list', { address: 'x@example.com' }, seed.accountKey);
    assert.equal(wrongKey.status, 401);
    assert.match(wrongKey.body.response.message, /needs a project API key/);
  });
});

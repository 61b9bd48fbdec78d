// Bounces injected over SMTP into the real listener on 127.0.0.1, sent with Nodemailer's client.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import nodemailer from 'nodemailer';
import { returnPathFor, verpTagKey } from '../../src/domain/verp.ts';
import { ManualClock } from '../../src/domain/clock.ts';
import type { Services } from '../../src/services.ts';
import { BounceListener, createBounceListener } from '../../src/smtp/index.ts';
import { findActiveSuppression } from '../../src/storage/suppressions.ts';
import { startTestApp, type Seed, type TestApp } from '../helpers/app.ts';
import { dsnMail, insertTransmission } from '../helpers/bounce-fixtures.ts';

describe('bounce listener', () => {
  let t: TestApp;
  let seed: Seed;
  let services: Services;
  let listener: BounceListener;
  let port: number;
  const clock = new ManualClock(Date.UTC(2026, 10, 22, 5, 0, 0));

  before(async () => {
    t = await startTestApp({ background: false, clock });
    seed = await t.seed();
    // The listener as serve builds it, on an ephemeral port.
    services = { ...t.app.services, config: Object.freeze({ ...t.app.services.config, bouncePort: 0, bounceHost: '127.0.0.1' }) };
    const created = createBounceListener(services);
    assert.ok(created instanceof BounceListener);
    listener = created;
    await listener.start();
    port = listener.address().port;
  });
  after(async () => {
    await listener.stop();
    await t.close();
  });

  const verp = (id: number) => returnPathFor(services.config.bounceDomain, id, verpTagKey(services));

  async function send(to: string, raw: string): Promise<{ ok: true } | { ok: false; code: number; message: string }> {
    const transport = nodemailer.createTransport({ host: '127.0.0.1', port, secure: false, ignoreTLS: true, connectionTimeout: 5000 });
    try {
      await transport.sendMail({ envelope: { from: '', to }, raw });
      return { ok: true };
    } catch (error) {
      const e = error as { responseCode?: number; response?: string; message: string };
      return { ok: false, code: e.responseCode ?? 0, message: e.response ?? e.message };
    } finally {
      transport.close();
    }
  }

  const transmission = (id: number) => services.store.db.selectFrom('transmissions').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
  const bouncedEvents = (id: number) =>
    services.store.db
      .selectFrom('events')
      .selectAll()
      .where('type', '=', 'bounced')
      .execute()
      .then((rows) => rows.filter((r) => JSON.parse(r.payload).transmission_id === id));

  it('is not created without --bounce-port', () => {
    assert.equal(createBounceListener(t.app.services), null);
  });

  it('fails a completed transmission on a hard DSN, suppresses the address and records a bounced event', async () => {
    const fx = await insertTransmission(services, { projectId: seed.projectId, recipient: 'Gone@Example.NET', status: 'completed' });
    const r = await send(verp(fx.transmissionId), dsnMail({ to: verp(fx.transmissionId), recipient: 'Gone@example.net' }));
    assert.deepEqual(r, { ok: true });

    const row = await transmission(fx.transmissionId);
    assert.equal(row.status, 'failed');
    assert.equal(row.result_code, 'SMTP_550');
    assert.match(row.result_message ?? '', /550 5\.1\.1 .*User unknown/);
    assert.ok(row.failed_at !== null);
    assert.ok(row.completed_at !== null, 'the acceptance stays on record');

    // Any spelling of the address is suppressed; the entry shows the one the bounce named.
    const entry = await findActiveSuppression(services.store.db, seed.projectId, 'gone@example.net', services.clock.now());
    assert.equal(entry?.display_address, 'Gone@example.net');
    const suppressed = await findActiveSuppression(services.store.db, seed.projectId, 'Gone@EXAMPLE.net', services.clock.now());
    assert.ok(suppressed);
    assert.equal(suppressed.status, 'rejected');
    assert.equal(suppressed.suppression_state, 'hard_bounce');
    assert.equal(suppressed.address, 'gone@example.net', 'stored under its key');

    const events = await bouncedEvents(fx.transmissionId);
    assert.equal(events.length, 1);
    const payload = JSON.parse(events[0].payload);
    assert.equal(events[0].project_id, seed.projectId);
    assert.equal(events[0].account_id, seed.accountId);
    assert.equal(payload.result_code, 'SMTP_550');
    assert.equal(payload.previous_status, 'completed');
    assert.equal(payload.message_uid, fx.messageUid);

    // The same report again: no second event, the first result stays.
    assert.deepEqual(await send(verp(fx.transmissionId), dsnMail({ to: verp(fx.transmissionId), recipient: 'Gone@example.net', diagnostic: 'smtp; 551 other' })), { ok: true });
    assert.equal((await bouncedEvents(fx.transmissionId)).length, 1);
    assert.equal((await transmission(fx.transmissionId)).result_code, 'SMTP_550');
  });

  it('uses the DSN status when the report has no SMTP diagnostic', async () => {
    const fx = await insertTransmission(services, { projectId: seed.projectId, recipient: 'nodiag@example.net', status: 'retry' });
    assert.deepEqual(await send(verp(fx.transmissionId), dsnMail({ to: verp(fx.transmissionId), recipient: 'nodiag@example.net', status: '5.2.1', diagnostic: null })), { ok: true });
    const row = await transmission(fx.transmissionId);
    assert.equal(row.status, 'failed');
    assert.equal(row.result_code, 'DSN_5.2.1');
  });

  it('refuses recipients that are not verified VERP addresses on the bounce domain with 550', async () => {
    const fx = await insertTransmission(services, { projectId: seed.projectId, recipient: 'victim@example.net' });
    const good = verp(fx.transmissionId);
    const [local] = good.split('@');
    const forged = [
      'postmaster@' + services.config.bounceDomain,
      `${local}@other.example`,
      returnPathFor(services.config.bounceDomain, fx.transmissionId), // untagged
      returnPathFor(services.config.bounceDomain, fx.transmissionId, 'some other key'),
      good.replace(/-([0-9a-f]{16})@/, (_m, tag: string) => `-${tag.slice(0, 15)}${tag[15] === '0' ? '1' : '0'}@`),
      verp(fx.transmissionId + 1).replace(/^bounce-\d+/, `bounce-${fx.transmissionId}`), // another transmission's tag
    ];
    for (const to of forged) {
      const r = await send(to, dsnMail({ to, recipient: 'victim@example.net' }));
      assert.equal(r.ok, false, to);
      if (!r.ok) assert.equal(r.code, 550, to);
    }
    assert.equal((await transmission(fx.transmissionId)).status, 'completed');
    assert.equal(await findActiveSuppression(services.store.db, seed.projectId, 'victim@example.net', services.clock.now()), undefined);
    // Upper-case spelling of a real address is still ours.
    assert.deepEqual(await send(good.toUpperCase(), dsnMail({ to: good, recipient: 'victim@example.net' })), { ok: true });
    assert.equal((await transmission(fx.transmissionId)).status, 'failed');
  });

  it('counts delayed DSNs as soft bounces and leaves the transmission alone; three make a warning', async () => {
    const address = 'slow@example.net';
    const ids: number[] = [];
    for (let i = 0; i < 3; i++) {
      const fx = await insertTransmission(services, { projectId: seed.projectId, recipient: address, status: 'completed' });
      ids.push(fx.transmissionId);
      const to = verp(fx.transmissionId);
      const raw = dsnMail({ to, recipient: address, action: 'delayed', status: '4.2.2', diagnostic: 'smtp; 452 4.2.2 Mailbox full', subject: 'Delayed Mail (still being retried)' });
      assert.deepEqual(await send(to, raw), { ok: true });
      // The same report twice counts once per transmission.
      assert.deepEqual(await send(to, raw), { ok: true });
      const active = await findActiveSuppression(services.store.db, seed.projectId, address, services.clock.now());
      if (i < 2) assert.equal(active, undefined, `after ${i + 1} soft bounce(s)`);
      else {
        assert.ok(active);
        assert.equal(active.status, 'warning');
        assert.equal(active.suppression_state, 'soft_bounce');
        assert.equal(active.blocked_until, services.clock.now() + 24 * 3_600_000);
      }
    }
    for (const id of ids) assert.equal((await transmission(id)).status, 'completed');
    assert.equal((await bouncedEvents(ids[0])).length, 0);

    // A later hard bounce upgrades the warning.
    const fx = await insertTransmission(services, { projectId: seed.projectId, recipient: address });
    assert.deepEqual(await send(verp(fx.transmissionId), dsnMail({ to: verp(fx.transmissionId), recipient: address })), { ok: true });
    const upgraded = await findActiveSuppression(services.store.db, seed.projectId, address, services.clock.now() + 48 * 3_600_000);
    assert.equal(upgraded?.status, 'rejected');
    assert.equal(upgraded?.suppression_state, 'hard_bounce');
  });

  it('fails on a plain-text bounce that quotes a permanent SMTP error, and ignores auto-replies', async () => {
    const fx = await insertTransmission(services, { projectId: seed.projectId, recipient: 'qmail@example.net' });
    const to = verp(fx.transmissionId);
    const qmail = [
      'From: MAILER-DAEMON@mx.example.net',
      `To: ${to}`,
      'Subject: failure notice',
      '',
      "Hi. This is the qmail-send program at mx.example.net.",
      "I'm afraid I wasn't able to deliver your message to the following addresses.",
      '',
      '<qmail@example.net>:',
      'Remote host said: 550 5.1.1 The email account that you tried to reach does not exist',
      '',
    ].join('\r\n');
    assert.deepEqual(await send(to, qmail), { ok: true });
    const row = await transmission(fx.transmissionId);
    assert.equal(row.status, 'failed');
    assert.equal(row.result_code, 'SMTP_550');
    assert.match(row.result_message ?? '', /does not exist/);

    const fx2 = await insertTransmission(services, { projectId: seed.projectId, recipient: 'away@example.net' });
    const to2 = verp(fx2.transmissionId);
    const vacation = ['From: away@example.net', `To: ${to2}`, 'Subject: Out of office: Hello', 'Auto-Submitted: auto-replied', '', 'I am away until Monday. 550 5.1.1 nothing', ''].join('\r\n');
    assert.deepEqual(await send(to2, vacation), { ok: true });
    assert.equal((await transmission(fx2.transmissionId)).status, 'completed');
    assert.equal(await findActiveSuppression(services.store.db, seed.projectId, 'away@example.net', services.clock.now()), undefined);
  });

  it('refuses oversized mail with 552 and answers 451 when the bounce cannot be recorded, so nothing is lost', async () => {
    const fx = await insertTransmission(services, { projectId: seed.projectId, recipient: 'retry-me@example.net' });
    const to = verp(fx.transmissionId);
    const raw = dsnMail({ to, recipient: 'retry-me@example.net' });

    const small = new BounceListener(services, 0, '127.0.0.1', { maxBytes: 512 });
    await small.start();
    try {
      const transport = nodemailer.createTransport({ host: '127.0.0.1', port: small.address().port, secure: false, ignoreTLS: true });
      try {
        await assert.rejects(transport.sendMail({ envelope: { from: '', to }, raw }), (e: { responseCode?: number }) => e.responseCode === 552);
      } finally {
        transport.close();
      }
    } finally {
      await small.stop();
    }

    // A store that cannot write (disk full, database down): the sender is told to try again.
    const broken: Services = { ...services, store: Object.create(services.store, { write: { value: () => Promise.reject(new Error('database unavailable')) } }) };
    const failing = new BounceListener(broken, 0, '127.0.0.1');
    await failing.start();
    try {
      const transport = nodemailer.createTransport({ host: '127.0.0.1', port: failing.address().port, secure: false, ignoreTLS: true });
      try {
        await assert.rejects(transport.sendMail({ envelope: { from: '', to }, raw }), (e: { responseCode?: number }) => e.responseCode === 451);
      } finally {
        transport.close();
      }
    } finally {
      await failing.stop();
    }
    assert.equal((await transmission(fx.transmissionId)).status, 'completed');
    // The retry reaches a healthy listener and is recorded.
    assert.deepEqual(await send(to, raw), { ok: true });
    assert.equal((await transmission(fx.transmissionId)).status, 'failed');
  });

  it('runs inside the app when --bounce-port is set, and stops with it', async () => {
    const app = await startTestApp({ config: { bouncePort: 0, bounceHost: '127.0.0.1', workers: 0 } });
    const inApp = app.app.background.find((s) => s.name === 'bounce-listener');
    assert.ok(inApp instanceof BounceListener);
    const appPort = inApp.address().port;
    assert.ok(appPort > 0);
    await app.close();
    const transport = nodemailer.createTransport({ host: '127.0.0.1', port: appPort, secure: false, ignoreTLS: true, connectionTimeout: 2000 });
    try {
      await assert.rejects(transport.verify(), (e: { code?: string }) => e.code === 'ESOCKET' || e.code === 'ECONNECTION');
    } finally {
      transport.close();
    }
  });
});

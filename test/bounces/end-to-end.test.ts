// The whole loop on 127.0.0.1: send_message -> the delivery worker sends, DKIM-signed, with a VERP
// return path, to a real SMTP peer -> the peer's MX "later" bounces it to that return path through
// the real bounce listener -> the transmission is failed, the address suppressed, and the next send
// to it fails at once without any SMTP traffic.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { dkimVerify } from 'mailauth/lib/dkim/verify.js';
import nodemailer from 'nodemailer';
import { BounceListener, createBounceListener } from '../../src/smtp/index.ts';
import { dsnMail } from '../helpers/bounce-fixtures.ts';
import { startSmtpPeer, type SmtpPeer } from '../helpers/smtp-peers.ts';
import { startDeliveryHarness, type DeliveryHarness } from '../delivery/harness.ts';

describe('bounces end to end', () => {
  let h: DeliveryHarness;
  let peer: SmtpPeer;
  let listener: BounceListener;

  before(async () => {
    peer = await startSmtpPeer();
    h = await startDeliveryHarness({ config: { transportMap: [peer.transportFor('example.net')] } });
    const services = h.t.app.services;
    const created = createBounceListener({ ...services, config: Object.freeze({ ...services.config, bouncePort: 0, bounceHost: '127.0.0.1' }) });
    assert.ok(created instanceof BounceListener);
    listener = created;
    await listener.start();
  });
  after(async () => {
    await listener?.stop();
    await h?.close();
    await peer?.close();
  });

  it('signs, returns through VERP, fails and suppresses', async () => {
    const domain = await h.t.call('create_domain', { api_key: h.seed.accountKey, arguments: { name: 'shop.example' } });
    assert.equal(domain.status, 200);
    const dkimRecord = domain.body.data.domain.dns_records.dkim;

    const message = {
      recipients: 'gone@example.net',
      headers: { from: 'Shop <news@shop.example>', subject: 'Your order' },
      content: { 'text/plain': 'Thanks for your order.' },
    };
    const sent = await h.send({ ...message });
    await h.drain();
    const t1 = await h.transmission('gone@example.net');
    assert.equal(t1.status, 'completed');
    assert.equal(peer.received.length, 1);
    const mail = peer.received[0];

    // Signed with the domain's key: verifies against the record create_domain told us to publish.
    const resolver = async (name: string, type: string) => {
      if (type === 'TXT' && name === dkimRecord.name) return [[dkimRecord.value.slice(0, 255), dkimRecord.value.slice(255)]];
      throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' });
    };
    const verified = await dkimVerify(mail.raw, { resolver });
    assert.equal(verified.results[0].status.result, 'pass', JSON.stringify(verified.results[0].status));
    assert.equal(verified.results[0].signingDomain, 'shop.example');

    // The envelope sender is the transmission's VERP address.
    assert.match(mail.from, new RegExp(`^bounce-${t1.id}-[0-9a-f]{16}@bounces\\.posthorn\\.test$`));

    // Later, the receiving side bounces it to that return path.
    const transport = nodemailer.createTransport({ host: '127.0.0.1', port: listener.address().port, secure: false, ignoreTLS: true });
    try {
      await transport.sendMail({ envelope: { from: '', to: mail.from }, raw: dsnMail({ to: mail.from, recipient: 'gone@example.net' }) });
    } finally {
      transport.close();
    }

    const messageRow = await h.t.app.services.store.db.selectFrom('messages').select('uid').where('id', '=', t1.message_id).executeTakeFirstOrThrow();
    assert.equal(sent.data.message.id, t1.message_id);
    const receipt = await h.t.call('get_message_transmissions', { api_key: h.seed.projectKey, arguments: { uid: messageRow.uid } });
    const t2 = await h.transmission('gone@example.net');
    assert.equal(t2.status, 'failed');
    assert.equal(t2.result_code, 'SMTP_550');
    assert.equal(receipt.status, 200, JSON.stringify(receipt.body));
    const shown = receipt.body.data.transmissions['gone@example.net'];
    assert.equal(shown.status, 'failed');
    assert.equal(shown.result_code, 'SMTP_550');
    const events = await h.events('bounced');
    assert.equal(events.length, 1);
    assert.equal(events[0].payload.transmission_id, t1.id);

    const list = await h.t.call('get_suppression_list', { api_key: h.seed.projectKey });
    assert.equal(list.status, 200, JSON.stringify(list.body));
    assert.equal(list.body.data['gone@example.net']?.suppression_state, 'hard_bounce');

    // The next message to the address fails at once, without SMTP traffic.
    const connections = peer.connectionCount;
    await h.send({ ...message, headers: { ...message.headers, subject: 'Another' } });
    await h.drain();
    const t3 = await h.transmission('gone@example.net');
    assert.notEqual(t3.id, t1.id);
    assert.equal(t3.status, 'failed');
    assert.equal(peer.received.length, 1);
    assert.equal(peer.connectionCount, connections);
  });

  it('with recipient_override, suppresses the address the mail really went to', async () => {
    await h.send({
      recipients: 'listed@example.net',
      recipient_override: 'tester@example.net',
      headers: { from: 'news@shop.example', subject: 'Override' },
      content: { 'text/plain': 'x' },
    });
    await h.drain();
    const t1 = await h.transmission('listed@example.net');
    assert.equal(t1.status, 'completed');
    const mail = peer.received.at(-1)!;
    assert.deepEqual(mail.to, ['tester@example.net']);
    const transport = nodemailer.createTransport({ host: '127.0.0.1', port: listener.address().port, secure: false, ignoreTLS: true });
    try {
      await transport.sendMail({ envelope: { from: '', to: mail.from }, raw: dsnMail({ to: mail.from, recipient: 'tester@example.net' }) });
    } finally {
      transport.close();
    }
    assert.equal((await h.transmission('listed@example.net')).status, 'failed');
    const list = (await h.t.call('get_suppression_list', { api_key: h.seed.projectKey })).body.data;
    assert.ok('tester@example.net' in list, JSON.stringify(list));
    assert.ok(!('listed@example.net' in list));
    const event = (await h.events('bounced')).find((e) => e.payload.transmission_id === t1.id);
    assert.equal(event?.payload.delivered_to, 'tester@example.net');
    assert.equal(event?.payload.recipient, 'listed@example.net');
  });
});

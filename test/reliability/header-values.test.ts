// One check for every header-bound value (docs/reliability.md, domain/headers.ts): NUL, bare CR/LF
// and the other C0 controls are refused from every source (send_message's headers, recipients'
// display names, template subjects and From, variables substituted into headers) and, when a value
// only becomes invalid at composition, that transmission fails with INVALID_HEADER. Proven at a
// real smtp-server sink: what is refused never reaches the wire, while a clean message sent
// alongside does (so the sink demonstrably receives what gets through).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { checkHeaderValue, HeaderValueError } from '../../src/domain/headers.ts';
import { composeMime } from '../../src/domain/compose-mime.ts';
import { startSmtpPeer, type SmtpPeer } from '../helpers/smtp-peers.ts';
import { simpleMessage, startDeliveryHarness, type DeliveryHarness } from '../delivery/harness.ts';

const CONTROL = /[\x00-\x08\x0a-\x1f\x7f]/;

function assertRefused(reply: { status?: number; response?: { status: string; message: string } } | any, pattern: RegExp): void {
  assert.equal(reply.status, 406, JSON.stringify(reply.body));
  assert.equal(reply.body.response.status, 'call_error');
  assert.match(reply.body.response.message, pattern);
}

describe('checkHeaderValue', () => {
  it('passes printable text, tab and Unicode; refuses NUL, CR, LF, other C0 controls and DEL, naming the field', () => {
    for (const ok of ['Hello', 'a\tb', 'Grüße 👋', '', 'ü'.repeat(500)]) assert.equal(checkHeaderValue('x', ok), ok);
    for (let c = 0; c < 0x20; c++) {
      if (c === 0x09) continue;
      assert.throws(
        () => checkHeaderValue('header "X-Test"', `a${String.fromCharCode(c)}b`),
        (e: unknown) => e instanceof HeaderValueError && e.status === 'call_error' && e.httpCode === 406 && /"X-Test"/.test(e.message) && /U\+00[01][0-9A-F]/.test(e.message),
      );
    }
    assert.throws(() => checkHeaderValue('f', 'a\x7fb'), HeaderValueError);
  });

  it('composition refuses a header value that substitution made invalid', async () => {
    const payload = { v: 1, from: 'a@example.test', subject: 'Hi {{name}}', text: 'x', html: null, headers: { 'X-Ref': '{{ref}}' }, messageId: '<m@x>' } as any;
    await composeMime(payload, { name: 'Ann', ref: 'r1' }, { date: new Date(0) });
    await assert.rejects(composeMime(payload, { name: 'Ann\0', ref: 'r1' }, { date: new Date(0) }), (e: unknown) => e instanceof HeaderValueError && /Subject/.test((e as Error).message));
    await assert.rejects(composeMime(payload, { name: 'Ann', ref: 'r\r\nBcc: v@example.test' }, { date: new Date(0) }), (e: unknown) => e instanceof HeaderValueError && /X-Ref/.test((e as Error).message));
  });
});

describe('a From with variables, rendered', () => {
  it('must still be exactly one address: none, two, a comma in a bare display name or a broken address fail the copy', async () => {
    const payload = (from: string) => ({ v: 1, syntax: 'handlebars', from, subject: 's', text: 'x', html: null, headers: {}, messageId: '<m@x>' }) as any;
    const date = new Date(0);
    const composed = await composeMime(payload('{{s}} <shop@example.test>'), { s: 'Shop' }, { date });
    assert.match(composed.mime.toString(), /^From: Shop <shop@example\.test>\r$/m);
    await composeMime(payload('"{{s}}" <shop@example.test>'), { s: 'Shop, Inc' }, { date });
    for (const [from, s] of [['{{s}}', 'not-an-address'], ['{{s}}', ''], ['{{s}}', 'a@example.test, b@example.test'], ['{{s}} <shop@example.test>', 'Shop, Inc'], ['{{s}}@example.test', 'a b<>']]) {
      await assert.rejects(composeMime(payload(from!), { s: s! }, { date }), (e: unknown) => e instanceof HeaderValueError && /From header after variable substitution is not one address/.test((e as Error).message), `${from} with ${s}`);
    }
  });
});

describe('a Reply-To with variables, rendered', () => {
  it('is accepted, rendered per copy, and must still be addresses or the copy fails', async () => {
    const payload = (replyTo: string) => ({ v: 1, syntax: 'handlebars', from: 'shop@example.test', subject: 's', text: 'x', html: null, headers: { 'Reply-To': replyTo }, messageId: '<m@x>' }) as any;
    const date = new Date(0);
    const composed = await composeMime(payload('{{agent}} <{{agent_email}}>'), { agent: 'Ann', agent_email: 'ann@example.test' }, { date });
    assert.match(composed.mime.toString(), /^Reply-To: Ann <ann@example\.test>\r$/m);
    await composeMime(payload('{{a}}, b@example.test'), { a: 'a@example.test' }, { date });
    for (const value of ['', 'not-an-address', 'a@example.test, broken@']) {
      await assert.rejects(composeMime(payload('{{a}}'), { a: value }, { date }), (e: unknown) => e instanceof HeaderValueError && /Reply-To header after variable substitution/.test((e as Error).message), value);
    }
  });
});

describe('header values at a real SMTP sink', () => {
  let peer: SmtpPeer;
  let h: DeliveryHarness;

  before(async () => {
    peer = await startSmtpPeer();
    h = await startDeliveryHarness({ config: { transportMap: [peer.transportFor('*')] } });
  });
  after(async () => {
    await h?.close();
    await peer?.close();
  });

  const send = (args: Record<string, unknown>) => h.t.call('send_message', { api_key: h.seed.projectKey, arguments: args });
  const template = (method: string, args: Record<string, unknown>) => h.t.call(method, { api_key: h.seed.projectKey, arguments: args });

  it('refuses every source at acceptance; nothing refused reaches the wire, the clean message does', async () => {
    // A display name with NUL, with a control character, and with a line break.
    // NUL is refused for every string argument at the edge (the one rule of both databases), so its
    // message may name the argument rather than the header; every other control reaches this check.
    assertRefused(await send(simpleMessage('"Ann\0Evil" <ann@example.test>')), /U\+0000/);
    assertRefused(await send(simpleMessage({ 'Bob\x07 <bob@example.test>': null })), /display name of recipient bob@example\.test.*U\+0007/);
    const lineBreak = await send(simpleMessage('"Eve\r\nBcc: victim@example.test" <eve@example.test>'));
    assert.ok(lineBreak.status === 406 || lineBreak.status === 412, JSON.stringify(lineBreak.body));
    // Headers given in the call: Cc, custom headers, From.
    assertRefused(await send(simpleMessage('a@example.test', { headers: { from: 'x@example.test', subject: 'ok', cc: 'Carl\x01 <c@example.test>' } })), /"cc"/);
    assertRefused(await send(simpleMessage('a@example.test', { headers: { from: 'x@example.test', subject: 'ok', 'X-Tag': 'a\x1bb' } })), /"X-Tag"/);
    assertRefused(await send(simpleMessage('a@example.test', { headers: { from: 'Sam\x0b <x@example.test>', subject: 'ok' } })), /"from"/);
    // A template subject and From, at save time.
    assertRefused(await template('create_template', { slug: 'bad_subject', subject: 'Hello\x00there', text: 'x' }), /U\+0000/);
    assertRefused(await template('create_template', { slug: 'bad_subject', subject: 'Hello\x1fthere', text: 'x' }), /"subject".*U\+001F/);
    assertRefused(await template('create_template', { slug: 'bad_from', from: 'Shop\r\nBcc: v@example.test', text: 'x' }), /"from"/);
    assert.equal((await template('create_template', { slug: 'good', subject: 'Hi {{name}}', text: 'x' })).status, 200);
    assertRefused(await template('update_template', { slug: 'good', subject: 'Hi\x01' }), /"subject"/);
    // A variable substituted into the subject, global or per recipient.
    assertRefused(await send({ recipients: 'v@example.test', template: 'good', variables: { name: 'Ann\x08' } }), /variable "name" \(used in the Subject header\).*U\+0008/);
    assertRefused(await send({ recipients: { 'w@example.test': { name: 'Ann\r\nBcc: victim@example.test' } }, template: 'good' }), /variable "name"/);
    // A template row written around the save check (an older version, a manual edit) is refused when read.
    await h.t.app.services.store.db.updateTable('templates').set({ subject: 'Hi\x01 {{name}}' }).where('slug', '=', 'good').execute();
    assertRefused(await send({ recipients: 'x@example.test', template: 'good', variables: { name: 'Ann' } }), /subject of template "good"/);

    // The clean message goes through: the sink receives exactly it, and nothing with a control character.
    assert.equal((await send(simpleMessage('clean@example.test'))).status, 200);
    await h.drain();
    await peer.waitForReceived(1, 10_000);
    assert.deepEqual(peer.attempts.map((m) => m.to), [['clean@example.test']]);
    for (const mail of peer.attempts) {
      const head = mail.raw.toString('latin1').split('\r\n\r\n')[0];
      assert.ok(!CONTROL.test(head.replace(/\r\n/g, '')), 'no control character in the header block');
      assert.ok(!/victim@example\.test/.test(mail.raw.toString('latin1')));
    }
  });

  it('a Reply-To with variables is accepted and delivered rendered for each recipient', async () => {
    const receivedBefore = peer.received.length;
    const accepted = await send({
      recipients: { 'rt1@example.test': { agent: 'ann@example.test' }, 'rt2@example.test': { agent: 'bob@example.test' } },
      headers: { from: 'x@example.test', subject: 'Reply-To', 'reply-to': 'Support <{{agent}}>' },
      content: 'x',
    });
    assert.equal(accepted.status, 200, JSON.stringify(accepted.body));
    await h.drain();
    await peer.waitForReceived(receivedBefore + 2, 10_000);
    for (const [to, agent] of [['rt1@example.test', 'ann@example.test'], ['rt2@example.test', 'bob@example.test']]) {
      const mail = peer.received.find((m) => m.to[0] === to);
      assert.match(mail!.raw.toString(), new RegExp(`^Reply-To: Support <${agent!.replace('.', '\\.')}>\r$`, 'm'));
    }
    // Without variables, a Reply-To that is no address is still refused at acceptance.
    const refused = await send({ recipients: 'rt3@example.test', headers: { from: 'x@example.test', 'reply-to': 'nobody' }, content: 'x' });
    assert.equal(refused.status, 412, JSON.stringify(refused.body));
  });

  it('a value made invalid at composition fails that transmission (INVALID_HEADER) and never reaches the wire', async () => {
    const before = peer.connectionCount;
    const receivedBefore = peer.received.length;
    const accepted = await send({ recipients: { 'ok@example.test': { ref: 'r1' }, 'bad@example.test': { ref: 'r2' } }, headers: { from: 'x@example.test', subject: 'Ref {{ref}}' }, content: 'x' });
    assert.equal(accepted.status, 200, JSON.stringify(accepted.body));
    // The per-recipient variables as stored are changed around the acceptance check (a row written
    // by an older version): composition is the last line.
    await h.t.app.services.store.db
      .updateTable('transmissions')
      .set({ variables: JSON.stringify({ ref: 'r2\r\nBcc: victim@example.test' }) })
      .where('recipient', '=', 'bad@example.test')
      .execute();
    await h.drain();
    const bad = await h.transmission('bad@example.test');
    assert.equal(bad.status, 'failed');
    assert.equal(bad.result_code, 'INVALID_HEADER');
    assert.match(bad.result_message, /Subject header after variable substitution/);
    assert.equal((await h.transmission('ok@example.test')).status, 'completed');
    await peer.waitForReceived(receivedBefore + 1, 10_000);
    assert.deepEqual(peer.attempts.map((m) => m.to).slice(-1), [['ok@example.test']]);
    assert.ok(peer.connectionCount >= before);
    assert.ok(peer.attempts.every((m) => !m.raw.toString('latin1').includes('victim@example.test')), 'the injected header never reached the sink');
  });
});

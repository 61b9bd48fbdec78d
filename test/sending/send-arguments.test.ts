// send_message's sending features (docs/api/send-message.md): a From always (headers, template, or
// the project's default_from, else noreply@<--mailer-host>), arguments.subject and
// arguments.from shorthands, recipient maps whose values are not objects, no content needed with
// deliver: false, Cc copies with the main recipient's variables, the template language end to end
// (escaping by part, loops, conditions; syntax errors refused at acceptance), and the `delivered`
// events of copies completed at acceptance (null.postageapp.com, deliver: false).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { simpleParser } from 'mailparser';
import { ManualClock } from '../../src/domain/clock.ts';
import { startDeliveryHarness, type DeliveryHarness } from '../delivery/harness.ts';
import { startSmtpPeer, type SmtpPeer } from '../helpers/smtp-peers.ts';

describe('send_message sending features', () => {
  let peer: SmtpPeer;
  let h: DeliveryHarness;
  const clock = new ManualClock(Date.UTC(2026, 5, 1, 12));
  before(async () => {
    peer = await startSmtpPeer();
    h = await startDeliveryHarness({ clock, config: { transportMap: [peer.transportFor('*')] } });
  });
  after(async () => {
    await h.close();
    await peer.close();
  });

  const send = (args: Record<string, unknown>) => h.t.call('send_message', { api_key: h.seed.projectKey, arguments: args });
  const setDefaultFrom = (value: string) =>
    h.t.call('update_project', { api_key: h.seed.accountKey, arguments: { uid: h.seed.projectUid, settings: { default_from: value } } });
  const payloadOf = async (id: number) => {
    const row = await h.t.app.services.store.db.selectFrom('messages').select('payload').where('id', '=', id).executeTakeFirstOrThrow();
    return JSON.parse(row.payload);
  };
  const received = async (to: string) => {
    const mail = peer.received.find((m) => m.to[0] === to);
    assert.ok(mail, `nothing received for ${to}`);
    return simpleParser(mail.raw);
  };

  it('a message without a From goes from the project\'s default From, else noreply@<--mailer-host>', async () => {
    const cleared = await setDefaultFrom('');
    assert.equal(cleared.status, 200, JSON.stringify(cleared.body));
    assert.equal(cleared.body.data.project.settings.default_from, null);
    const fromHost = await send({ recipients: 'a@example.test', content: 'hi' });
    assert.equal(fromHost.status, 200, JSON.stringify(fromHost.body));
    assert.equal((await payloadOf(fromHost.body.data.message.id)).from, `noreply@${h.t.app.services.config.mailerHost}`);

    assert.equal((await setDefaultFrom('not an address')).status, 406);
    assert.equal((await setDefaultFrom('Shop <shop@example.test>')).status, 200);
    const ok = await send({ recipients: 'a@example.test', content: 'hi with the default' });
    assert.equal(ok.status, 200, JSON.stringify(ok.body));
    assert.equal((await payloadOf(ok.body.data.message.id)).from, 'Shop <shop@example.test>');
    // The sample template has no From of its own: the default's.
    const sample = await send({ recipients: 'a@example.test', template: 'sample_child_template', variables: { name: 'x' } });
    assert.equal((await payloadOf(sample.body.data.message.id)).from, 'Shop <shop@example.test>');
    // A template's From wins over the default, the call's headers over both.
    const created = await h.t.call('create_template', { api_key: h.seed.projectKey, arguments: { slug: 'with_from', subject: 'Hi', from: 'Tpl <tpl@example.test>', text: 'x' } });
    assert.equal(created.status, 200, JSON.stringify(created.body));
    const tpl = await send({ recipients: 'a@example.test', template: 'with_from' });
    assert.equal((await payloadOf(tpl.body.data.message.id)).from, 'Tpl <tpl@example.test>');
    const own = await send({ recipients: 'a@example.test', content: 'x', headers: { from: 'me@example.test' } });
    assert.equal((await payloadOf(own.body.data.message.id)).from, 'me@example.test');
  });

  it('takes arguments.subject and arguments.from as shorthands for the headers', async () => {
    const r = await send({ recipients: 'b@example.test', subject: 'Short {{x}}', from: 'Short <short@example.test>', content: 'x', variables: { x: 1 } });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    const p = await payloadOf(r.body.data.message.id);
    assert.equal(p.subject, 'Short {{x}}');
    assert.equal(p.from, 'Short <short@example.test>');
    const both = await send({ recipients: 'b@example.test', subject: 'arg', headers: { subject: 'header', from: 'h@example.test' }, from: 'a@example.test', content: 'x' });
    const pb = await payloadOf(both.body.data.message.id);
    assert.deepEqual([pb.subject, pb.from], ['header', 'h@example.test']);
    assert.equal((await send({ recipients: 'b@example.test', content: 'x', from: 'broken' })).status, 412);
  });

  it('reads recipient map values that are not objects as a recipient without variables', async () => {
    const r = await send({ recipients: { 'n@example.test': 1, 't@example.test': true, 'z@example.test': null, 's@example.test': 'Sam', 'o@example.test': { v: 'x' } }, content: 'hi', headers: { from: 'f@example.test' } });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    const rows = await h.transmissions();
    const mine = rows.filter((t) => ['n', 't', 'z', 's', 'o'].some((p) => t.recipient === `${p}@example.test`));
    assert.equal(mine.length, 5);
    for (const t of mine) assert.equal(t.variables, t.recipient === 'o@example.test' ? '{"v":"x"}' : null, t.recipient);
  });

  it('accepts a message with no content when deliver is false, and completes it with a delivered event', async () => {
    const r = await send({ recipients: ['nc@example.test'], deliver: false });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    const t = await h.transmission('nc@example.test');
    assert.deepEqual([t.status, t.result_code], ['completed', 'NOT_SENT']);
    const events = (await h.events('delivered')).filter((e) => e.payload.transmission_id === t.id);
    assert.equal(events.length, 1);
    assert.equal(events[0].payload.result_code, 'NOT_SENT');
    // With deliver true, an empty message is still refused, and so is one whose texts are empty or blank.
    assert.equal((await send({ recipients: ['nc@example.test'], headers: { from: 'f@example.test' } })).status, 412);
    for (const content of ['', ' \r\n ', { 'text/plain': '', 'text/html': '  ' }]) {
      const blank = await send({ recipients: ['nc@example.test'], headers: { from: 'f@example.test', subject: '' }, content });
      assert.equal(blank.status, 412, `${JSON.stringify(content)}: ${JSON.stringify(blank.body)}`);
      assert.match(blank.body.response.message, /The message is empty/);
    }
  });

  it('completes copies to null.postageapp.com at acceptance with a delivered event each', async () => {
    const r = await send({ recipients: ['one@null.postageapp.com', 'real@example.test'], content: 'hi', headers: { from: 'f@example.test' } });
    assert.equal(r.status, 200);
    const t = await h.transmission('one@null.postageapp.com');
    assert.equal(t.status, 'completed');
    const events = (await h.events('delivered')).filter((e) => e.payload.transmission_id === t.id);
    assert.equal(events.length, 1);
    assert.equal(events[0].payload.result_code, 'SMTP_250');
    // The text without its reply code, as a real server's reply is recorded (docs/delivery.md).
    assert.match(String(events[0].payload.result_message), /^2\.0\.0 Accepted: null\.postageapp\.com is a test address/);
    assert.equal(events[0].payload.message_id, r.body.data.message.id);
    assert.equal((await h.transmission('real@example.test')).status, 'queued');
  });

  it('renders the template language per part for every copy; Cc copies get the main recipient\'s variables', async () => {
    await h.drain();
    await peer.waitForReceived(peer.received.length);
    peer.received.length = 0;
    const r = await send({
      recipients: { 'ann@example.test': { name: 'Ann <admin>', items: [{ t: 'Pen & Ink' }, { t: 'Pad' }], vip: true } },
      headers: { from: 'Shop <shop@example.test>', subject: 'For {{name}}{{#if vip}} (VIP){{/if}}', cc: 'boss@example.test' },
      content: {
        'text/plain': 'Hi {{name}}:{{#each items}} {{t}};{{/each}}',
        'text/html': '<p>Hi {{name}}</p><ul>{{#each items}}<li>{{t}}</li>{{/each}}</ul>{{{banner}}}',
      },
      variables: { banner: '<hr class="b">' },
    });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(await h.drain(), 2);
    await peer.waitForReceived(2);
    for (const to of ['ann@example.test', 'boss@example.test']) {
      const mail = await received(to);
      assert.equal(mail.subject, 'For Ann <admin> (VIP)', to);
      assert.equal(mail.text?.trim(), 'Hi Ann <admin>: Pen & Ink; Pad;', to);
      assert.equal(mail.html, '<p>Hi Ann &lt;admin&gt;</p><ul><li>Pen &amp; Ink</li><li>Pad</li></ul><hr class="b">', to);
    }
  });

  it('refuses content that is not valid template syntax (412 naming the part)', async () => {
    const r = await send({ recipients: 'x@example.test', headers: { from: 'f@example.test' }, content: { 'text/html': '{{#each items}}<li>' } });
    assert.equal(r.status, 412, JSON.stringify(r.body));
    assert.match(r.body.response.message, /html/);
  });

  it("refuses Handlebars' internals and raw blocks in plain words, never the engine's own errors", async () => {
    for (const content of ['{{helperMissing}}', '{{lookup}}', '{{if a}}', 'a{{{{raw}}}} {{x}} {{{{/raw}}}}b']) {
      const r = await send({ recipients: 'x@example.test', headers: { from: 'f@example.test' }, content: { 'text/plain': content } });
      assert.equal(r.status, 412, `${content}: ${JSON.stringify(r.body)}`);
      assert.match(r.body.response.message, /not valid template syntax/, content);
      assert.doesNotMatch(r.body.response.message, /Cannot read|properties of undefined|is not a function/, content);
    }
  });

  it('the OpenAPI document declares the new arguments and methods', async () => {
    const doc = await (await fetch(`${h.t.url}/openapi.json`)).json();
    const args = doc.paths['/v.1.1/send_message'].post.requestBody.content['application/json'].schema.properties.arguments.properties;
    for (const name of ['send_at', 'subject', 'from']) assert.ok(args[name], name);
    assert.ok(doc.paths['/v.1.1/cancel_message']);
    assert.ok(doc.paths['/v.1.1/preview_template']);
  });
});

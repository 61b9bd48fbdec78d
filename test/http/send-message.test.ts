// send_message against the real server: every recipients form, header spelling, content form,
// templates with layouts, variables, attachments, recipient_override, uid rules, deliver: false,
// the null.postageapp.com sink, both API versions, and every error in the API's order of checks.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ManualClock } from '../../src/domain/clock.ts';
import { setAccountStatus } from '../../src/operations/accounts.ts';
import type { MessagePayload } from '../../src/domain/message-payload.ts';
import { insertTemplate, updateTemplate } from '../../src/storage/templates.ts';
import { startTestApp, type Seed, type TestApp } from '../helpers/app.ts';

const NOW = Date.UTC(2026, 2, 14, 9, 30, 0);

describe('send_message', () => {
  let t: TestApp;
  let seed: Seed;
  const clock = new ManualClock(NOW);

  before(async () => {
    t = await startTestApp({ clock, config: { maxRecipients: 5 } });
    seed = await t.seed();
    const db = t.app.services.store.db;
    // A three-level chain: welcome -> brand_layout -> outer_layout, each wrapping at {{*}}.
    await t.app.services.store.write(async (trx) => {
      await insertTemplate(trx, seed.projectId, {
        slug: 'outer_layout', name: null, subject: 'Outer subject', from_address: 'Outer <outer@example.com>', parent_slug: null,
        text_body: 'OUTER {{*}} /OUTER {{company}}', html_body: '<html><head></head><body>{{*}}<footer>{{company}}</footer></body></html>', css: 'body{margin:0}',
      }, NOW);
      await insertTemplate(trx, seed.projectId, {
        slug: 'brand_layout', name: null, subject: null, from_address: 'Brand <brand@example.com>', parent_slug: 'outer_layout',
        text_body: 'BRAND[{{*}}]', html_body: '<div class="brand">{{*}}</div>', css: null,
      }, NOW);
      await insertTemplate(trx, seed.projectId, {
        slug: 'welcome', name: null, subject: 'Welcome {{name}}', from_address: null, parent_slug: 'brand_layout',
        text_body: 'Hello {{name}} {{*}}', html_body: '<p>Hello {{name}}</p>{{*}}', css: 'p{color:red}',
      }, NOW);
      await insertTemplate(trx, seed.projectId, {
        slug: 'loop_a', name: null, subject: 's', from_address: null, parent_slug: 'loop_b', text_body: 'a {{*}}', html_body: null, css: null,
      }, NOW);
      await insertTemplate(trx, seed.projectId, {
        slug: 'loop_b', name: null, subject: 's', from_address: null, parent_slug: 'loop_a', text_body: 'b {{*}}', html_body: null, css: null,
      }, NOW);
      await insertTemplate(trx, seed.projectId, {
        slug: 'orphan', name: null, subject: 's', from_address: null, parent_slug: 'gone', text_body: 'x', html_body: null, css: null,
      }, NOW);
    });
    assert.ok(db);
  });
  after(() => t.close());

  let counter = 0;
  /** send_message with a fresh uid unless the body names one. */
  function send(args: unknown, extra: Record<string, unknown> = {}, opts: { version?: '1.0' | '1.1'; json?: boolean } = {}) {
    const body = { api_key: seed.projectKey, uid: `test-${++counter}`, arguments: args, ...extra };
    return t.call('send_message', body, opts);
  }
  async function stored(id: number) {
    const db = t.app.services.store.db;
    const message = await db.selectFrom('messages').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
    const transmissions = await db.selectFrom('transmissions').selectAll().where('message_id', '=', id).orderBy('id').execute();
    return { message, payload: JSON.parse(message.payload) as MessagePayload, transmissions };
  }
  function assertError(r: { status: number; body: any }, http: number, status: string, pattern?: RegExp) {
    assert.equal(r.status, http, JSON.stringify(r.body));
    assert.equal(r.body.response.status, status);
    assert.equal(r.body.data, undefined);
    if (pattern) assert.match(r.body.response.message, pattern);
  }

  describe('acceptance', () => {
    it('answers data.message {id: number, url: string} and stores one message and one transmission per recipient', async () => {
      const r = await send({ recipients: 'ann@example.com', headers: { from: 'me@example.com', subject: 'Hi' }, content: 'hello' });
      assert.equal(r.status, 200);
      assert.equal(r.body.response.status, 'ok');
      assert.equal(r.body.response.uid, `test-${counter}`);
      const { id, url } = r.body.data.message;
      assert.equal(typeof id, 'number');
      assert.equal(url, `${t.app.services.config.publicUrl}/messages/${id}`);
      const { message, payload, transmissions } = await stored(id);
      assert.equal(message.uid, `test-${counter}`);
      assert.equal(message.unique_id, `test-${counter}@posthorn.test`);
      assert.equal(message.project_id, seed.projectId);
      assert.equal(message.recipient_count, 1);
      assert.equal(message.deliver, 1);
      assert.equal(message.created_at, NOW);
      assert.equal(payload.v, 1);
      assert.equal(payload.messageId, `<test-${counter}@posthorn.test>`);
      assert.deepEqual({ from: payload.from, subject: payload.subject, text: payload.text, html: payload.html }, { from: 'me@example.com', subject: 'Hi', text: 'hello', html: null });
      assert.equal(transmissions.length, 1);
      assert.equal(transmissions[0].recipient, 'ann@example.com');
      assert.equal(transmissions[0].status, 'queued');
      assert.equal(transmissions[0].next_attempt_at, NOW);
      assert.equal(transmissions[0].attempts, 0);
      assert.equal(transmissions[0].completed_at, null);
    });

    it('works on both versions and every path form', async () => {
      for (const opts of [{ version: '1.0' as const }, { version: '1.1' as const, json: true }, { version: '1.1' as const }]) {
        const r = await send({ recipients: 'v@example.com', content: 'x' }, {}, opts);
        assert.equal(r.status, 200, JSON.stringify(opts));
        assert.equal(typeof r.body.data.message.id, 'number');
      }
    });

    it('wakes the delivery queue after the commit', async () => {
      let woken = 0;
      const stop = await t.app.services.store.onWake('transmissions', () => woken++);
      try {
        await send({ recipients: 'wake@example.com', content: 'x' });
        assert.ok(woken >= 1);
      } finally {
        await stop();
      }
    });

    it('refuses an account key with 401, and a disabled account with 423', async () => {
      const r = await t.call('send_message', { api_key: seed.accountKey, arguments: { recipients: 'a@example.com', content: 'x' } });
      assertError(r, 401, 'unauthorized', /project/);
      const other = await t.seed('disabled');
      await setAccountStatus(t.app.services, other.accountUid, 'disabled');
      assertError(await t.call('send_message', { api_key: other.projectKey, arguments: { recipients: 'a@example.com', content: 'x' } }), 423, 'locked');
    });

    it('does not wake delivery when nothing is queued (null sink, deliver: false)', async () => {
      let woken = 0;
      const stop = await t.app.services.store.onWake('transmissions', () => woken++);
      try {
        assert.equal((await send({ recipients: 'x@null.postageapp.com', content: 'x' })).status, 200);
        assert.equal((await send({ recipients: 'x@example.com', content: 'x', deliver: false })).status, 200);
        assert.equal(woken, 0);
      } finally {
        await stop();
      }
    });
  });

  describe('recipients', () => {
    const forms: Array<[string, unknown, Array<[string, string | null]>]> = [
      ['a string', 'one@example.com', [['one@example.com', null]]],
      ['a named string', 'Ann Smith <Ann@Example.COM>', [['Ann@example.com', 'Ann Smith']]],
      ['a comma list', 'a@example.com, "Doe, J" <j@example.com>', [['a@example.com', null], ['j@example.com', 'Doe, J']]],
      ['an array', ['a@example.com', 'Bo <b@example.com>'], [['a@example.com', null], ['b@example.com', 'Bo']]],
      ['nested arrays', [['a@example.com', ['b@example.com']], 'c@example.com, d@example.com'], [['a@example.com', null], ['b@example.com', null], ['c@example.com', null], ['d@example.com', null]]],
      ['an IDN address', 'user@bücher.example', [['user@bücher.example', null]]],
    ];
    for (const [name, recipients, expected] of forms) {
      it(`accepts ${name}`, async () => {
        const r = await send({ recipients, content: 'x' });
        assert.equal(r.status, 200, JSON.stringify(r.body));
        const { transmissions, message } = await stored(r.body.data.message.id);
        assert.deepEqual(transmissions.map((tr) => [tr.recipient, tr.recipient_name]), expected);
        assert.equal(message.recipient_count, expected.length);
      });
    }

    it('accepts an object keyed by address with per-recipient variables', async () => {
      const r = await send({ recipients: { 'a@example.com': { name: 'Ann', n: 2 }, 'Bo <b@example.com>': {}, 'c@example.com': null }, content: 'Hi {{name}}', variables: { name: 'you' } });
      assert.equal(r.status, 200);
      const { transmissions, payload } = await stored(r.body.data.message.id);
      assert.deepEqual(
        transmissions.map((tr) => [tr.recipient, tr.recipient_name, tr.variables && JSON.parse(tr.variables)]),
        [['a@example.com', null, { name: 'Ann', n: 2 }], ['b@example.com', 'Bo', null], ['c@example.com', null, null]],
      );
      assert.deepEqual(payload.variables, { name: 'you' });
    });

    it('sends one copy to an address given twice (first occurrence wins)', async () => {
      const r = await send({ recipients: ['Ann <a@example.com>', 'A@EXAMPLE.com', 'a@example.com, b@example.com'], content: 'x' });
      const { transmissions } = await stored(r.body.data.message.id);
      assert.deepEqual(transmissions.map((tr) => [tr.recipient, tr.recipient_name]), [['a@example.com', 'Ann'], ['b@example.com', null]]);
    });

    it('gives every Cc and Bcc address a copy; Cc stays a header, Bcc never appears', async () => {
      const r = await send({ recipients: 'a@example.com', headers: { CC: 'c@example.com, a@example.com', bcc: ['Hidden <h@example.com>'] }, content: 'x' });
      assert.equal(r.status, 200, JSON.stringify(r.body));
      const { transmissions, payload, message } = await stored(r.body.data.message.id);
      assert.deepEqual(transmissions.map((tr) => tr.recipient), ['a@example.com', 'c@example.com', 'h@example.com']);
      assert.equal(message.recipient_count, 3);
      assert.deepEqual(payload.headers, { Cc: 'c@example.com, a@example.com' });
      assert.doesNotMatch(JSON.stringify(payload), /h@example\.com/);
    });

    it('refuses invalid, missing and too many recipients with 412', async () => {
      assertError(await send({ recipients: 'good@example.com, bad@', content: 'x' }), 412, 'precondition_failed', /"bad@"/);
      assertError(await send({ recipients: ['nobody'], content: 'x' }), 412, 'precondition_failed', /"nobody"/);
      assertError(await send({ recipients: { 'x@localhost': {} }, content: 'x' }), 412, 'precondition_failed', /x@localhost/);
      assertError(await send({ content: 'x' }), 412, 'precondition_failed', /No recipients/);
      assertError(await send({ recipients: [], content: 'x' }), 412, 'precondition_failed', /No recipients/);
      assertError(await send({ recipients: '', content: 'x' }), 412, 'precondition_failed', /No recipients/);
      const six = Array.from({ length: 6 }, (_, i) => `r${i}@example.com`);
      assertError(await send({ recipients: six, content: 'x' }), 412, 'precondition_failed', /at most 5/);
      assertError(await send({ recipients: six.slice(0, 4), headers: { cc: 'c1@example.com, c2@example.com' }, content: 'x' }), 412, 'precondition_failed', /at most 5/);
      assert.equal((await send({ recipients: six.slice(0, 5), content: 'x' })).status, 200);
      assertError(await send({ recipients: 'a@example.com', headers: { cc: 'not-an-address' }, content: 'x' }), 412, 'precondition_failed', /Cc address "not-an-address"/);
      assertError(await send({ recipients: 'a@example.com', headers: { from: 'broken' }, content: 'x' }), 412, 'precondition_failed', /From address/);
      assertError(await send({ recipients: 'a@example.com', headers: { reply_to: 'x@' }, content: 'x' }), 412, 'precondition_failed', /Reply-To/);
    });

    it('refuses recipients of the wrong type with 406 call_error naming the field', async () => {
      assertError(await send({ recipients: 42, content: 'x' }), 406, 'call_error', /recipients/);
      assertError(await send({ recipients: ['a@example.com', 7], content: 'x' }), 406, 'call_error', /recipients\[1\]/);
      // A map value that is not an object is a recipient without variables.
      assert.equal((await send({ recipients: { 'a@example.com': 'Ann' }, content: 'x' })).status, 200);
    });
  });

  describe('headers and content', () => {
    it('reads every spelling of the known headers and keeps custom ones', async () => {
      for (const headers of [
        { from: 'F <f@example.com>', subject: 'S', 'reply-to': 'r@example.com', 'X-Custom': 'v' },
        { From: 'F <f@example.com>', Subject: 'S', 'Reply-To': 'r@example.com', 'X-Custom': 'v' },
        { FROM: 'F <f@example.com>', SUBJECT: 'S', reply_to: 'r@example.com', 'X-Custom': 'v', mime_version: '1.0', charset: 'UTF-8' },
      ]) {
        const r = await send({ recipients: 'a@example.com', headers, content: 'x' });
        assert.equal(r.status, 200, JSON.stringify(r.body));
        const { payload, message } = await stored(r.body.data.message.id);
        assert.equal(payload.from, 'F <f@example.com>');
        assert.equal(payload.subject, 'S');
        assert.deepEqual(payload.headers, { 'Reply-To': 'r@example.com', 'X-Custom': 'v' });
        assert.equal(message.subject, 'S');
        assert.equal(message.from_address, 'F <f@example.com>');
      }
    });

    it('refuses a header value with a line break (406 naming the header) and invalid header names', async () => {
      assertError(await send({ recipients: 'a@example.com', headers: { subject: 'Hi\r\nBcc: victim@example.com' }, content: 'x' }), 406, 'call_error', /"subject".*line break/);
      assertError(await send({ recipients: 'a@example.com', headers: { 'X-Tag': 'a\nb' }, content: 'x' }), 406, 'call_error', /"X-Tag"/);
      assertError(await send({ recipients: 'a@example.com', headers: { 'Bad Name': 'v' }, content: 'x' }), 406, 'call_error', /"Bad Name"/);
      assertError(await send({ recipients: 'a@example.com', headers: { subject: 'a', Subject: 'b' }, content: 'x' }), 406, 'call_error', /twice/);
      assertError(await send({ recipients: 'a@example.com', headers: { To: 'b@example.com' }, content: 'x' }), 406, 'call_error', /recipients/);
      assertError(await send({ recipients: 'a@example.com', headers: 'From: x', content: 'x' }), 406, 'call_error', /headers/);
    });

    it('takes content as an object with null or missing parts, as a string, or under the alias message', async () => {
      const cases: Array<[Record<string, unknown>, { text: string | null; html: string | null }]> = [
        [{ content: { 'text/plain': 'T', 'text/html': '<b>H</b>' } }, { text: 'T', html: '<b>H</b>' }],
        [{ content: { 'text/plain': null, 'text/html': '<b>H</b>' } }, { text: null, html: '<b>H</b>' }],
        [{ content: { 'text/plain': 'only' } }, { text: 'only', html: null }],
        [{ content: 'plain string' }, { text: 'plain string', html: null }],
        [{ message: { 'text/plain': 'via alias' } }, { text: 'via alias', html: null }],
        [{ content: { 'text/html': '<p>x</p>', 'text/css': 'p{color:blue}' } }, { text: null, html: '<style type="text/css">\np{color:blue}\n</style><p>x</p>' }],
      ];
      for (const [args, expected] of cases) {
        const r = await send({ recipients: 'a@example.com', ...args });
        assert.equal(r.status, 200, JSON.stringify(r.body));
        const { payload } = await stored(r.body.data.message.id);
        assert.deepEqual({ text: payload.text, html: payload.html }, expected, JSON.stringify(args));
      }
    });

    it('refuses malformed content with 406, and an empty message with 412', async () => {
      assertError(await send({ recipients: 'a@example.com', content: ['x'] }), 406, 'call_error', /content/);
      assertError(await send({ recipients: 'a@example.com', content: { 'text/plain': 5 } }), 406, 'call_error', /text\/plain/);
      assertError(await send({ recipients: 'a@example.com', content: { 'text/markdown': '*x*' } }), 406, 'call_error', /text\/markdown/);
      assertError(await send({ recipients: 'a@example.com', content: 'x', message: 'y' }), 406, 'call_error', /not both/);
      assertError(await send({ recipients: 'a@example.com' }), 412, 'precondition_failed', /empty/);
    });
  });

  describe('templates and variables', () => {
    it('merges a template into every layout level at {{*}}, with CSS inlined and variables kept for delivery', async () => {
      const r = await send({ recipients: { 'a@example.com': { name: 'Ann' } }, template: 'welcome', variables: { name: 'friend', company: 'ACME' } });
      assert.equal(r.status, 200, JSON.stringify(r.body));
      const { payload, message, transmissions } = await stored(r.body.data.message.id);
      assert.equal(message.template, 'welcome');
      assert.equal(payload.subject, 'Welcome {{name}}');
      assert.equal(payload.from, 'Brand <brand@example.com>');
      assert.equal(payload.text, 'OUTER BRAND[Hello {{name}} ] /OUTER {{company}}');
      assert.match(payload.html!, /^<html><head><style type="text\/css">\nbody\{margin:0\}\n<\/style><style type="text\/css">\np\{color:red\}\n<\/style><\/head>/);
      assert.match(payload.html!, /<body><div class="brand"><p>Hello \{\{name\}\}<\/p><\/div><footer>\{\{company\}\}<\/footer><\/body><\/html>$/);
      assert.deepEqual(payload.variables, { name: 'friend', company: 'ACME' });
      assert.deepEqual(JSON.parse(transmissions[0].variables!), { name: 'Ann' });
    });

    it('wraps the call content into the template at {{*}}; call headers win over the template', async () => {
      const r = await send({
        recipients: 'a@example.com',
        template: 'welcome',
        headers: { subject: 'Mine {{name}}', from: 'Me <me@example.com>' },
        content: { 'text/plain': 'BODY', 'text/html': '<i>BODY</i>' },
      });
      assert.equal(r.status, 200, JSON.stringify(r.body));
      const { payload } = await stored(r.body.data.message.id);
      assert.equal(payload.subject, 'Mine {{name}}');
      assert.equal(payload.from, 'Me <me@example.com>');
      assert.equal(payload.text, 'OUTER BRAND[Hello {{name}} BODY] /OUTER {{company}}');
      assert.match(payload.html!, /<div class="brand"><p>Hello \{\{name\}\}<\/p><i>BODY<\/i><\/div>/);
    });

    it('uses the sample templates every new project starts with', async () => {
      const r = await send({ recipients: 'a@example.com', template: 'sample_child_template', variables: { name: 'Ann' } });
      assert.equal(r.status, 200);
      const { payload } = await stored(r.body.data.message.id);
      assert.equal(payload.subject, 'Sample message for {{name}}');
      assert.match(payload.text!, /^Hello \{\{name\}\},[\s\S]*Sent with Posthorn$/);
      assert.match(payload.html!, /<body><p>Hello \{\{name\}\},<\/p>.*<hr><p>Sent with Posthorn<\/p><\/body>/);
    });

    it('freezes what was accepted: a later template edit does not change queued mail', async () => {
      const r = await send({ recipients: 'a@example.com', template: 'welcome' });
      const before = await stored(r.body.data.message.id);
      const db = t.app.services.store.db;
      const row = await db.selectFrom('templates').selectAll().where('project_id', '=', seed.projectId).where('slug', '=', 'brand_layout').executeTakeFirstOrThrow();
      await t.app.services.store.write((trx) => updateTemplate(trx, row.id, { text_body: 'CHANGED {{*}}', from_address: 'New <new@example.com>' }, NOW + 1));
      try {
        const after = await stored(r.body.data.message.id);
        assert.deepEqual(after.payload, before.payload);
        assert.equal(after.payload.from, 'Brand <brand@example.com>');
        const again = await send({ recipients: 'a@example.com', template: 'welcome' });
        assert.match((await stored(again.body.data.message.id)).payload.text!, /CHANGED/);
      } finally {
        await t.app.services.store.write((trx) => updateTemplate(trx, row.id, { text_body: 'BRAND[{{*}}]', from_address: 'Brand <brand@example.com>' }, NOW + 2));
      }
    });

    it('refuses unknown templates, layout loops and missing layouts with 412', async () => {
      assertError(await send({ recipients: 'a@example.com', template: 'nope' }), 412, 'precondition_failed', /nope/);
      assertError(await send({ recipients: 'a@example.com', template: 'loop_a' }), 412, 'precondition_failed', /loop/);
      assertError(await send({ recipients: 'a@example.com', template: 'orphan' }), 412, 'precondition_failed', /gone/);
      assertError(await send({ recipients: 'a@example.com', template: ['welcome'] }), 406, 'call_error', /template/);
    });

    it('does not see another project\'s templates', async () => {
      const other = await t.seed('other');
      const r = await t.call('send_message', { api_key: other.projectKey, arguments: { recipients: 'a@example.com', template: 'welcome' } });
      assertError(r, 412, 'precondition_failed', /welcome/);
    });

    it('keeps variables as JSON (lists and objects for the template language); refuses line breaks where they reach a header', async () => {
      const r = await send({ recipients: { 'a@example.com': { flag: false } }, content: '{{n}} {{flag}}', variables: { n: 3.5, flag: true, skip: null } });
      assert.equal(r.status, 200);
      const { payload, transmissions } = await stored(r.body.data.message.id);
      assert.deepEqual(payload.variables, { n: 3.5, flag: true });
      assert.deepEqual(JSON.parse(transmissions[0].variables!), { flag: false });
      // Lists and objects are for {{#each}} and {{a.b}} (docs/templates.md).
      const structured = await send({ recipients: { 'a@example.com': { list: [1] } }, content: '{{#each list}}{{this}}{{/each}} {{obj.a}}', variables: { obj: { a: 1 } } });
      assert.equal(structured.status, 200, JSON.stringify(structured.body));
      assertError(await send({ recipients: 'a@example.com', content: 'x', variables: 'name=x' }), 406, 'call_error', /variables/);
      assertError(
        await send({ recipients: { 'a@example.com': { name: 'x\r\nBcc: v@example.com' } }, template: 'welcome' }),
        406, 'call_error', /"name".*Subject/,
      );
      assertError(
        await send({ recipients: 'a@example.com', headers: { 'X-Ref': 'ref {{ref}}' }, content: 'x', variables: { ref: '1\nBcc: v@example.com' } }),
        406, 'call_error', /"ref".*X-Ref/,
      );
      // The same value in a body part is fine: bodies may hold line breaks.
      assert.equal((await send({ recipients: { 'a@example.com': { body: 'line1\nline2' } }, content: '{{body}}' })).status, 200);
    });
  });

  describe('attachments', () => {
    it('stores attachments with whitespace removed from the base64', async () => {
      const pdf = Buffer.from('%PDF-1.4 fake').toString('base64');
      const r = await send({
        recipients: 'a@example.com',
        content: 'see attached',
        attachments: {
          'file.pdf': { content_type: 'application/pdf', content: pdf.slice(0, 8) + '\n' + pdf.slice(8), extra: 'ignored' },
          'notes.txt': { content_type: 'text/plain; charset=utf-8', content: Buffer.from('hi').toString('base64') },
        },
      });
      assert.equal(r.status, 200, JSON.stringify(r.body));
      const { payload } = await stored(r.body.data.message.id);
      assert.deepEqual(payload.attachments, [
        { filename: 'file.pdf', contentType: 'application/pdf', content: pdf },
        { filename: 'notes.txt', contentType: 'text/plain; charset=utf-8', content: 'aGk=' },
      ]);
    });

    it('refuses bad base64 with 406 naming the file', async () => {
      const r = await send({ recipients: 'a@example.com', content: 'x', attachments: { 'broken.pdf': { content_type: 'application/pdf', content: '***' } } });
      assertError(r, 406, 'call_error', /"broken\.pdf".*base64/);
    });

    it('refuses multipart/* and message/* but message/rfc822 content types, and an attached message that cannot be written as it is, with 406 naming the file', async () => {
      const b64 = (text: string) => Buffer.from(text).toString('base64');
      const attach = (filename: string, contentType: string, content: string) =>
        send({ recipients: 'a@example.com', content: 'x', attachments: { [filename]: { content_type: contentType, content: b64(content) } } });
      assertError(await attach('parts.bin', 'multipart/mixed; boundary=x', '--x\r\n\r\nhi\r\n--x--\r\n'), 406, 'call_error', /"parts\.bin".*"multipart\/mixed"/);
      assertError(await attach('alt.bin', 'Multipart/Alternative', 'hi'), 406, 'call_error', /"alt\.bin".*"multipart\/alternative"/);
      assertError(await attach('part.msg', 'message/partial; id=1; number=1', 'hi'), 406, 'call_error', /"part\.msg".*"message\/partial"/);
      assertError(await attach('status.txt', 'message/delivery-status', 'Reporting-MTA: dns; x'), 406, 'call_error', /"status\.txt".*"message\/delivery-status"/);
      const inner = 'From: a@example.com\r\nSubject: inner\r\n\r\nbody\r\n';
      assertError(await attach('cr.eml', 'message/rfc822', inner.replace('body', 'a\r.\rb')), 406, 'call_error', /"cr\.eml".*CR that does not end a line/);
      assertError(await attach('nul.eml', 'message/rfc822', inner.replace('body', 'a\0b')), 406, 'call_error', /"nul\.eml".*NUL/);
      assertError(await attach('long.eml', 'message/rfc822', inner.replace('body', 'x'.repeat(999))), 406, 'call_error', /"long\.eml".*998 octets/);
      // An attached message, with CRLF or LF line ends, and a line of exactly 998 octets.
      for (const ok of [inner, inner.replace(/\r\n/g, '\n'), inner.replace('body', 'x'.repeat(998))]) {
        const r = await attach('fwd.eml', 'message/rfc822', ok);
        assert.equal(r.status, 200, JSON.stringify(r.body));
      }
    });
  });

  describe('recipient_override, deliver: false and the null.postageapp.com sink', () => {
    it('completes null.postageapp.com addresses at once with SMTP_250, and queues the others', async () => {
      const r = await send({ recipients: ['test@null.postageapp.com', 'real@example.com', 'x@NULL.postageapp.COM'], content: 'x' });
      const { transmissions } = await stored(r.body.data.message.id);
      assert.deepEqual(transmissions.map((tr) => [tr.recipient, tr.status, tr.result_code]), [
        ['test@null.postageapp.com', 'completed', 'SMTP_250'],
        ['real@example.com', 'queued', null],
        ['x@null.postageapp.com', 'completed', 'SMTP_250'],
      ]);
      assert.equal(transmissions[0].completed_at, NOW);
      assert.match(transmissions[0].result_message!, /null\.postageapp\.com/);
    });

    it('records the original recipients and sends every copy to the override (in arguments or at the top level)', async () => {
      for (const [args, extra] of [
        [{ recipients: 'real@example.com', content: 'x', recipient_override: 'test2@null.postageapp.com' }, {}],
        [{ recipients: 'real@example.com', content: 'x' }, { recipient_override: 'test2@null.postageapp.com' }],
      ] as const) {
        const r = await send(args, extra);
        assert.equal(r.status, 200, JSON.stringify(r.body));
        const { payload, transmissions } = await stored(r.body.data.message.id);
        assert.equal(payload.recipientOverride, 'test2@null.postageapp.com');
        assert.equal(transmissions[0].recipient, 'real@example.com');
        assert.equal(transmissions[0].status, 'completed');
        assert.equal(transmissions[0].result_code, 'SMTP_250');
      }
      const queued = await send({ recipients: 'test@null.postageapp.com', content: 'x', recipient_override: 'Dev <dev@example.com>' });
      const q = await stored(queued.body.data.message.id);
      assert.equal(q.payload.recipientOverride, 'dev@example.com');
      assert.equal(q.transmissions[0].status, 'queued');
    });

    it('refuses an invalid override with 412', async () => {
      assertError(await send({ recipients: 'a@example.com', content: 'x', recipient_override: 'nope' }), 412, 'precondition_failed', /recipient_override/);
      assertError(await send({ recipients: 'a@example.com', content: 'x' }, { recipient_override: 'nope@' }), 412, 'precondition_failed', /recipient_override/);
    });

    it('deliver: false (or "false") validates and stores, but never sends', async () => {
      for (const deliver of [false, 'false']) {
        const r = await send({ recipients: ['a@example.com', 'b@null.postageapp.com'], content: 'x', deliver });
        assert.equal(r.status, 200);
        const { message, transmissions } = await stored(r.body.data.message.id);
        assert.equal(message.deliver, 0);
        for (const tr of transmissions) {
          assert.equal(tr.status, 'completed');
          assert.equal(tr.result_code, 'NOT_SENT');
          assert.match(tr.result_message!, /deliver: false/);
        }
      }
      assertError(await send({ recipients: 'bad', content: 'x', deliver: false }), 412, 'precondition_failed');
      assertError(await send({ recipients: 'a@example.com', content: 'x', deliver: 'maybe' }), 406, 'call_error', /deliver/);
    });
  });

  describe('tracking', () => {
    it('stores the per-message tracking opt-in (true, "false", or absent: the project decides)', async () => {
      for (const [tracking, expected] of [[true, true], ['false', false], [undefined, null], [null, null]] as const) {
        const args: Record<string, unknown> = { recipients: 'a@example.com', content: { 'text/html': '<a href="https://example.com/">x</a>' } };
        if (tracking !== undefined) args.tracking = tracking;
        const r = await send(args);
        assert.equal(r.status, 200, JSON.stringify(r.body));
        const { payload } = await stored(r.body.data.message.id);
        assert.equal(payload.tracking, expected, `tracking ${String(tracking)}`);
      }
      assertError(await send({ recipients: 'a@example.com', content: 'x', tracking: 'sometimes' }), 406, 'call_error', /tracking/);
    });
  });

  describe('uid', () => {
    it('stores a numeric uid as its text and echoes it with its JSON type', async () => {
      const r = await t.call('send_message', { api_key: seed.projectKey, uid: 987654, arguments: { recipients: 'a@example.com', content: 'x' } });
      assert.equal(r.status, 200);
      assert.equal(r.body.response.uid, 987654);
      const { message } = await stored(r.body.data.message.id);
      assert.equal(message.uid, '987654');
      assert.equal(message.unique_id, '987654@posthorn.test');
    });

    it('refuses a reused uid with 400, also across versions; another project may use it', async () => {
      const body = { api_key: seed.projectKey, uid: 'order-1001', arguments: { recipients: 'a@example.com', content: 'x' } };
      assert.equal((await t.call('send_message', body)).status, 200);
      const again = await t.call('send_message', { ...body, arguments: { recipients: 'other@example.com', content: 'different' } }, { version: '1.0' });
      assertError(again, 400, 'bad_request');
      assert.equal(again.body.response.message, 'Uid order-1001 already exists. Assuming message duplication.');
      assert.equal(again.body.response.uid, 'order-1001');
      const other = await t.seed('uid-other');
      assert.equal((await t.call('send_message', { ...body, api_key: other.projectKey })).status, 200);
      const count = await t.app.services.store.db.selectFrom('messages').select((eb) => eb.fn.countAll<number>().as('n')).where('uid', '=', 'order-1001').executeTakeFirstOrThrow();
      assert.equal(Number(count.n), 2);
    });

    it('derives the uid from the arguments when none (or "") is given: an identical resend is a duplicate', async () => {
      const args = { recipients: 'hash@example.com', content: { 'text/plain': 'same' }, variables: { a: 1 } };
      const first = await t.call('send_message', { api_key: seed.projectKey, arguments: args });
      assert.equal(first.status, 200);
      assert.equal(first.body.response.uid, null);
      const { message, payload } = await stored(first.body.data.message.id);
      assert.match(message.uid, /^[0-9a-f]{64}$/);
      assert.equal(payload.messageId, `<${message.uid}@posthorn.test>`);
      const reordered = { variables: { a: 1 }, content: { 'text/plain': 'same', 'text/html': null }, recipients: 'hash@example.com' };
      const second = await t.call('send_message', { api_key: seed.projectKey, uid: '', arguments: reordered });
      assertError(second, 400, 'bad_request', new RegExp(`Uid ${message.uid} already exists`));
      const changed = await t.call('send_message', { api_key: seed.projectKey, arguments: { ...args, variables: { a: 2 } } });
      assert.equal(changed.status, 200);
    });

    it('keeps unique_id as given and makes the Message-ID safe for any uid', async () => {
      const r = await send({ recipients: 'a@example.com', content: 'x' }, { uid: 'welcome:2026-03-14.7' });
      const { message, payload } = await stored(r.body.data.message.id);
      assert.equal(message.unique_id, 'welcome:2026-03-14.7@posthorn.test');
      assert.equal(payload.messageId, '<welcome%3A2026-03-14.7@posthorn.test>');
      assertError(await send({ recipients: 'a@example.com', content: 'x' }, { uid: { a: 1 } }), 406, 'call_error', /uid/);
      assertError(await send({ recipients: 'a@example.com', content: 'x' }, { uid: 'u'.repeat(300) }), 406, 'call_error', /255/);
    });
  });

  describe('order of checks', () => {
    it('answers missing or empty arguments with 400 before anything else in them', async () => {
      for (const body of [{}, { arguments: {} }, { arguments: null }, { arguments: { recipients: null, content: null } }]) {
        const r = await t.call('send_message', { api_key: seed.projectKey, ...body });
        assertError(r, 400, 'bad_request', /arguments/);
      }
      assertError(await t.call('send_message', { api_key: seed.projectKey, arguments: 'x' }), 406, 'call_error', /arguments/);
      assertError(await t.call('send_message', { api_key: 'wrong', arguments: {} }), 401, 'unauthorized');
    });

    it('puts call errors (406) before the template and recipient checks (412)', async () => {
      const r = await send({ recipients: 'bad', template: 'nope', headers: { subject: 'a\nb' } });
      assertError(r, 406, 'call_error', /subject/);
    });

    it('checks the template before the recipients: both wrong gives the template\'s 412', async () => {
      assertError(await send({ recipients: 'not an address', template: 'missing_template' }), 412, 'precondition_failed', /missing_template/);
      assertError(await send({ template: 'missing_template' }), 412, 'precondition_failed', /missing_template/);
    });

    it('puts 412 before the duplicate uid (400)', async () => {
      const body = { api_key: seed.projectKey, uid: 'order-check', arguments: { recipients: 'a@example.com', content: 'x' } };
      assert.equal((await t.call('send_message', body)).status, 200);
      assertError(await t.call('send_message', { ...body, arguments: { recipients: 'bad', content: 'x' } }), 412, 'precondition_failed');
      assertError(await t.call('send_message', { ...body, arguments: { recipients: 'a@example.com', template: 'nope' } }), 412, 'precondition_failed');
      assertError(await t.call('send_message', body), 400, 'bad_request', /already exists/);
    });

    it('stores nothing for a refused request', async () => {
      const db = t.app.services.store.db;
      const count = async () => Number((await db.selectFrom('transmissions').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n);
      const before = await count();
      await send({ recipients: 'a@example.com, bad', content: 'x' });
      await send({ recipients: 'a@example.com', content: 'x', attachments: { 'x.bin': { content: '!!' } } });
      assert.equal(await count(), before);
    });
  });
});

describe('send_message at the default recipient limit', () => {
  let t: TestApp;
  let seed: Seed;
  before(async () => {
    t = await startTestApp();
    seed = await t.seed();
  });
  after(() => t.close());

  it('accepts 1000 recipients in one message (one transmission each) and refuses 1001', async () => {
    assert.equal(t.app.services.config.maxRecipients, 1000);
    const recipients = Object.fromEntries(Array.from({ length: 1000 }, (_, i) => [`r${i}@example.com`, { n: i }]));
    const r = await t.call('send_message', { api_key: seed.projectKey, uid: 'big', arguments: { recipients, content: 'Hi {{n}}' } });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    const rows = await t.app.services.store.db.selectFrom('transmissions').select(['recipient', 'variables', 'status']).where('message_id', '=', r.body.data.message.id).orderBy('id').execute();
    assert.equal(rows.length, 1000);
    assert.deepEqual(rows[999], { recipient: 'r999@example.com', variables: '{"n":999}', status: 'queued' });
    const over = await t.call('send_message', { api_key: seed.projectKey, uid: 'bigger', arguments: { recipients: [...Object.keys(recipients), 'one-more@example.com'], content: 'x' } });
    assert.equal(over.status, 412);
    assert.match(over.body.response.message, /1001 addresses.*at most 1000/);
  });
});

// The dashboard over HTTP against a real server on both databases: sign-in and sessions, CSRF,
// rate limits, scoping (another account's or project's message is not found), escaping of
// attacker-controlled content in the HTML source, the message search and its paging, the frame and
// source routes, template preview, suppressions and key rotation.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { SIGN_IN_LIMITS } from '../../src/operations/users.ts';
import { startTestApp, type Seed, type TestApp } from '../helpers/app.ts';
import { SessionClient, signedInClient } from './session-client.ts';

const SCRIPT = '<script>alert(1)</script>';
/** A display name that tries to break out of an HTML attribute. */
const NAME = "Eve' autofocus onfocus='alert(5)";

describe('dashboard over HTTP', () => {
  let t: TestApp;
  let seed: Seed;
  let other: Seed;
  let client: SessionClient;
  let messageId: number;

  before(async () => {
    t = await startTestApp();
    seed = await t.seed('dash');
    other = await t.seed('other');
    ({ client } = await signedInClient(t, seed.accountUid));
    const sent = await t.call('send_message', {
      api_key: seed.projectKey,
      uid: 'hostile-1',
      arguments: {
        recipients: [`"${NAME}" <victim@example.com>`],
        headers: { subject: `Hello ${SCRIPT}`, from: 'sender@example.com', 'X-Note': '"><img src=x onerror=alert(4)>' },
        content: { 'text/plain': `plain ${SCRIPT}`, 'text/html': `<p>html</p>${SCRIPT}<img src="https://remote.example/pixel.gif">` },
        attachments: { [`${SCRIPT}.txt`]: { content_type: 'text/plain', content: Buffer.from('x').toString('base64') } },
      },
    });
    assert.equal(sent.status, 200, JSON.stringify(sent.body));
    messageId = sent.body.data.message.id;
  });
  after(() => t.close());

  it('sends a visitor without a session to the sign-in page, and refuses a wrong password', async () => {
    const anon = new SessionClient(t.url);
    const r = await anon.get('/messages');
    assert.equal(r.status, 303);
    assert.equal(r.headers.get('location'), '/login?next=%2Fmessages');
    const login = await anon.get('/login');
    assert.equal(login.status, 200);
    assert.match(login.headers.get('content-security-policy') ?? '', /script-src 'self'/);
    const bad = await anon.post('/login', { email: 'nobody@example.test', password: 'wrong-password' });
    assert.equal(bad.status, 401);
    assert.match(bad.text, /Wrong email or password/);
    assert.equal(anon.cookies.has('posthorn_session'), false);
  });

  it('sets an HttpOnly SameSite=Lax session cookie and strict security headers', async () => {
    const { password, email } = await signedInClient(t, seed.accountUid);
    const c = new SessionClient(t.url);
    await c.get('/login');
    const res = await fetch(`${t.url}/login`, {
      method: 'POST',
      redirect: 'manual',
      headers: { cookie: `posthorn_login=${c.cookies.get('posthorn_login')}`, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ _csrf: c.cookies.get('posthorn_login')!, email, password }),
    });
    assert.equal(res.status, 303);
    const cookie = res.headers.getSetCookie().find((l) => l.startsWith('posthorn_session='))!;
    assert.match(cookie, /HttpOnly/i);
    assert.match(cookie, /SameSite=Lax/i);
    assert.match(cookie, /Max-Age=\d+/);
    const page = await client.get('/');
    const csp = page.headers.get('content-security-policy') ?? '';
    for (const d of ["default-src 'self'", "script-src 'self'", "object-src 'none'", "frame-ancestors 'none'"]) assert.ok(csp.includes(d), `${d} in ${csp}`);
    assert.equal(page.headers.get('x-content-type-options'), 'nosniff');
    assert.ok(page.headers.get('referrer-policy'));
    assert.doesNotMatch(page.text, /<script>(?!<\/script>)/, 'no inline script');
    assert.doesNotMatch(page.text, / style=/, 'no inline style');
  });

  it('answers the account url get_account_info gives: the overview, for a user of that account alone', async () => {
    const info = await t.call('get_account_info', { api_key: seed.projectKey });
    const url = new URL(info.body.data.account.url);
    const mine = await client.get(url.pathname);
    assert.equal(mine.status, 303);
    assert.equal(mine.headers.get('location'), '/');
    assert.equal((await client.get('/accounts/someone-else')).status, 404);
  });

  it('overview: a copy scheduled ahead is shown as next scheduled, never as due', async () => {
    const later = await t.seed('later');
    const { client: c } = await signedInClient(t, later.accountUid);
    const sendAt = new Date(Date.now() + 86_400_000);
    sendAt.setUTCMilliseconds(0);
    const sent = await t.call('send_message', {
      api_key: later.projectKey,
      arguments: { recipients: ['a@later.example'], send_at: sendAt.toISOString(), headers: { subject: 's', from: 'x@later.example' }, content: { 'text/plain': 'x' } },
    });
    assert.equal(sent.status, 200, JSON.stringify(sent.body));
    const page = await c.get('/');
    assert.equal(page.status, 200);
    assert.doesNotMatch(page.text, /oldest due/);
    assert.ok(page.text.includes(`next scheduled <time datetime="${sendAt.toISOString()}">`), page.text.slice(page.text.indexOf('Queue now'), page.text.indexOf('Queue now') + 300));
  });

  it('escapes the subject, recipient name, headers, text and filename of a message everywhere', async () => {
    const list = await client.get(`/messages?project=${seed.projectUid}`);
    assert.equal(list.status, 200);
    const view = await client.get(`/messages/${messageId}`);
    assert.equal(view.status, 200);
    for (const page of [list.text, view.text]) {
      assert.ok(!page.includes(SCRIPT), 'the raw script never reaches the page');
      assert.ok(!page.includes('<img src=x'), 'no raw attribute injection');
    }
    assert.ok(view.text.includes('Hello &lt;script&gt;alert(1)&lt;/script&gt;'));
    assert.ok(!view.text.includes(NAME));
    assert.ok(view.text.includes('Eve&#39; autofocus onfocus=&#39;alert(5)'));
    assert.ok(view.text.includes('&lt;script&gt;alert(1)&lt;/script&gt;.txt'));
    assert.ok(view.text.includes('plain &lt;script&gt;'));
    assert.ok(view.text.includes('&quot;&gt;&lt;img src=x onerror=alert(4)&gt;'));
    // The HTML part only inside a sandboxed frame, under a policy that runs nothing and fetches nothing remote.
    assert.match(view.text, /<iframe[^>]* sandbox src="\/messages\/\d+\/html"/);
    const frame = await client.get(`/messages/${messageId}/html`);
    const csp = frame.headers.get('content-security-policy') ?? '';
    assert.match(csp, /^sandbox;/);
    assert.match(csp, /default-src 'none'/);
    assert.doesNotMatch(csp, /script-src/);
    assert.doesNotMatch(csp, /https:/);
    const withImages = await client.get(`/messages/${messageId}/html?images=1`);
    assert.match(withImages.headers.get('content-security-policy') ?? '', /img-src data: cid: https: http:/);
  });

  it('offers the MIME source, composed like delivery composes it', async () => {
    const r = await client.get(`/messages/${messageId}/source`);
    assert.equal(r.status, 200);
    assert.equal(r.headers.get('content-type'), 'message/rfc822');
    assert.match(r.headers.get('content-disposition') ?? '', /attachment; filename="message-\d+\.eml"/);
    assert.match(r.text, /^To: /);
    assert.match(r.text, /Message-ID: <hostile-1@posthorn\.test>/);
    assert.match(r.text, /Subject: /);
  });

  it('answers the same content and source through the API (get_message_content, get_message_source)', async () => {
    const content = await t.call('get_message_content', { api_key: seed.projectKey, uid: 'hostile-1' });
    assert.equal(content.status, 200, JSON.stringify(content.body));
    const m = content.body.data.message;
    assert.equal(m.uid, 'hostile-1');
    assert.equal(m.subject, `Hello ${SCRIPT}`);
    assert.equal(m.recipient, 'victim@example.com');
    assert.ok(m.html.includes(SCRIPT));
    assert.deepEqual(m.attachments, [{ filename: `${SCRIPT}.txt`, content_type: 'text/plain', size: 1 }]);
    const source = await t.call('get_message_source', { api_key: seed.projectKey, arguments: { uid: 'hostile-1' } });
    assert.equal(source.status, 200);
    const page = await client.get(`/messages/${messageId}/source`);
    // The same composition; only MIME boundaries are random per build.
    const sameBoundaries = (mime: string) => mime.replace(/_NmP-[0-9a-f]+-Part/g, '_NmP-B-Part');
    assert.equal(sameBoundaries(Buffer.from(source.body.data.message.source, 'base64').toString('utf8')), sameBoundaries(page.text));
    // Variables are rendered as delivery renders them: HTML-escaped in the HTML part only.
    const escaped = await t.call('send_message', {
      api_key: seed.projectKey,
      uid: 'escaped-1',
      arguments: { recipients: 'e@example.com', headers: { from: 'sender@example.com', subject: 'S {{name}}' }, content: { 'text/html': '<p>{{name}}</p>', 'text/plain': 't {{name}}' }, variables: { name: '<b>bold</b>' } },
    });
    assert.equal(escaped.status, 200, JSON.stringify(escaped.body));
    const shown = (await t.call('get_message_content', { api_key: seed.projectKey, uid: 'escaped-1' })).body.data.message;
    assert.equal(shown.html, '<p>&lt;b&gt;bold&lt;/b&gt;</p>');
    assert.equal(shown.text, 't <b>bold</b>');
    assert.equal(shown.subject, 'S <b>bold</b>');
    const frameOf = await client.get(`/messages/${escaped.body.data.message.id}/html`);
    assert.ok(frameOf.text.includes('<p>&lt;b&gt;bold&lt;/b&gt;</p>'), frameOf.text);
    const missing = await t.call('get_message_content', { api_key: seed.projectKey, uid: 'no-such-message' });
    assert.equal(missing.status, 404);
    const theirs = await t.call('get_message_content', { api_key: other.projectKey, uid: 'hostile-1' });
    assert.equal(theirs.status, 404);
  });

  it('shows another account\'s message exactly as a message that does not exist', async () => {
    const theirs = await t.call('send_message', {
      api_key: other.projectKey,
      uid: 'theirs-1',
      arguments: { recipients: ['x@example.com'], headers: { subject: 'Secret of the other account', from: 'a@example.com' }, content: { 'text/plain': 'secret' } },
    });
    const id = theirs.body.data.message.id;
    const r = await client.get(`/messages/${id}`);
    const missing = await client.get('/messages/999999999');
    assert.equal(r.status, 404);
    assert.equal(missing.status, 404);
    // (each form's one-time token is random, and names the page it was shown on)
    const same = (text: string) => text.replace(/name="_form" value="[^"]+"/g, 'name="_form" value="T"').replace(/\d+/g, 'N');
    assert.equal(same(r.text), same(missing.text));
    assert.ok(!r.text.includes('Secret of the other account'));
    for (const sub of ['html', 'source']) assert.equal((await client.get(`/messages/${id}/${sub}`)).status, 404);
    // An id that is no number says so, never "NaN".
    const word = await client.get('/messages/abc');
    assert.equal(word.status, 404);
    assert.ok(!word.text.includes('NaN'), word.text);
    assert.match(word.text, /ids are whole numbers/);
    assert.equal((await client.get(`/messages?project=${other.projectUid}`)).status, 404);
  });

  it('shows a project-scoped user only its project', async () => {
    const services = t.app.services;
    const { createProject } = await import('../../src/operations/projects.ts');
    const { findAccountByUid } = await import('../../src/storage/accounts.ts');
    const account = (await findAccountByUid(services.store.db, seed.accountUid))!;
    const second = await createProject(services, account, { name: 'Second' });
    const sent = await t.call('send_message', {
      api_key: second.apiKey,
      uid: 'second-1',
      arguments: { recipients: ['y@example.com'], headers: { subject: 'In the second project', from: 'a@example.com' }, content: { 'text/plain': 'x' } },
    });
    const { client: scoped } = await signedInClient(t, seed.accountUid, { projectUid: second.project.uid });
    assert.equal((await scoped.get(`/messages/${sent.body.data.message.id}`)).status, 200);
    assert.equal((await scoped.get(`/messages/${messageId}`)).status, 404);
    assert.equal((await scoped.get(`/messages?project=${seed.projectUid}`)).status, 404);
    assert.equal((await scoped.get('/domains')).status, 404);
    const home = await scoped.get('/');
    assert.ok(home.text.includes('Second'));
    assert.ok(!home.text.includes('dash project'));
  });

  it('refuses a state-changing post without the session\'s CSRF token', async () => {
    const before = await client.get(`/suppressions?project=${seed.projectUid}`);
    assert.equal(before.status, 200);
    const without = await client.post('/suppressions/add', { project: seed.projectUid, addresses: 'csrf@example.com' }, { csrf: false });
    assert.equal(without.status, 403);
    const wrong = await client.post('/suppressions/add', { project: seed.projectUid, addresses: 'csrf@example.com', _csrf: 'forged' });
    assert.equal(wrong.status, 403);
    const list = await client.get(`/suppressions?project=${seed.projectUid}`);
    assert.ok(!list.text.includes('csrf@example.com'));
    const login = await new SessionClient(t.url).post('/login', { email: 'a@b.c', password: 'x' }, { csrf: false });
    assert.equal(login.status, 403);
  });

  it('adds, finds and removes a suppression', async () => {
    await client.get(`/suppressions?project=${seed.projectUid}`);
    const add = await client.post('/suppressions/add', { project: seed.projectUid, addresses: 'blocked@example.com\nother@example.com', message: 'by hand' });
    assert.equal(add.status, 303);
    assert.match((await client.get(add.headers.get('location')!)).text, /Added: blocked@example\.com, other@example\.com/);
    const found = await client.get(`/suppressions?project=${seed.projectUid}&q=blocked`);
    assert.ok(found.text.includes('blocked@example.com'));
    assert.ok(!found.text.includes('other@example.com'));
    const remove = await client.post('/suppressions/remove', { project: seed.projectUid, address: 'blocked@example.com' });
    assert.equal(remove.status, 303);
    const after = await client.get(`/suppressions?project=${seed.projectUid}&q=blocked`);
    assert.ok(!after.text.includes('>blocked@example.com<'));
    const api = await t.call('get_suppression_list', { api_key: seed.projectKey });
    assert.deepEqual(Object.keys(api.body.data ?? {}).sort(), ['other@example.com']);
    // A line is one entry, a display name and all; a bad line is quoted whole, and nothing of the batch is added.
    const named = await client.post('/suppressions/add', { project: seed.projectUid, addresses: 'Ann Lee <ann@example.com>\r\n' });
    assert.match((await client.get(named.headers.get('location')!)).text, /Added: ann@example\.com/);
    const bad = await client.post('/suppressions/add', { project: seed.projectUid, addresses: 'kept-out@example.com\nnot an address' });
    // Refused: the page is answered again with what was typed (docs/dashboard.md, "Pages").
    assert.equal(bad.status, 406);
    const notice = bad.text;
    assert.match(notice, /Not an address: line 2 \(“not an address”\)/);
    assert.match(notice, /Nothing was added/);
    const listed = await t.call('get_suppression_list', { api_key: seed.projectKey });
    assert.ok(!('kept-out@example.com' in listed.body.data));
    // Spellings of one address are one entry, shown as first added, found and removed by any.
    await client.post('/suppressions/add', { project: seed.projectUid, addresses: 'Dash.Case@Example.com' });
    const second = await client.post('/suppressions/add', { project: seed.projectUid, addresses: 'dash.case@example.com' });
    assert.match((await client.get(second.headers.get('location')!)).text, /Added: Dash\.Case@example\.com/);
    const rows = (await client.get(`/suppressions?project=${seed.projectUid}&q=DASH.case`)).text.match(/<td><bdi>[^<]*dash\.case@example\.com<\/bdi><\/td>/gi);
    assert.deepEqual(rows, ['<td><bdi>Dash.Case@example.com</bdi></td>']);
    const gone = await client.post('/suppressions/remove', { project: seed.projectUid, address: 'DASH.CASE@example.com' });
    assert.match((await client.get(gone.headers.get('location')!)).text, /Removed: DASH\.CASE@example\.com/);
    assert.ok(!('Dash.Case@example.com' in (await t.call('get_suppression_list', { api_key: seed.projectKey })).body.data));
    // A message's page says a recipient is suppressed whatever the spelling of the entry.
    await client.post('/suppressions/add', { project: seed.projectUid, addresses: 'VICTIM@Example.com', message: 'by hand' });
    assert.match((await client.get(`/messages/${messageId}`)).text, /Suppressed: <bdi>rejected<\/bdi> \(<bdi>manual<\/bdi>\)/);
    await client.post('/suppressions/remove', { project: seed.projectUid, address: 'victim@example.com' });
    assert.doesNotMatch((await client.get(`/messages/${messageId}`)).text, /Suppressed:/);
  });

  it('searches by recipient, uid, subject and status, and pages by keyset without overlap', async () => {
    for (let i = 0; i < 57; i++) {
      const r = await t.call('send_message', {
        api_key: seed.projectKey,
        uid: `page-${i}`,
        arguments: { recipients: [`r${i}@paging.example`], headers: { subject: `Paging ${i}`, from: 'a@example.com' }, content: { 'text/plain': 'x' } },
      });
      assert.equal(r.status, 200);
    }
    const uidsOf = (text: string) => [...text.matchAll(/<small class="uid"><bdi>([^<]+)<\/bdi><\/small>/g)].map((m) => m[1]);
    const first = await client.get(`/messages?project=${seed.projectUid}&subject=Paging`);
    const firstUids = uidsOf(first.text);
    assert.equal(firstUids.length, 50);
    const next = /href="(\/messages\?[^"]*cursor=[^"]+)" rel="next"/.exec(first.text)![1].replace(/&amp;/g, '&');
    const second = await client.get(next);
    const secondUids = uidsOf(second.text);
    assert.equal(secondUids.length, 7);
    assert.equal(new Set([...firstUids, ...secondUids]).size, 57);
    assert.ok(!/rel="next"/.test(second.text));
    assert.deepEqual(uidsOf((await client.get(`/messages?project=${seed.projectUid}&recipient=R13@PAGING`)).text), ['page-13']);
    assert.deepEqual(uidsOf((await client.get(`/messages?project=${seed.projectUid}&uid=page-7`)).text), ['page-7']);
    assert.equal(uidsOf((await client.get(`/messages?project=${seed.projectUid}&status=failed`)).text).length, 0);
    assert.equal(uidsOf((await client.get(`/messages?project=${seed.projectUid}&status=queued&subject=paging%2056`)).text).length, 1);
    const bad = await client.get(`/messages?project=${seed.projectUid}&cursor=nonsense`);
    assert.equal(bad.status, 406);
    const rows = await client.get(`/messages/rows?project=${seed.projectUid}&subject=Paging%2056`);
    assert.equal(rows.status, 200);
    assert.deepEqual(uidsOf(rows.text), ['page-56']);
  });

  it('lists and finds a message by its subject as sent: a template\'s {{variables}} rendered, each recipient\'s own too', async () => {
    const created = await t.call('create_template', { api_key: seed.projectKey, arguments: { slug: 'order-sent', subject: 'Order {{order}} for {{name}}', text: 'Thanks', from: 'shop@example.com' } });
    assert.equal(created.status, 200, JSON.stringify(created.body));
    const send = async (uid: string, args: Record<string, unknown>) => {
      const r = await t.call('send_message', { api_key: seed.projectKey, uid, arguments: { template: 'order-sent', ...args } });
      assert.equal(r.status, 200, JSON.stringify(r.body));
      return Number(r.body.data.message.id);
    };
    // Global variables only: every copy's subject is the same.
    await send('sent-subject-global', { recipients: ['ann@sent.example', 'ann2@sent.example'], variables: { order: 'A-17', name: 'the team' } });
    // A recipient's own variables: each copy its own subject; the message's is the first copy's.
    const perRecipient = await send('sent-subject-own', {
      recipients: { 'bo@sent.example': { name: 'Bo' }, 'cy@sent.example': { name: 'Cy' }, 'dee@sent.example': null },
      headers: { cc: 'cc@sent.example' },
      variables: { order: 'B-42', name: 'whom it may concern' },
    });
    const uidsOf = (text: string) => [...text.matchAll(/<small class="uid"><bdi>([^<]+)<\/bdi><\/small>/g)].map((m) => m[1]);
    const search = async (subject: string) => uidsOf((await client.get(`/messages?project=${seed.projectUid}&subject=${encodeURIComponent(subject)}`)).text);

    const list = (await client.get(`/messages?project=${seed.projectUid}&template=order-sent`)).text;
    assert.match(list, />Order A-17 for the team<\/bdi><\/a>/);
    assert.match(list, />Order B-42 for Bo<\/bdi><\/a>/);
    assert.doesNotMatch(list, /\{\{/);
    assert.deepEqual(await search('order a-17 for THE TEAM'), ['sent-subject-global']);
    assert.deepEqual(await search('B-42 for Bo'), ['sent-subject-own']);
    assert.deepEqual(await search('for cy'), ['sent-subject-own'], "a copy's own subject is found");
    assert.deepEqual(await search('whom it may concern'), ['sent-subject-own'], 'so is the subject of the copy without variables of its own');
    assert.deepEqual(await search('{{name}}'), []);
    // Only the copies whose subject differs from the message's store their own.
    const copies = await t.app.services.store.db.selectFrom('transmissions').select(['recipient', 'subject']).where('message_id', '=', perRecipient).orderBy('id').execute();
    assert.deepEqual(copies.map((c) => [c.recipient, c.subject]), [
      ['bo@sent.example', null],
      ['cy@sent.example', 'Order B-42 for Cy'],
      ['dee@sent.example', 'Order B-42 for whom it may concern'],
      ['cc@sent.example', null],
    ]);
    const page = (await client.get(`/messages/${perRecipient}`)).text;
    assert.match(page, /<dd class="subject"><bdi>Order B-42 for Bo<\/bdi><\/dd>/);
    assert.match(page, /Subject as sent to this recipient: <bdi>Order B-42 for Cy<\/bdi>/);
  });

  it('previews a template through the real merge and variables, with errors by field', async () => {
    await client.get(`/templates/~new?project=${seed.projectUid}`);
    const preview = async (form: Record<string, string>) => {
      const r = await client.post('/templates/~preview.json', { project: seed.projectUid, ...form });
      assert.equal(r.status, 200, r.text);
      return JSON.parse(r.text);
    };
    const p = await preview({ subject: 'Hi {{name}}', html: '<p>Dear {{name}}</p>', text: 'Dear {{name}}', variables: '{"name":"Ada"}' });
    assert.equal(p.subject, 'Hi Ada');
    // No From in the editor: the project's default From, the one a send would get.
    assert.equal(p.from, 'noreply@posthorn.test');
    assert.equal(p.text, 'Dear Ada');
    assert.deepEqual(p.errors, {});
    const missing = await preview({ subject: 'x', parent: 'no-such-layout' });
    assert.ok(missing.errors.parent);
    // Loops within loops stop at the limits of docs/templates.md ("Limits"): the field's error.
    const loops = await preview({ text: '{{#each a}}{{#each ../a}}{{#each ../../a}}x{{/each}}{{/each}}{{/each}}', variables: JSON.stringify({ a: Array.from({ length: 300 }, (_, i) => i) }) });
    assert.equal(loops.text, null);
    assert.match(loops.errors.text, /^cannot be rendered with these variables: it takes more than 1,000,000 steps to render/);
    const frame = await client.post('/templates/~preview', { project: seed.projectUid, html: '<p>Dear {{name}}</p>', variables: '{"name":"Grace"}' });
    assert.equal(frame.text, '<p>Dear Grace</p>');
    assert.match(frame.headers.get('content-security-policy') ?? '', /^sandbox;/);
    const save = await client.post('/templates', { project: seed.projectUid, slug: 'welcome-x', subject: 'Hi {{name}}', text: 'Body', html: '', css: '', from: '', name: '', parent: '' });
    assert.equal(save.status, 303);
    const api = await t.call('get_template', { api_key: seed.projectKey, arguments: { slug: 'welcome-x' } });
    if (api.status === 200) assert.equal(api.body.data.template?.subject ?? api.body.data.subject ?? 'Hi {{name}}', 'Hi {{name}}');
    const bad = await client.post('/templates', { project: seed.projectUid, slug: 'bad slug!', subject: 'x' });
    assert.equal(bad.status, 406);
    assert.match(bad.text, /id="err-slug" role="status"><bdi>[^<]+/);
  });

  it('rotates a project key: the new key is shown once, the old one stops working', async () => {
    await client.get(`/projects/${seed.projectUid}/keys/rotate`);
    const rotated = await client.post(`/projects/${seed.projectUid}/keys/rotate`, {});
    assert.equal(rotated.status, 200);
    const key = /id="new-key" class="key" readonly value="([^"]+)"/.exec(rotated.text)![1];
    assert.equal((await t.call('get_account_info', { api_key: seed.projectKey })).status, 401);
    const ok = await t.call('get_project_info', { api_key: key });
    assert.equal(ok.status, 200);
    const page = await client.get(`/projects/${seed.projectUid}/keys`);
    assert.ok(!page.text.includes(key), 'the key is not shown again');
    seed.projectKey = key;
  });

  it('adds a user from the dashboard, its password shown once', async () => {
    await client.get('/users');
    const added = await client.post('/users', { email: 'Colleague@Example.test', project: seed.projectUid });
    assert.equal(added.status, 200);
    const password = /id="new-password" class="key" readonly value="([^"]+)"/.exec(added.text)![1];
    const list = await client.get('/users');
    assert.ok(list.text.includes('colleague@example.test'));
    assert.ok(!list.text.includes(password));
    const colleague = new SessionClient(t.url);
    assert.equal((await colleague.signIn('colleague@example.test', password)).status, 303);
    assert.equal((await colleague.get('/users')).status, 404, 'a project-scoped user manages no users');
    const again = await client.post('/users', { email: 'colleague@example.test' });
    assert.equal(again.status, 303);
    assert.equal(again.headers.get('location'), '/users');
    assert.match((await client.get('/users')).text, /class="notice error" role="alert"><bdi>[^<]*already exists/);
  });

  it('adds a sending domain with the records to publish, checks it, and manages a webhook with its secret shown once', async () => {
    await client.get('/domains');
    const added = await client.post('/domains', { name: 'Mail.Example.com' });
    assert.equal(added.status, 303);
    const domains = await client.get('/domains');
    assert.ok(domains.text.includes('mail.example.com'));
    assert.match(domains.text, /v=DKIM1/);
    assert.match(domains.text, /data-copy="[^"]*v=spf1/);
    const checked = await client.post('/domains/mail.example.com/check', {});
    assert.equal(checked.status, 303);
    assert.match((await client.get('/domains')).text, /Checked <bdi>\d{4}-/);

    const hook = await client.post('/webhooks', { url: 'https://hooks.example.com/posthorn', events: ['delivered', 'failed'], project: '' });
    assert.ok([200, 303].includes(hook.status), hook.text.slice(0, 300));
    if (hook.status === 200) {
      const secret = /id="secret" class="key" readonly value="([^"]+)"/.exec(hook.text)![1];
      const page = await client.get('/webhooks');
      assert.ok(page.text.includes('https://hooks.example.com/posthorn'));
      assert.ok(!page.text.includes(secret));
    } else {
      // Without DNS (tests resolve nothing), the address policy may refuse the host: said, not crashed.
      assert.match((await client.get('/webhooks')).text, /class="notice error" role="alert"><bdi>[^<]*refused/);
    }
    assert.equal((await client.get('/mailboxes')).status, 200);
  });

  it('shows notices a form post left, once, and never text from the URL or an unsigned cookie', async () => {
    const SPOOF = 'Your account is suspended: call 555-0100';
    const spoofed = new URLSearchParams({ error: SPOOF, done: SPOOF, added: SPOOF, removed: SPOOF, saved: SPOOF, deleted: SPOOF }).toString();
    for (const path of ['/domains', '/webhooks', '/users', `/suppressions?project=${seed.projectUid}`, `/templates?project=${seed.projectUid}`]) {
      const r = await client.get(`${path}${path.includes('?') ? '&' : '?'}${spoofed}`);
      assert.equal(r.status, 200, path);
      assert.ok(!r.text.includes('555-0100'), `${path} shows text from its URL`);
      assert.doesNotMatch(r.text, /class="notice/, `${path} shows a notice nobody posted`);
    }

    const added = await client.post('/suppressions/add', { project: seed.projectUid, addresses: 'flash@example.com' });
    assert.equal(added.status, 303);
    assert.equal(added.headers.get('location'), `/suppressions?project=${seed.projectUid}`, 'the outcome is not in the URL');
    const shown = await client.get(added.headers.get('location')!);
    assert.match(shown.text, /class="notice ok" role="status"><bdi>Added: flash@example\.com<\/bdi>/);
    assert.doesNotMatch((await client.get(added.headers.get('location')!)).text, /class="notice/, 'shown once');

    client.cookies.set('posthorn_notice', encodeURIComponent(JSON.stringify({ kind: 'error', text: SPOOF })));
    assert.ok(!(await client.get('/domains')).text.includes('555-0100'), 'an unsigned notice cookie is ignored');
    const signed = added.headers.getSetCookie().find((l) => l.startsWith('posthorn_notice='))!.split(';')[0].slice('posthorn_notice='.length);
    client.cookies.set('posthorn_notice', signed.replace('flash', 'flesh'));
    assert.doesNotMatch((await client.get('/domains')).text, /class="notice/, 'an altered notice cookie is ignored');
  });

  it('limits failed sign-ins per email, and signing out ends the session', async () => {
    const { email, password, client: c } = await signedInClient(t, seed.accountUid);
    const attacker = new SessionClient(t.url);
    for (let i = 0; i < SIGN_IN_LIMITS.perEmail; i++) assert.equal((await attacker.signIn(email, `wrong-${i}-password`)).status, 401);
    const blocked = await attacker.signIn(email, password);
    assert.equal(blocked.status, 429);
    assert.equal((await c.get('/')).status, 200);
    assert.equal((await c.post('/logout', {})).status, 303);
    const cookieJar = new SessionClient(t.url);
    assert.equal((await cookieJar.get('/')).status, 303);
    assert.equal((await c.get('/')).status, 303);
  });
});

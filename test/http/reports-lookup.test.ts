// The lookups of one message by uid (get_message_receipt, get_message_transmissions and the legacy
// message_status, message_delivery_status, get_recipients_list), against the real server.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ManualClock } from '../../src/domain/clock.ts';
import { startTestApp, type Seed, type TestApp } from '../helpers/app.ts';
import { insertMessage } from '../helpers/fixtures.ts';

const T0 = Date.UTC(2026, 2, 10, 12, 0, 0);
const LOOKUPS = ['get_message_receipt', 'get_message_transmissions', 'message_status', 'message_delivery_status', 'get_recipients_list'];

describe('message lookups by uid', () => {
  let t: TestApp;
  let seed: Seed;
  let other: Seed;
  let messageId: number;
  before(async () => {
    // No background workers: delivery would claim these rows and change what the reports show.
    t = await startTestApp({ clock: new ManualClock(T0), background: false });
    seed = await t.seed('lookups');
    other = await t.seed('other');
    const { message } = await insertMessage(t.app.services, {
      projectId: seed.projectId,
      uid: 'order-1',
      created_at: T0,
      recipients: [
        { recipient: 'ann@example.com', status: 'completed', completed_at: T0 + 5_000, opened_at: T0 + 60_000, clicked_at: T0 + 61_000, result_code: 'SMTP_250', result_message: '250 2.0.0 queued as X', attempts: 1 },
        { recipient: 'bob@example.com', status: 'failed', failed_at: T0 + 7_000, result_code: 'SMTP_550', result_message: '550 5.1.1 user unknown', attempts: 1 },
        { recipient: 'cy@example.com', status: 'retry', result_code: 'SMTP_451', result_message: '451 try later', attempts: 2 },
      ],
    });
    messageId = message.id;
    await insertMessage(t.app.services, { projectId: seed.projectId, uid: '12345', created_at: T0, recipients: ['num@example.com'] });
    await insertMessage(t.app.services, {
      projectId: seed.projectId,
      uid: 'done',
      created_at: T0,
      recipients: [
        { recipient: 'a@example.com', status: 'completed', completed_at: T0 },
        { recipient: 'b@example.com', status: 'completed', completed_at: T0 },
      ],
    });
    await insertMessage(t.app.services, {
      projectId: seed.projectId,
      uid: 'twice',
      created_at: T0,
      recipients: [
        { recipient: 'dup@example.com', status: 'completed' },
        { recipient: 'dup@example.com', status: 'failed', result_message: 'second copy failed' },
      ],
    });
    await insertMessage(t.app.services, { projectId: other.projectId, uid: 'theirs', created_at: T0, recipients: ['x@example.com'] });
  });
  after(() => t.close());

  it('get_message_receipt answers id and url as number and string, on both versions', async () => {
    for (const version of ['1.0', '1.1'] as const) {
      const r = await t.call('get_message_receipt', { api_key: seed.projectKey, arguments: { uid: 'order-1' } }, { version });
      assert.equal(r.status, 200, version);
      assert.equal(r.body.response.status, 'ok');
      assert.equal(r.body.data.message.id, messageId);
      assert.equal(typeof r.body.data.message.id, 'number');
      assert.equal(typeof r.body.data.message.url, 'string');
      assert.match(r.body.data.message.url, new RegExp(`^http://127.0.0.1:0/messages/${messageId}$`));
    }
  });

  it('takes the target from arguments.uid first, else from the top-level uid (echoed as sent)', async () => {
    // Node 2.x / Ruby gem: random top-level uid, target in arguments.
    const a = await t.call('get_message_receipt', { api_key: seed.projectKey, uid: 'random-xyz', arguments: { uid: 'order-1' } });
    assert.equal(a.status, 200);
    assert.equal(a.body.response.uid, 'random-xyz');
    assert.equal(a.body.data.message.id, messageId);
    // Older clients: the target is the top-level uid.
    const b = await t.call('get_message_receipt', { api_key: seed.projectKey, uid: 'order-1' });
    assert.equal(b.body.data.message.id, messageId);
    const nullArg = await t.call('get_message_receipt', { api_key: seed.projectKey, uid: 'order-1', arguments: { uid: null } });
    assert.equal(nullArg.body.data.message.id, messageId);
    // A numeric uid (one client sends numbers) finds the message whose uid spells it.
    const n = await t.call('get_message_transmissions', { api_key: seed.projectKey, uid: 12345 });
    assert.equal(n.status, 200);
    assert.equal(n.body.response.uid, 12345);
    assert.deepEqual(Object.keys(n.body.data.transmissions), ['num@example.com']);
    const na = await t.call('get_recipients_list', { api_key: seed.projectKey, arguments: { uid: 12345 } });
    assert.deepEqual(na.body.data.recipients, ['num@example.com']);
  });

  it('answers 404 not_found for an unknown uid and for another project\'s message', async () => {
    for (const method of LOOKUPS) {
      for (const uid of ['nope', 'theirs']) {
        const r = await t.call(method, { api_key: seed.projectKey, arguments: { uid } });
        assert.equal(r.status, 404, `${method} ${uid}`);
        assert.equal(r.body.response.status, 'not_found');
        assert.match(r.body.response.message, new RegExp(uid));
        assert.equal(r.body.data, undefined);
      }
    }
  });

  it('answers 400 bad_request when no uid is given, and call_error for a uid of the wrong type', async () => {
    for (const method of LOOKUPS) {
      for (const body of [{}, { arguments: {} }, { uid: null, arguments: { uid: null } }, { uid: '' }]) {
        const r = await t.call(method, { api_key: seed.projectKey, ...body });
        assert.equal(r.status, 400, `${method} ${JSON.stringify(body)}`);
        assert.equal(r.body.response.status, 'bad_request');
        assert.match(r.body.response.message, /uid/);
      }
      const wrong = await t.call(method, { api_key: seed.projectKey, arguments: { uid: ['order-1'] } });
      assert.equal(wrong.status, 406, method);
      assert.equal(wrong.body.response.status, 'call_error');
      assert.match(wrong.body.response.message, /"uid"/);
      const wrongTop = await t.call(method, { api_key: seed.projectKey, uid: { a: 1 } });
      assert.equal(wrongTop.status, 406, method);
      assert.deepEqual(wrongTop.body.response.uid, { a: 1 });
    }
  });

  it('refuses an account key (401 naming the key kind) and checks the key before the uid', async () => {
    for (const method of LOOKUPS) {
      const r = await t.call(method, { api_key: seed.accountKey, arguments: { uid: 'order-1' } });
      assert.equal(r.status, 401, method);
      assert.equal(r.body.response.status, 'unauthorized');
      assert.match(r.body.response.message, /project/);
      assert.equal((await t.call(method, { api_key: 'bad' })).status, 401);
    }
  });

  it('get_message_transmissions reports every recipient with both result_message and error_message, and where it went', async () => {
    for (const version of ['1.0', '1.1'] as const) {
      const r = await t.call('get_message_transmissions', { api_key: seed.projectKey, arguments: { uid: 'order-1' } }, { version });
      assert.equal(r.status, 200);
      assert.equal(r.body.data.message.id, messageId);
      assert.deepEqual(r.body.data.transmissions, {
        'ann@example.com': {
          status: 'completed',
          created_at: '2026-03-10 12:00:00',
          failed_at: null,
          opened_at: '2026-03-10 12:01:00',
          clicked_at: '2026-03-10 12:01:01',
          result_code: 'SMTP_250',
          result_message: '250 2.0.0 queued as X',
          error_message: '250 2.0.0 queued as X',
          delivered_to: 'ann@example.com',
        },
        'bob@example.com': {
          status: 'failed',
          created_at: '2026-03-10 12:00:00',
          failed_at: '2026-03-10 12:00:07',
          opened_at: null,
          clicked_at: null,
          result_code: 'SMTP_550',
          result_message: '550 5.1.1 user unknown',
          error_message: '550 5.1.1 user unknown',
          delivered_to: 'bob@example.com',
        },
        'cy@example.com': {
          status: 'retry',
          created_at: '2026-03-10 12:00:00',
          failed_at: null,
          opened_at: null,
          clicked_at: null,
          result_code: 'SMTP_451',
          result_message: '451 try later',
          error_message: '451 try later',
          delivered_to: 'cy@example.com',
        },
      });
    }
  });

  it('keeps every transmission of an address given twice: the first under the address, the next as address#2', async () => {
    const r = await t.call('get_message_transmissions', { api_key: seed.projectKey, arguments: { uid: 'twice' } });
    assert.deepEqual(Object.keys(r.body.data.transmissions), ['dup@example.com', 'dup@example.com#2']);
    assert.equal(r.body.data.transmissions['dup@example.com'].status, 'completed');
    assert.equal(r.body.data.transmissions['dup@example.com#2'].error_message, 'second copy failed');
    const list = await t.call('get_recipients_list', { api_key: seed.projectKey, arguments: { uid: 'twice' } });
    assert.deepEqual(list.body.data.recipients, ['dup@example.com', 'dup@example.com']);
  });

  it('message_status counts the transmissions of each of the four statuses, as numbers', async () => {
    for (const version of ['1.0', '1.1'] as const) {
      const r = await t.call('message_status', { api_key: seed.projectKey, arguments: { uid: 'order-1' } }, { version });
      assert.equal(r.status, 200);
      assert.deepEqual(r.body.data.message_status, { queued: 0, retry: 1, completed: 1, failed: 1 });
    }
  });

  it('message_delivery_status: queued while any is pending, completed when all completed, else failed', async () => {
    const pending = await t.call('message_delivery_status', { api_key: seed.projectKey, uid: 'u', arguments: { uid: 'order-1' } });
    assert.equal(pending.status, 200);
    assert.equal(pending.body.response.status, 'ok');
    assert.equal(pending.body.response.uid, 'u');
    assert.equal(pending.body.response.delivery_status, 'queued');
    assert.deepEqual(pending.body.data.delivery_status, [
      { unique_id: 'order-1@posthorn.test', recipient: 'ann@example.com', status: 'completed' },
      { unique_id: 'order-1@posthorn.test', recipient: 'bob@example.com', status: 'failed' },
      { unique_id: 'order-1@posthorn.test', recipient: 'cy@example.com', status: 'retry' },
    ]);
    const done = await t.call('message_delivery_status', { api_key: seed.projectKey, arguments: { uid: 'done' } }, { version: '1.0' });
    assert.equal(done.body.response.delivery_status, 'completed');
    const partly = await t.call('message_delivery_status', { api_key: seed.projectKey, arguments: { uid: 'twice' } });
    assert.equal(partly.body.response.delivery_status, 'failed');
  });

  it('get_recipients_list lists the addresses in the order given', async () => {
    for (const version of ['1.0', '1.1'] as const) {
      const r = await t.call('get_recipients_list', { api_key: seed.projectKey, arguments: { uid: 'order-1' } }, { version });
      assert.equal(r.status, 200);
      assert.deepEqual(r.body.data.recipients, ['ann@example.com', 'bob@example.com', 'cy@example.com']);
    }
  });
});

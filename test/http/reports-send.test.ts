// End to end: what send_message accepts is what the report methods show, with the same id, url,
// unique_id and recipients (no fixtures: the rows are send_message's own).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ManualClock } from '../../src/domain/clock.ts';
import { startTestApp, type Seed, type TestApp } from '../helpers/app.ts';

const NOW = Date.UTC(2026, 4, 20, 9, 30, 0);

describe('reports of a message sent through send_message', () => {
  let t: TestApp;
  let seed: Seed;
  let sent: { id: number; url: string };
  before(async () => {
    // No background workers: delivery would claim these rows and change what the reports show.
    t = await startTestApp({ clock: new ManualClock(NOW), background: false });
    seed = await t.seed('e2e');
    const r = await t.call('send_message', {
      api_key: seed.projectKey,
      uid: 'welcome-1',
      arguments: {
        recipients: ['ann@example.com', 'Bob <bob@example.com>'],
        headers: { from: 'shop@example.com', subject: 'Hi' },
        content: { 'text/plain': 'Hello' },
      },
    });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    sent = r.body.data.message;
  });
  after(() => t.close());

  it('get_message_receipt answers the id and url send_message answered', async () => {
    const r = await t.call('get_message_receipt', { api_key: seed.projectKey, uid: 'random', arguments: { uid: 'welcome-1' } });
    assert.equal(r.status, 200);
    assert.deepEqual(r.body.data.message, sent);
  });

  it('the transmissions, statuses, recipients and history show the two queued recipients', async () => {
    const tx = await t.call('get_message_transmissions', { api_key: seed.projectKey, arguments: { uid: 'welcome-1' } });
    assert.equal(tx.body.data.message.id, sent.id);
    assert.deepEqual(Object.keys(tx.body.data.transmissions).sort(), ['ann@example.com', 'bob@example.com']);
    for (const report of Object.values(tx.body.data.transmissions) as any[]) {
      assert.equal(report.status, 'queued');
      assert.equal(report.created_at, '2026-05-20 09:30:00');
    }
    const status = await t.call('message_status', { api_key: seed.projectKey, uid: 'welcome-1' });
    assert.deepEqual(status.body.data.message_status, { queued: 2, retry: 0, completed: 0, failed: 0 });
    const delivery = await t.call('message_delivery_status', { api_key: seed.projectKey, uid: 'welcome-1' });
    assert.equal(delivery.body.response.delivery_status, 'queued');
    const recipients = await t.call('get_recipients_list', { api_key: seed.projectKey, uid: 'welcome-1' });
    assert.deepEqual(recipients.body.data.recipients.sort(), ['ann@example.com', 'bob@example.com']);
    const history = await t.call('messages_history', { api_key: seed.projectKey, arguments: { from: '2026-05-20', to: '2026-05-20' } });
    assert.equal(history.body.data.messages_history.length, 2);
    for (const row of history.body.data.messages_history) {
      assert.equal(row.unique_id, 'welcome-1@posthorn.test');
      assert.equal(row.message_id, sent.id);
      assert.equal(row.uid, 'welcome-1');
      assert.equal(row.status, 'queued');
      assert.equal(row.created_at, '2026-05-20 09:30:00');
    }
    const messages = await t.call('get_messages', { api_key: seed.projectKey });
    assert.equal(messages.body.data['welcome-1'].transmissions_total, 2);
    assert.equal(messages.body.data['welcome-1'].created_at, '2026-05-20T09:30:00Z');
  });

  it('counts them in get_metrics, get_project_info and get_account_info', async () => {
    const metrics = await t.call('get_metrics', { api_key: seed.projectKey });
    assert.equal(metrics.body.data.metrics.hour.created.current_value, 2);
    assert.equal(metrics.body.data.metrics.hour.queued.current_value, 2);
    const project = await t.call('get_project_info', { api_key: seed.projectKey });
    assert.deepEqual(project.body.data.project.transmissions, { today: 2, this_month: 2, overall: 2 });
    const account = await t.call('get_account_info', { api_key: seed.accountKey });
    assert.deepEqual(account.body.data.account.transmissions, { today: 2, this_month: 2, overall: 2 });
  });
});

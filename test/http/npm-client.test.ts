// The official npm client (postageapp@2.0.0, unmodified) against the real server: the calls its
// own test suite makes (get_project_info, send_message with sample_child_template, test_error).
// It speaks /v.1.0/<method>.json with Content-Type: application/json, a random top-level uid and
// an extra "method" member; it resolves with `data` on HTTP 200 and rejects with `response` otherwise.
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { after, before, describe, it } from 'node:test';
import { startTestApp, type Seed, type TestApp } from '../helpers/app.ts';

interface PostageAppClient {
  test(): Promise<any>;
  getProjectInfo(args?: unknown, uid?: string): Promise<any>;
  sendMessage(args: unknown, uid?: string): Promise<any>;
  testError(): Promise<any>;
}
const PostageApp = createRequire(import.meta.url)('postageapp') as new (config: Record<string, unknown>) => PostageAppClient;

describe('official npm client postageapp@2.0.0', () => {
  let t: TestApp;
  let seed: Seed;
  let client: PostageAppClient;
  before(async () => {
    t = await startTestApp();
    seed = await t.seed('Npm');
    const { hostname, port } = new URL(t.url);
    client = new PostageApp({ host: hostname, port: Number(port), secure: false, apiKey: seed.projectKey });
  });
  after(() => t.close());

  it('get_project_info (the client\'s test() call) answers the project', async () => {
    const data = await client.test();
    assert.equal(data.project.name, 'Npm project');
    assert.equal(typeof data.project.url, 'string');
    for (const n of Object.values(data.project.transmissions)) assert.equal(typeof n, 'number');
  });

  it('send_message with sample_child_template to the null.postageapp.com sink', async () => {
    const data = await client.sendMessage({ recipients: 'test@null.postageapp.com', template: 'sample_child_template' });
    assert.equal(typeof data.message.id, 'number');
    assert.equal(typeof data.message.url, 'string');
    const db = t.app.services.store.db;
    const message = await db.selectFrom('messages').selectAll().where('id', '=', data.message.id).executeTakeFirstOrThrow();
    assert.equal(message.template, 'sample_child_template');
    // The client sends a random uuid as the top-level uid: it names the message.
    assert.match(message.uid, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    const transmissions = await db.selectFrom('transmissions').selectAll().where('message_id', '=', data.message.id).execute();
    assert.deepEqual(transmissions.map((tr) => [tr.recipient, tr.status, tr.result_code]), [['test@null.postageapp.com', 'completed', 'SMTP_250']]);

    const withOverride = await client.sendMessage({ content: 'hello snowman ☃☃☃', recipients: 'test@null.postageapp.com', recipient_override: 'test2@null.postageapp.com' });
    assert.equal(typeof withOverride.message.id, 'number');
  });

  it('rejects with the response envelope on errors (test_error, a bad request)', async () => {
    await assert.rejects(client.testError(), (response: any) => response.status === 'internal_server_error' && typeof response.message === 'string');
    await assert.rejects(client.sendMessage({ recipients: 'a@example.com', template: 'no_such_template' }), (response: any) => response.status === 'precondition_failed');
    await assert.rejects(client.sendMessage({}), (response: any) => response.status === 'bad_request');
  });
});

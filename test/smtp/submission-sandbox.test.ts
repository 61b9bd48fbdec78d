// Sandbox projects for mail submitted over SMTP (docs/sandbox.md, docs/smtp-submission.md "Like an
// API message"), followed through to a webhook endpoint. The running app delivers with workers and
// a transport map whose only route ('*') is a real SMTP peer on 127.0.0.1: sandbox mail must never
// reach it. A real HTTP sink on 127.0.0.1 is the account's webhook endpoint; every request it gets
// must carry the endpoint's signature and the message's uid.
//
// The API path first: send_message to every simulator address of docs/sandbox.md, each ending as
// the table says, its events arriving signed at the sink. Then the same recipients submitted with
// Nodemailer's SMTP transport (AUTH with the project's uid and key) and, in the same test, sent with
// send_message: every transmission's status, result code and attempts, every attempt's host, the
// suppressions and every webhook are the same on both paths. Each path has its own sandbox project
// so that the addresses are the same exactly (a hard bounce and a complaint suppress their address in its project).
// A project with sandbox off then submits to the same route and the peer receives it: the route
// the sandbox did not use works.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startHttpSink, verifyWebhookSignature, type HttpSink } from '../helpers/http-sink.ts';
import { startSmtpPeer, type SmtpPeer } from '../helpers/smtp-peers.ts';
import { startSubmissionHarness, type SubmissionHarness } from './harness.ts';

const SIM = 'simulator.posthorn.test';
/** Every address docs/sandbox.md lists, an ordinary one, and the test sink of every project. */
const RECIPIENTS = ['ok@example.test', `bounce@${SIM}`, `soft-bounce@${SIM}`, `complaint@${SIM}`, `delay@${SIM}`, 'app-test@null.postageapp.com'];

/** What docs/sandbox.md says each address ends as, with its events in order. */
const EXPECTED: Record<string, { status: string; resultCode: string; attempts: number; events: string[] }> = {
  'ok@example.test': { status: 'completed', resultCode: 'SMTP_250', attempts: 1, events: ['delivered'] },
  [`bounce@${SIM}`]: { status: 'failed', resultCode: 'SMTP_550', attempts: 1, events: ['bounced'] },
  [`soft-bounce@${SIM}`]: { status: 'completed', resultCode: 'SMTP_250', attempts: 2, events: ['retry', 'delivered'] },
  [`complaint@${SIM}`]: { status: 'completed', resultCode: 'SMTP_250', attempts: 1, events: ['delivered', 'spammed'] },
  [`delay@${SIM}`]: { status: 'completed', resultCode: 'SMTP_250', attempts: 3, events: ['retry', 'retry', 'delivered'] },
  'app-test@null.postageapp.com': { status: 'completed', resultCode: 'SMTP_250', attempts: 0, events: ['delivered'] },
};

/** The result codes of the deferrals, in order (docs/sandbox.md: 452 mailbox full, 421 at the greeting). */
const DEFERRALS: Record<string, string[]> = { [`soft-bounce@${SIM}`]: ['SMTP_452'], [`delay@${SIM}`]: ['SMTP_421', 'SMTP_421'] };

interface Project {
  uid: string;
  key: string;
  id: number;
}

interface Webhook {
  event: string;
  event_id: string;
  project_uid: string;
  message_uid: string;
  recipient: string;
  status: string;
  result_code: string;
  result_message: string;
  host: string | null;
  attempts: number;
  transmission_id: number;
}

describe('sandbox projects: SMTP submission and the API, through to webhooks', () => {
  let h: SubmissionHarness;
  /** the only route of the transport map: sandbox mail must never reach it */
  let outside: SmtpPeer;
  let sink: HttpSink;
  let secret: string;

  before(async () => {
    outside = await startSmtpPeer({ starttls: false });
    sink = await startHttpSink();
    h = await startSubmissionHarness({ config: { transportMap: [outside.transportFor('*')], retrySchedule: '1s', allowPrivateWebhooks: true, workers: 4 } });
    const hook = await h.t.call('create_webhook', {
      api_key: h.seed.accountKey,
      arguments: { url: sink.url + '/posthorn/events', events: ['delivered', 'failed', 'bounced', 'retry', 'spammed'] },
    });
    assert.equal(hook.status, 200, JSON.stringify(hook.body));
    secret = hook.body.data.webhook.secret;
  });
  after(async () => {
    await h?.close();
    await sink?.close();
    await outside?.close();
  });

  /** A project of the seeded account with `sandbox` on, as docs/sandbox.md turns it on. */
  async function sandboxProject(name: string): Promise<Project> {
    const created = await h.t.call('create_project', { api_key: h.seed.accountKey, arguments: { name } });
    assert.equal(created.status, 200, JSON.stringify(created.body));
    const { uid, api_key: key } = created.body.data.project;
    const on = await h.t.call('update_project', { api_key: h.seed.accountKey, arguments: { uid, settings: { sandbox: true } } });
    assert.equal(on.status, 200, JSON.stringify(on.body));
    assert.equal(on.body.data.project.settings.sandbox, true);
    const row = await h.t.app.services.store.db.selectFrom('projects').select('id').where('uid', '=', uid).executeTakeFirstOrThrow();
    return { uid, key, id: Number(row.id) };
  }

  async function sendApi(project: Project, uid: string): Promise<void> {
    const sent = await h.t.call('send_message', {
      api_key: project.key,
      uid,
      arguments: { recipients: RECIPIENTS, headers: { from: 'app@example.test', subject: 'Sandbox' }, content: { 'text/plain': 'Hello from the sandbox' } },
    });
    assert.equal(sent.status, 200, JSON.stringify(sent.body));
  }

  async function submitSmtp(project: Project, uid: string, to: string[] = RECIPIENTS): Promise<void> {
    const transport = h.client({ user: project.uid, pass: project.key });
    try {
      const info = await transport.sendMail({ from: 'app@example.test', to, subject: 'Sandbox', text: 'Hello from the sandbox', headers: { 'X-Posthorn-Uid': uid } });
      assert.match(info.response, /^250 /);
      assert.deepEqual([...info.accepted].sort(), [...to].sort());
    } finally {
      transport.close();
    }
  }

  async function transmissionsOf(uid: string) {
    const rows = await h.t.app.services.store.db
      .selectFrom('transmissions')
      .innerJoin('messages', 'messages.id', 'transmissions.message_id')
      .select(['transmissions.id as id', 'transmissions.recipient as recipient', 'transmissions.status as status', 'transmissions.result_code as result_code', 'transmissions.result_message as result_message', 'transmissions.attempts as attempts'])
      .where('messages.uid', '=', uid)
      .orderBy('transmissions.id')
      .execute();
    return rows.map((r) => ({ ...r, id: Number(r.id), attempts: Number(r.attempts) }));
  }

  async function eventRowsOf(uid: string): Promise<Array<{ id: number; type: string; payload: any }>> {
    const rows = await h.t.app.services.store.db.selectFrom('events').select(['id', 'type', 'payload']).orderBy('id').execute();
    return rows.map((r) => ({ id: Number(r.id), type: r.type, payload: JSON.parse(r.payload) })).filter((e) => e.payload.message_uid === uid);
  }

  /** The sink's requests about a message, each checked for the endpoint's signature, in event order. */
  function webhooksOf(uid: string): Webhook[] {
    const out: Webhook[] = [];
    for (const request of sink.requests) {
      assert.equal(request.path, '/posthorn/events');
      assert.ok(verifyWebhookSignature(secret, request, 300), `signed with the endpoint's secret: ${request.body}`);
      const body = JSON.parse(request.body) as Webhook;
      assert.equal(request.headers['x-posthorn-event'], body.event);
      assert.equal(request.headers['x-posthorn-event-id'], body.event_id);
      if (body.message_uid === uid) out.push(body);
    }
    return out.sort((a, b) => Number(a.event_id.slice(4)) - Number(b.event_id.slice(4)));
  }

  /**
   * Waits (bounded) until every transmission of the messages is final and every event recorded for
   * them has reached the sink; returns their webhooks by message uid.
   */
  async function settled(uids: string[], timeoutMs = 45_000): Promise<Map<string, Webhook[]>> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      let done = true;
      for (const uid of uids) {
        const rows = await transmissionsOf(uid);
        const final = rows.length === RECIPIENTS.length && rows.every((r) => r.status === 'completed' || r.status === 'failed');
        const recorded = new Set((await eventRowsOf(uid)).map((e) => `evt_${e.id}`));
        const received = new Set(webhooksOf(uid).map((w) => w.event_id));
        if (!final || [...recorded].some((id) => !received.has(id))) done = false;
      }
      if (done) break;
      if (Date.now() > deadline) {
        const state = await Promise.all(uids.map(async (uid) => ({ uid, transmissions: await transmissionsOf(uid), webhooks: webhooksOf(uid).map((w) => `${w.recipient} ${w.event}`) })));
        assert.fail(`not settled within ${timeoutMs} ms: ${JSON.stringify(state)}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    return new Map(uids.map((uid) => [uid, webhooksOf(uid)]));
  }

  /** Checks one message's records and webhooks against docs/sandbox.md; returns them for comparison. */
  async function assertSandboxOutcomes(project: Project, uid: string, webhooks: Webhook[]) {
    const rows = await transmissionsOf(uid);
    assert.deepEqual(rows.map((r) => r.recipient).sort(), [...RECIPIENTS].sort());
    const db = h.t.app.services.store.db;
    const records: Record<string, unknown> = {};
    for (const row of rows) {
      const expected = EXPECTED[row.recipient];
      assert.equal(row.status, expected.status, `${uid} ${row.recipient}`);
      assert.equal(row.result_code, expected.resultCode, `${uid} ${row.recipient}`);
      assert.equal(row.attempts, expected.attempts, `${uid} ${row.recipient}`);
      const attempts = await db.selectFrom('attempts').select(['mx_host', 'outcome']).where('transmission_id', '=', row.id).orderBy('id').execute();
      assert.equal(attempts.length, expected.attempts, `${uid} ${row.recipient} attempt rows`);
      for (const a of attempts) assert.equal(a.mx_host, 'sandbox', `${uid} ${row.recipient}: every attempt is the sandbox's`);

      const mine = webhooks.filter((w) => w.recipient === row.recipient);
      assert.deepEqual(
        mine.map((w) => w.event),
        expected.events,
        `${uid} ${row.recipient}: ${JSON.stringify(mine)}`,
      );
      for (const w of mine) {
        assert.equal(w.project_uid, project.uid);
        assert.equal(w.message_uid, uid);
        assert.equal(w.transmission_id, row.id);
      }
      const deferrals = mine.filter((w) => w.event === 'retry');
      assert.deepEqual(deferrals.map((w) => w.result_code), DEFERRALS[row.recipient] ?? []);
      for (const w of deferrals) assert.equal(w.status, 'retry');
      const last = mine.filter((w) => w.event !== 'spammed').at(-1)!;
      assert.equal(last.status, row.status);
      assert.equal(last.result_code, row.result_code);
      assert.equal(last.result_message, row.result_message);
      if (expected.attempts > 0) assert.equal(last.host, 'sandbox');
      records[row.recipient] = {
        status: row.status,
        result_code: row.result_code,
        result_message: row.result_message,
        attempts: row.attempts,
        attempt_hosts: attempts.map((a) => a.mx_host),
        attempt_outcomes: attempts.map((a) => a.outcome),
        webhooks: mine.map((w) => ({ event: w.event, status: w.status, result_code: w.result_code, result_message: w.result_message, host: w.host, attempts: w.attempts })),
      };
    }
    // The hard bounce and the complaint suppress their addresses in the project, as real ones do.
    const suppressions = await db.selectFrom('suppressions').select(['address', 'status', 'suppression_state']).where('project_id', '=', project.id).orderBy('address').execute();
    assert.deepEqual(suppressions, [
      { address: `bounce@${SIM}`, status: 'rejected', suppression_state: 'hard_bounce' },
      { address: `complaint@${SIM}`, status: 'rejected', suppression_state: 'complaint' },
    ]);
    return records;
  }

  it('API: every simulator address ends as docs/sandbox.md says, and each event reaches the webhook endpoint signed, with the message uid', async () => {
    const project = await sandboxProject('sandbox api');
    await sendApi(project, 'sandbox-api-1');
    const webhooks = (await settled(['sandbox-api-1'])).get('sandbox-api-1')!;
    await assertSandboxOutcomes(project, 'sandbox-api-1', webhooks);
    assert.equal(webhooks.length, 10);
    assert.equal(outside.connectionCount, 0, 'a sandbox delivery connected to the SMTP route');
  });

  it('SMTP submission: the same recipients get the same records and the same webhooks as send_message, and nothing leaves the machine', async () => {
    const viaSmtp = await sandboxProject('sandbox smtp');
    const viaApi = await sandboxProject('sandbox api twin');
    await Promise.all([submitSmtp(viaSmtp, 'sandbox-smtp-1'), sendApi(viaApi, 'sandbox-api-2')]);
    const webhooks = await settled(['sandbox-smtp-1', 'sandbox-api-2']);
    const smtp = await assertSandboxOutcomes(viaSmtp, 'sandbox-smtp-1', webhooks.get('sandbox-smtp-1')!);
    const api = await assertSandboxOutcomes(viaApi, 'sandbox-api-2', webhooks.get('sandbox-api-2')!);
    assert.deepEqual(smtp, api, 'the SMTP path records and reports what the API path does');

    // Every outcome is recorded and reported: no connection was made to the route, nor to the
    // harness's own sink.
    assert.equal(outside.connectionCount, 0, 'a sandbox delivery connected to the SMTP route');
    assert.equal(outside.received.length, 0);
    assert.equal(h.sink.connectionCount, 0);

    // The same route works for a project with sandbox off (the seeded one): the absence above is
    // the sandbox's doing.
    const real = { uid: h.seed.projectUid, key: h.seed.projectKey, id: h.seed.projectId };
    await submitSmtp(real, 'not-sandboxed-1', ['ok@example.test']);
    await outside.waitForReceived(1, 20_000);
    assert.deepEqual(outside.received[0].to, ['ok@example.test']);
  });
});

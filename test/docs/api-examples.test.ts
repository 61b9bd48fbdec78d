// The examples a user copies: every request and answer shown in docs/api/*.md (and the method
// sections of docs/webhooks.md and docs/domains-and-bounces.md) is one the method
// under whose heading it stands takes and gives, and the example request of every method in the
// OpenAPI document (what /docs's "Try it out" starts from) is answered ok by a real server when the
// examples are sent one after the other, as a new user would try them.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { TSchema } from '@sinclair/typebox';
import { TypeCompiler } from '@sinclair/typebox/compiler';
import { EVENT_SCHEMAS } from '../../src/domain/events.ts';
import { ALL_METHODS, METHODS } from '../../src/http/api/methods/index.ts';
import { startTestApp, type Seed, type TestApp } from '../helpers/app.ts';
import { startDnsServer, type TestDnsServer } from '../helpers/dns-server.ts';
import { checkMethodData } from '../helpers/method-data.ts';

interface DocExample {
  where: string;
  methods: string[];
  value: Record<string, any>;
}

/** The pages that show requests and answers of the API (docs/api/reference.md is generated). */
const PAGES = [
  ...fs.readdirSync('docs/api').filter((f) => f.endsWith('.md') && f !== 'reference.md').map((f) => path.join('docs/api', f)),
  'docs/webhooks.md',
  'docs/domains-and-bounces.md',
];

/** Each ```json block of PAGES, with the methods its nearest heading names. */
function docExamples(): { examples: DocExample[]; unreadable: string[] } {
  const examples: DocExample[] = [];
  const unreadable: string[] = [];
  for (const file of PAGES) {
    const lines = fs.readFileSync(file, 'utf8').split('\n');
    // "# send_message" holds for the whole page, "### create_project" until the next heading of
    // its level or above ("## Mailboxes", "### list_projects").
    let methods: string[] = [];
    let level = 0;
    for (let i = 0; i < lines.length; i++) {
      const heading = /^(#+) (.*?)\s*$/.exec(lines[i]);
      if (heading) {
        // "### create_domain (account key)" names create_domain.
        const names = heading[2].replace(/ \([^)]*\)$/, '').split(' / ');
        if (names.every((name) => METHODS.has(name))) [methods, level] = [names, heading[1].length];
        else if (heading[1].length <= level) [methods, level] = [[], 0];
        continue;
      }
      if (lines[i].trim() !== '```json') continue;
      const start = i + 1;
      while (i + 1 < lines.length && lines[i + 1].trim() !== '```') i++;
      const text = lines.slice(start, i + 1).join('\n');
      i++;
      let value: unknown;
      try {
        value = JSON.parse(text);
      } catch {
        // A fragment of an arguments object ("attachments": {...}) is read as the object it belongs to.
        try {
          JSON.parse(`{${text}}`);
          continue;
        } catch {
          unreadable.push(`${file}:${start}`);
          continue;
        }
      }
      if (value && typeof value === 'object' && !Array.isArray(value)) examples.push({ where: `${file}:${start}`, methods, value: value as Record<string, any> });
    }
  }
  return { examples, unreadable };
}

describe('the examples of docs/api', () => {
  const { examples, unreadable } = docExamples();

  it('are all valid JSON', () => {
    assert.deepEqual(unreadable, []);
    // The pages show requests and answers: a reader that found none would prove nothing.
    assert.ok(examples.filter((e) => 'api_key' in e.value && e.methods.length > 0).length >= 20, `requests found: ${examples.length}`);
  });

  it('every request shown is one its method admits', () => {
    const refused: string[] = [];
    for (const e of examples.filter((x) => 'api_key' in x.value && x.methods.length > 0)) {
      const problems = e.methods.map((name) => {
        try {
          METHODS.get(name)!.checkArgs(e.value.arguments ?? {});
          return null;
        } catch (error) {
          return `${name}: ${(error as Error).message}`;
        }
      });
      if (problems.every((p) => p !== null)) refused.push(`${e.where} ${problems.join('; ')}`);
    }
    assert.deepEqual(refused, []);
  });

  it('every ok answer shown has the data its method answers', () => {
    const wrong: string[] = [];
    let checked = 0;
    for (const e of examples.filter((x) => x.value.response?.status === 'ok' && 'data' in x.value && x.methods.length > 0)) {
      checked++;
      const problems = e.methods.map((name) => {
        try {
          checkMethodData(`/v.1.1/${name}`, 200, e.value);
          return null;
        } catch (error) {
          return (error as Error).message;
        }
      });
      if (problems.every((p) => p !== null)) wrong.push(`${e.where} ${problems.join('; ')}`);
    }
    assert.deepEqual(wrong, []);
    assert.ok(checked >= 15, `answers found: ${checked}`);
  });

  it('every webhook body shown is one its event kind posts', () => {
    const bodies = examples.filter((x) => 'event' in x.value && 'event_id' in x.value);
    assert.ok(bodies.length >= 1);
    for (const e of bodies) {
      const schema = (EVENT_SCHEMAS as Record<string, TSchema>)[e.value.event];
      assert.ok(schema, `${e.where}: no event kind ${e.value.event}`);
      const check = TypeCompiler.Compile(schema);
      assert.ok(check.Check(e.value), `${e.where}: ${[...check.Errors(e.value)].slice(0, 3).map((x) => `${x.path} ${x.message}`).join('; ')}`);
    }
  });
});

/**
 * The order a new user would try the OpenAPI examples in: what an example names is made by one
 * before it (the project "newsletter", the template "welcome", the message "order-7781", the
 * webhook "app-events"), and removals come last.
 */
const TRY_ORDER = [
  'get_method_list', 'get_account_info', 'get_project_info', 'update_account',
  'create_project', 'list_projects', 'get_project', 'update_project', 'disable_project', 'enable_project', 'rotate_project_key',
  'create_template', 'update_template', 'get_template', 'list_templates', 'preview_template',
  'create_domain', 'list_domains', 'get_domain', 'check_domain',
  'create_webhook', 'list_webhooks', 'update_webhook', 'rotate_webhook_secret', 'list_webhook_deliveries', 'retry_webhook_deliveries',
  'create_mailbox', 'list_mailboxes', 'get_mailbox', 'update_mailbox', 'rotate_mailbox_secret',
  'send_message', 'get_message_receipt', 'get_message_transmissions', 'message_status', 'message_delivery_status', 'get_recipients_list',
  'get_message_content', 'get_message_source', 'get_messages', 'messages_history', 'messages_history_detailed', 'get_metrics',
  'add_to_suppression_list', 'get_suppression_list', 'remove_from_suppression_list',
  'cancel_message',
  'delete_mailbox', 'delete_webhook', 'delete_domain', 'delete_template',
  'test_error',
];

describe('the example request of every method in the OpenAPI document', () => {
  let t: TestApp;
  let dns: TestDnsServer;
  let seed: Seed;
  let doc: any;
  before(async () => {
    // The hosts the examples name resolve to this machine, where nothing answers: the examples are
    // accepted as they would be with the user's own hosts, and nothing leaves loopback.
    dns = await startDnsServer({ 'app.example.com': { a: ['127.0.0.1'] }, 'imap.example.com': { a: ['127.0.0.1'] } });
    t = await startTestApp({ config: { dnsServers: [dns.address], allowPrivateWebhooks: true } });
    seed = await t.seed('Examples');
    doc = await (await fetch(`${t.url}/openapi.json`)).json();
  });
  after(async () => {
    await t?.close();
    await dns?.close();
  });

  it('tries them all', () => {
    assert.deepEqual([...TRY_ORDER].sort(), ALL_METHODS.map((m) => m.name).sort());
  });

  it('is answered ok, sent one after the other with real keys', async () => {
    const answers: string[] = [];
    for (const name of TRY_ORDER) {
      const example = structuredClone(doc.paths[`/v.1.1/${name}`].post.requestBody.content['application/json'].example);
      example.api_key = example.api_key === 'YOUR_ACCOUNT_API_KEY' ? seed.accountKey : seed.projectKey;
      const reply = await t.call(name, example);
      const status = reply.body?.response?.status;
      // test_error answers an error by design; the rest answer ok.
      if (name === 'test_error' ? reply.status === 200 : reply.status !== 200 || status !== 'ok') answers.push(`${name}: ${reply.status} ${JSON.stringify(reply.body).slice(0, 200)}`);
    }
    assert.deepEqual(answers, []);
  });
});

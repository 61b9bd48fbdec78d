// Events are defined once (src/domain/events.ts, docs/webhooks.md "Events"): every kind has a
// schema, the one builder's output matches it, every producer in src/ uses the builder, and the
// events real flows write (delivery to a real SMTP peer, a bounce mail, cancel_message, an open
// and a click) match their kind's schema once their variables (global and recipient variables
// merged, added when a webhook is posted) are added; the rows store no copy of them.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Value } from '@sinclair/typebox/value';
import {
  buildEventPayload,
  eventVariables,
  EVENT_KINDS,
  EVENT_SCHEMAS,
  OUTCOME_EVENT_KINDS,
  type EventDetails,
  type EventKind,
  type EventSubject,
  readAcceptedPayload,
  withEventVariables,
} from '../../src/domain/events.ts';
import { returnPathFor, verpTagKey } from '../../src/domain/verp.ts';
import { processBounceMail } from '../../src/operations/bounces.ts';
import { recordClick, recordOpen } from '../../src/operations/tracking.ts';
import { WEBHOOK_EVENTS } from '../../src/operations/webhooks.ts';
import { simpleMessage, startDeliveryHarness, type DeliveryHarness } from '../delivery/harness.ts';
import { dsnMail } from '../helpers/bounce-fixtures.ts';
import { reply, startSmtpPeer, type SmtpPeer } from '../helpers/smtp-peers.ts';

/**
 * The body an endpoint receives: the stored payload with the fan-out's envelope
 * (src/webhooks/fan-out-events.ts) and the variables the dispatcher adds (src/webhooks/event-variables.ts).
 */
function bodyOf(kind: string, id: number, payload: Record<string, unknown>, variables: Record<string, unknown> = {}): Record<string, unknown> {
  return { ...payload, event: kind, event_id: `evt_${id}`, variables };
}

function schemaErrors(kind: string, body: unknown): string[] {
  assert.ok((EVENT_KINDS as readonly string[]).includes(kind), `an event of unknown kind "${kind}"`);
  const schema = EVENT_SCHEMAS[kind as EventKind];
  return [...Value.Errors(schema, body)].map((e) => `${e.path || '/'}: ${e.message}`);
}

const SUBJECT: EventSubject = {
  transmissionId: 7,
  messageId: 3,
  messageUid: 'order-7781',
  uniqueId: 'order-7781@posthorn.test',
  projectUid: 'p-1',
  recipient: 'ann@example.com',
};
const GLOBALS = { greeting: 'Hello', name: 'Everyone', order: 7781 };

function detailsFor(kind: EventKind): EventDetails {
  if (kind === 'opened') return { kind, userAgent: 'Mail/1.0' };
  if (kind === 'clicked') return { kind, userAgent: null, url: 'https://example.com/x' };
  return {
    kind,
    deliveredTo: 'ann@example.com',
    status: kind === 'delivered' || kind === 'spammed' ? 'completed' : kind === 'retry' ? 'retry' : 'failed',
    outcome: kind === 'delivered' || kind === 'spammed' ? 'sent' : kind === 'retry' ? 'deferred' : kind === 'cancelled' ? 'cancelled' : 'failed',
    resultCode: 'SMTP_250',
    resultMessage: '250 ok',
    host: kind === 'cancelled' ? null : 'mx.example.com',
    attempts: 1,
    createdAt: Date.UTC(2026, 2, 14, 9, 31, 5),
    nextAttemptAt: kind === 'retry' ? Date.UTC(2026, 2, 14, 9, 36, 5) : null,
    bounce: kind === 'bounced' ? { type: 'hard', source: 'dsn', previousStatus: 'completed' } : undefined,
  };
}

describe('event kinds and the one payload builder', () => {
  it('has a schema for every kind, and the webhook API offers exactly the kinds that exist', () => {
    assert.deepEqual(Object.keys(EVENT_SCHEMAS).sort(), [...EVENT_KINDS].sort());
    assert.deepEqual([...WEBHOOK_EVENTS].sort(), [...EVENT_KINDS].sort());
    for (const kind of EVENT_KINDS) assert.equal(EVENT_SCHEMAS[kind].properties.event.const, kind);
  });

  it('builds, for every kind, a payload whose body matches that kind\'s schema', () => {
    for (const kind of EVENT_KINDS) {
      const payload = buildEventPayload(SUBJECT, detailsFor(kind), Date.UTC(2026, 2, 14, 9, 31, 7));
      assert.deepEqual(schemaErrors(kind, bodyOf(kind, 1842, payload, eventVariables(GLOBALS, '{"name":"Ann"}'))), [], kind);
      assert.equal(payload.occurred_at, '2026-03-14T09:31:07Z');
      assert.ok(!('variables' in payload), `${kind}: an event row stores no copy of the variables`);
    }
    assert.deepEqual(eventVariables(GLOBALS, '{"name":"Ann"}'), { greeting: 'Hello', name: 'Ann', order: 7781 }, "global and recipient variables merged, the recipient's over");
    assert.notDeepEqual(schemaErrors('opened', { ...bodyOf('opened', 1, buildEventPayload(SUBJECT, detailsFor('opened'), 0)), variables: undefined }), [], 'a body without variables');
  });

  it('adds the variables to a stored webhook body as its last field, as text', () => {
    const body = JSON.stringify({ event: 'delivered', event_id: 'evt_1', recipient: 'ann@example.com' });
    const json = JSON.stringify({ name: 'Ann', n: 1 });
    assert.deepEqual(Object.entries(JSON.parse(withEventVariables(body, json))), [
      ['event', 'delivered'],
      ['event_id', 'evt_1'],
      ['recipient', 'ann@example.com'],
      ['variables', { name: 'Ann', n: 1 }],
    ]);
    assert.deepEqual(JSON.parse(withEventVariables('{}', '{}')), { variables: {} });
  });

  it('refuses bodies that drift from the schema (so the checks below can fail)', () => {
    const payload = buildEventPayload(SUBJECT, detailsFor('delivered'), 0);
    const { transmission_id: _dropped, ...missing } = payload as Record<string, unknown>;
    assert.notDeepEqual(schemaErrors('delivered', bodyOf('delivered', 1, missing)), []);
    assert.notDeepEqual(schemaErrors('opened', bodyOf('delivered', 1, payload)), [], 'an event literal of another kind');
    assert.notDeepEqual(schemaErrors('clicked', bodyOf('clicked', 1, buildEventPayload(SUBJECT, detailsFor('opened'), 0))), [], 'a click without its url');
    assert.notDeepEqual(schemaErrors('delivered', { ...bodyOf('delivered', 1, payload), occurred_at: 'yesterday' }), []);
  });

  it('reads variables that are absent or unreadable as none, never failing the event', () => {
    assert.deepEqual(eventVariables(null, null), {});
    assert.deepEqual(eventVariables(undefined, '{not json'), {});
    assert.deepEqual(eventVariables(GLOBALS, '[1,2]'), GLOBALS);
  });

  it('is the only way producers in src/ build an event: every file that records an event uses buildEventPayload', () => {
    const root = path.resolve('src');
    const files = (function walk(dir: string): string[] {
      return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? walk(path.join(dir, e.name)) : e.name.endsWith('.ts') ? [path.join(dir, e.name)] : []));
    })(root);
    const producers = files.filter((f) => /\brecordEvent\s*\(/.test(fs.readFileSync(f, 'utf8')) && !f.endsWith(path.join('storage', 'events.ts')));
    assert.ok(producers.length >= 4, `producers found: ${producers.join(', ')}`);
    for (const file of producers) {
      assert.match(fs.readFileSync(file, 'utf8'), /\bbuildEventPayload\s*\(/, `${path.relative(root, file)} records an event without buildEventPayload`);
    }
    assert.deepEqual(OUTCOME_EVENT_KINDS.filter((k) => !(EVENT_KINDS as readonly string[]).includes(k)), []);
  });
});

describe('events of real flows match their schemas', () => {
  let peer: SmtpPeer;
  let h: DeliveryHarness;

  before(async () => {
    peer = await startSmtpPeer({
      rcpt: (address) => {
        if (address.startsWith('later@')) return reply(451, '4.3.0 try again later');
        if (address.startsWith('gone@')) return reply(550, '5.1.1 <gone@example.test>: user unknown');
        if (address.startsWith('policy@')) return reply(554, '5.7.1 rejected by policy');
        return null;
      },
    });
    h = await startDeliveryHarness({ config: { transportMap: [peer.transportFor('example.test')], retrySchedule: '1m,5m' } });
  });
  after(async () => {
    await h?.close();
    await peer?.close();
  });

  it('delivered, retry, bounced, failed, cancelled, bounced by mail, opened and clicked', async () => {
    const services = h.t.app.services;
    const globals = { greeting: 'Hello', name: 'Everyone' };
    await h.send(
      simpleMessage(
        { 'ann@example.test': { name: 'Ann' }, 'bob@example.test': {}, 'later@example.test': {}, 'gone@example.test': {}, 'policy@example.test': { name: 'Pol' } },
        { variables: globals },
      ),
    );
    const held = await h.send(simpleMessage({ 'held@example.test': { name: 'Held' } }, { variables: globals }));
    const cancelled = await h.t.call('cancel_message', { api_key: h.seed.projectKey, arguments: { id: held.data.message.id } });
    assert.equal(cancelled.status, 200, JSON.stringify(cancelled.body));
    assert.equal(await h.drain(), 5);
    // gone@ is suppressed now (its hard bounce): a new copy fails without a connection.
    await h.send(simpleMessage({ 'gone@example.test': { name: 'Gone' } }, { variables: globals }));
    assert.equal(await h.drain(), 1);

    const ann = await h.transmission('ann@example.test');
    await recordOpen(services, { transmissionId: Number(ann.id), userAgent: 'Mail/1.0' });
    await recordClick(services, { transmissionId: Number(ann.id), url: 'https://example.com/x', userAgent: null });
    const bob = await h.transmission('bob@example.test');
    const bounceMail = dsnMail({ to: returnPathFor(services.config.bounceDomain, Number(bob.id), verpTagKey(services)), recipient: 'bob@example.test' });
    await processBounceMail(services, { transmissionIds: [Number(bob.id)], raw: Buffer.from(bounceMail) });

    const rows = await services.store.db.selectFrom('events').select(['id', 'type', 'payload']).orderBy('id').execute();
    // What the dispatcher adds: the message's global variables with the transmission's own over them.
    const db = services.store.db;
    const transmissions = new Map((await db.selectFrom('transmissions').select(['id', 'message_id', 'variables']).execute()).map((r) => [Number(r.id), r]));
    const messages = new Map((await db.selectFrom('messages').select(['id', 'payload']).execute()).map((r) => [Number(r.id), r.payload]));
    const seen = new Map<string, Array<Record<string, unknown>>>();
    for (const row of rows) {
      const payload = JSON.parse(row.payload) as Record<string, unknown>;
      assert.ok(!('variables' in payload), `${row.type} event of ${String(payload.recipient)} stores no copy of the variables`);
      const t = transmissions.get(payload.transmission_id as number)!;
      const variables = eventVariables(readAcceptedPayload(messages.get(Number(t.message_id))!).globalVariables, t.variables) as Record<string, unknown>;
      assert.deepEqual(schemaErrors(row.type, bodyOf(row.type, Number(row.id), payload, variables)), [], `${row.type} event of ${String(payload.recipient)}`);
      seen.set(row.type, [...(seen.get(row.type) ?? []), { ...payload, variables }]);
    }
    assert.deepEqual([...seen.keys()].sort(), ['bounced', 'cancelled', 'clicked', 'delivered', 'failed', 'opened', 'retry']);
    const of = (kind: string, recipient: string) => seen.get(kind)?.find((p) => p.recipient === recipient);
    assert.ok(of('delivered', 'ann@example.test'));
    assert.ok(of('retry', 'later@example.test')?.next_attempt_at);
    assert.ok(of('bounced', 'gone@example.test'), 'a 5.1.1 reply is a hard bounce');
    assert.ok(of('failed', 'policy@example.test') && !of('bounced', 'policy@example.test'), 'a 5.7.1 policy refusal fails the copy and is no bounce');
    assert.equal(of('failed', 'gone@example.test')?.host, null, 'a suppressed address is failed without a connection');
    assert.equal(of('bounced', 'bob@example.test')?.bounce_type, 'hard', 'the bounce mail');
    assert.equal(of('bounced', 'bob@example.test')?.previous_status, 'completed');
    // Global and recipient variables merged, in every kind (docs/webhooks.md, "variables").
    for (const kind of ['delivered', 'opened', 'clicked']) assert.deepEqual(of(kind, 'ann@example.test')?.variables, { greeting: 'Hello', name: 'Ann' }, kind);
    assert.deepEqual(of('bounced', 'bob@example.test')?.variables, globals);
    assert.deepEqual(of('failed', 'policy@example.test')?.variables, { greeting: 'Hello', name: 'Pol' });
    assert.deepEqual(of('failed', 'gone@example.test')?.variables, { greeting: 'Hello', name: 'Gone' });
    assert.deepEqual(of('cancelled', 'held@example.test')?.variables, { greeting: 'Hello', name: 'Held' });
    assert.equal(of('clicked', 'ann@example.test')?.url, 'https://example.com/x');
  });
});

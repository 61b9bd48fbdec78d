// Account-key methods of delivery webhooks (docs/webhooks.md): endpoints, their secrets, and the record of
// deliveries (pending, delivered, failed) with every attempt. Secrets appear only in the answers of
// create_webhook and rotate_webhook_secret.
import { longerThan, numberSpellingOf, wholeNumberSpellingProblem, type Args } from '../../../domain/args.ts';
import { eventIdOf, mailboxUidOfRef } from '../../../domain/outbound-refs.ts';
import { formatIsoTime } from '../../../domain/time.ts';
import {
  createWebhook,
  deleteWebhook,
  listDeliveries,
  listWebhooks,
  retryDeliveries,
  rotateWebhookSecret,
  updateWebhook,
  WEBHOOK_EVENTS,
  WEBHOOK_LIMITS,
  type DeliveryView,
  type WebhookEvent,
  type WebhookView,
} from '../../../operations/webhooks.ts';
import { defineMethods } from './types.ts';
import { Type } from '@sinclair/typebox';
import { DeliveryData, WebhookData, WebhookWithSecretData } from '../data-schemas.ts';
import { anyOf, arr, int, NO_ARGUMENTS, obj, oneOf, optional, required, str } from '../schema.ts';

function presentWebhook(view: WebhookView) {
  const { webhook } = view;
  return {
    uid: webhook.uid,
    url: webhook.url,
    events: JSON.parse(webhook.events) as string[],
    project_uid: view.projectUid,
    status: webhook.status,
    created_at: formatIsoTime(webhook.created_at),
    updated_at: formatIsoTime(webhook.updated_at),
  };
}

function presentDelivery(view: DeliveryView) {
  const r = view.request;
  return {
    id: r.id,
    kind: r.kind,
    webhook_uid: view.webhookUid,
    mailbox_uid: r.kind === 'postback' ? mailboxUidOfRef(r.ref) : null,
    event: r.event_type,
    event_id: r.event_id === null ? null : eventIdOf(r.event_id),
    url: r.url,
    status: r.state,
    attempts: r.attempts,
    last_status_code: r.last_status_code,
    last_error: r.last_error,
    created_at: formatIsoTime(r.created_at),
    next_attempt_at: r.state === 'pending' ? formatIsoTime(r.next_attempt_at) : null,
    delivered_at: formatIsoTime(r.delivered_at),
    failed_at: formatIsoTime(r.failed_at),
    attempt_log: view.attempts.map((a) => ({
      started_at: formatIsoTime(a.started_at),
      duration_ms: a.duration_ms,
      status_code: a.status_code,
      error: a.error,
    })),
  };
}

/** `events`: an array of event names or a comma-separated string (the Ruby CLI sends strings). */
function readEvents(args: Args): WebhookEvent[] | undefined {
  const raw = args.value('events');
  if (raw === undefined) return undefined;
  const list = typeof raw === 'string' ? raw.split(',').map((s) => s.trim()).filter(Boolean) : Array.isArray(raw) ? raw : null;
  if (list === null) throw args.invalid('events', 'must be an array of event names');
  if (list.length === 0) throw args.invalid('events', `must name at least one of ${WEBHOOK_EVENTS.join(', ')}`);
  const out: WebhookEvent[] = [];
  for (const item of list) {
    if (typeof item !== 'string' || !(WEBHOOK_EVENTS as readonly string[]).includes(item)) {
      throw args.invalid('events', `may only contain ${WEBHOOK_EVENTS.join(', ')}; got ${JSON.stringify(item)}`);
    }
    if (!out.includes(item as WebhookEvent)) out.push(item as WebhookEvent);
  }
  return out;
}

function readUid(args: Args): string {
  const uid = args.storedUid();
  if (longerThan(uid, WEBHOOK_LIMITS.uidChars)) throw args.invalid('uid', `must be at most ${WEBHOOK_LIMITS.uidChars} characters long`);
  return uid;
}

export const webhooksMethods = defineMethods([
  {
    name: 'create_webhook',
    key: 'account',
    summary: 'Adds a webhook endpoint (url, events, optional project_uid); returns its signing secret this once.',
    args: obj({ url: required(str({ description: 'an http(s) URL' })), events: optional(anyOf([Type.Array(Type.String()), Type.String()], 'an array of event names', { description: 'event names, as an array or a comma-separated string; default: all' })), project_uid: optional(str({ description: 'only this project\'s events; default: all projects' })), uid: optional(str()) }),
    data: Type.Object({ webhook: WebhookWithSecretData }),
    async run({ services, caller, args }) {
      const url = args.string('url', { required: true });
      const events = readEvents(args);
      const projectUid = args.string('project_uid');
      const uid = args.string('uid');
      const created = await createWebhook(services, caller.account, { uid, url, events, projectUid: projectUid === '' ? undefined : projectUid });
      return { data: { webhook: { ...presentWebhook(created), secret: created.secret } } };
    },
  },
  {
    name: 'list_webhooks',
    key: 'account',
    summary: "The account's webhook endpoints (without their secrets).",
    args: NO_ARGUMENTS,
    data: Type.Object({ webhooks: Type.Array(WebhookData) }),
    async run({ services, caller }) {
      const views = await listWebhooks(services, caller.account);
      return { data: { webhooks: views.map(presentWebhook) } };
    },
  },
  {
    name: 'update_webhook',
    key: 'account',
    summary: 'Changes a webhook endpoint: url, events, project_uid (null: all projects), status (active | disabled).',
    args: obj({ uid: required(str()), url: optional(str()), events: optional(anyOf([Type.Array(Type.String()), Type.String()], 'an array of event names', { description: 'event names, as an array or a comma-separated string; default: all' })), status: optional(oneOf(['active', 'disabled'] as const)), project_uid: optional(str({ description: 'null: all projects' })) }),
    data: Type.Object({ webhook: WebhookData }),
    async run({ services, caller, args }) {
      const uid = readUid(args);
      const url = args.string('url');
      const events = readEvents(args);
      const status = args.oneOf('status', ['active', 'disabled'] as const);
      const projectUid = 'project_uid' in args.raw ? (args.string('project_uid') ?? null) : undefined;
      const view = await updateWebhook(services, caller.account, uid, { url, events, status, projectUid: projectUid === '' ? null : projectUid });
      return { data: { webhook: presentWebhook(view) } };
    },
  },
  {
    name: 'delete_webhook',
    key: 'account',
    summary: 'Removes a webhook endpoint.',
    args: obj({ uid: required(str()) }),
    data: Type.Object({ webhook: WebhookData }),
    async run({ services, caller, args }) {
      const view = await deleteWebhook(services, caller.account, readUid(args));
      return { data: { webhook: presentWebhook(view) } };
    },
  },
  {
    name: 'rotate_webhook_secret',
    key: 'account',
    summary: "Replaces a webhook endpoint's signing secret; returns the new one this once.",
    args: obj({ uid: required(str()) }),
    data: Type.Object({ webhook: WebhookWithSecretData }),
    async run({ services, caller, args }) {
      const rotated = await rotateWebhookSecret(services, caller.account, readUid(args));
      return { data: { webhook: { ...presentWebhook(rotated), secret: rotated.secret } } };
    },
  },
  {
    name: 'list_webhook_deliveries',
    key: 'account',
    summary: 'Webhook requests and mailbox postbacks, newest first, with every attempt; filter by webhook uid, kind, status.',
    args: obj({ webhook_uid: optional(str()), kind: optional(oneOf(['webhook', 'postback'] as const)), status: optional(oneOf(['pending', 'delivered', 'failed'] as const)), before_id: optional(int({ minimum: 1, description: 'page: ids below this one' })), per_page: optional(int({ minimum: 1, description: 'default 100; at most --max-per-page, 1,000 unless configured' })) }),
    data: Type.Object({ deliveries: Type.Array(DeliveryData) }),
    async run({ services, caller, args }) {
      const webhookUid = args.string('webhook_uid');
      const kind = args.oneOf('kind', ['webhook', 'postback'] as const);
      const status = args.oneOf('status', ['pending', 'delivered', 'failed'] as const);
      const beforeId = args.int('before_id', { min: 1 });
      const perPage = args.int('per_page', { min: 1, max: services.config.maxPerPage, default: 100 });
      const views = await listDeliveries(services, caller.account, { webhookUid, kind, status, beforeId, limit: perPage });
      return { data: { deliveries: views.map(presentDelivery) } };
    },
  },
  {
    name: 'retry_webhook_deliveries',
    key: 'account',
    summary: 'Puts failed deliveries (ids from list_webhook_deliveries) back in the queue for another day of retries.',
    args: obj({ ids: required(arr(Type.Union([Type.Integer(), Type.String()]), { description: 'delivery ids (at most 1000)' })) }),
    data: Type.Object({ requeued: Type.Integer({ minimum: 0 }) }),
    async run({ services, caller, args }) {
      const raw = args.array('ids', { required: true });
      if (raw.length > 1000) throw args.invalid('ids', 'may hold at most 1000 ids');
      // An id beyond 2^53 or written 1e3 is refused naming its place, never rounded (domain/args.ts).
      raw.forEach((v, i) => {
        const spelled = numberSpellingOf(raw, i) ?? (typeof v === 'string' && /^\d{16,}$/.test(v) ? v : undefined);
        const problem = spelled === undefined ? null : wholeNumberSpellingProblem(spelled);
        if (problem !== null) throw args.invalid(`ids[${i}]`, problem);
      });
      const ids = raw.map((v) => (typeof v === 'number' ? v : typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : NaN));
      if (ids.some((n) => !Number.isSafeInteger(n) || n < 1)) throw args.invalid('ids', 'must hold positive whole numbers');
      const requeued = await retryDeliveries(services, caller.account, ids);
      return { data: { requeued } };
    },
  },
]);

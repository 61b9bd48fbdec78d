// Webhook endpoints of an account (docs/webhooks.md) and the record of what was posted to them.
//
// Invariants: an endpoint's secret is stored sealed and returned only by createWebhook and
// rotateWebhookSecret; a URL is checked against the SSRF policy when it is saved (and again by the
// dispatcher before every request); an endpoint scoped to a project only receives that project's
// events.
import { randomUUID } from 'node:crypto';
import { checkChosenUid } from '../domain/args.ts';
import { ApiError, duplicateUid, limitReached } from '../domain/errors.ts';
import { reopenInboundEmails } from '../storage/inbound-emails.ts';
import { listOutbound, listOutboundAttempts, requeueFailedOutbound } from '../storage/outbound.ts';
import type { OutboundAttempt, OutboundRequest, Webhook } from '../storage/outbound-schema.ts';
import { findProjectById, findProjectByUid } from '../storage/projects.ts';
import { isDuplicate } from '../storage/duplicates.ts';
import type { Account } from '../storage/schema.ts';
import type { Tx } from '../storage/store.ts';
import { countWebhooks, deleteWebhook as deleteWebhookRow, findProjectUids, findWebhookByUid, insertWebhook, listWebhooks as listWebhookRows, updateWebhook as updateWebhookRow } from '../storage/webhooks.ts';
import { generateWebhookSecret } from '../domain/signatures.ts';
import type { Services } from '../services.ts';
import { checkOutboundUrl } from './outbound-url.ts';

const WEBHOOK_URL = { field: 'url', label: 'Webhook URL' };

export const WEBHOOK_EVENTS = ['delivered', 'failed', 'bounced', 'retry', 'opened', 'clicked', 'spammed', 'cancelled'] as const;
export type WebhookEvent = (typeof WEBHOOK_EVENTS)[number];

export const WEBHOOK_LIMITS = Object.freeze({ webhooksPerAccount: 50, uidChars: 200 });

export interface WebhookInput {
  uid?: string;
  url: string;
  /** default: every event */
  events?: WebhookEvent[];
  /** scope to one project of the account; absent: all projects */
  projectUid?: string;
}

export interface WebhookChanges {
  url?: string;
  events?: WebhookEvent[];
  /** null: remove the scope */
  projectUid?: string | null;
  status?: 'active' | 'disabled';
}

export interface WebhookView {
  webhook: Webhook;
  projectUid: string | null;
}

async function projectIdOf(trx: Tx, account: Account, projectUid: string): Promise<number> {
  const project = await findProjectByUid(trx, account.id, projectUid);
  if (!project) throw new ApiError('not_found', `Project ${projectUid} not found.`);
  return Number(project.id);
}

async function projectUidOf(trx: Tx, projectId: number | null): Promise<string | null> {
  if (projectId === null) return null;
  return (await findProjectById(trx, projectId))?.uid ?? null;
}

async function requireWebhook(db: Tx, account: Account, uid: string): Promise<Webhook> {
  const hook = await findWebhookByUid(db, account.id, uid);
  if (!hook) throw new ApiError('not_found', `Webhook ${uid} not found.`);
  return hook;
}

export async function createWebhook(services: Services, account: Account, input: WebhookInput): Promise<WebhookView & { secret: string }> {
  const uid = checkChosenUid('uid', input.uid, WEBHOOK_LIMITS.uidChars) ?? randomUUID();
  const url = await checkOutboundUrl(services, input.url, WEBHOOK_URL);
  const secret = generateWebhookSecret();
  const now = services.clock.now();
  const webhook = await services.store.write(async (trx) => {
    if (await findWebhookByUid(trx, account.id, uid)) throw duplicateUid(uid);
    if ((await countWebhooks(trx, account.id)) >= WEBHOOK_LIMITS.webhooksPerAccount) {
      throw limitReached('account', WEBHOOK_LIMITS.webhooksPerAccount, 'webhooks');
    }
    const projectId = input.projectUid === undefined ? null : await projectIdOf(trx, account, input.projectUid);
    const inserted = await insertWebhook(trx, {
      account_id: account.id,
      project_id: projectId,
      uid,
      url,
      events: JSON.stringify(input.events ?? [...WEBHOOK_EVENTS]),
      secret: services.secrets.seal(secret),
      status: 'active',
      created_at: now,
      updated_at: now,
    });
    // A concurrent create with the same uid loses at the unique constraint.
    if (isDuplicate(inserted)) throw duplicateUid(uid);
    return inserted;
  });
  return { webhook, projectUid: input.projectUid ?? null, secret };
}

export async function listWebhooks(services: Services, account: Account): Promise<WebhookView[]> {
  const db = services.store.db;
  const rows = await listWebhookRows(db, account.id);
  // One query for the scopes of all endpoints (at most WEBHOOK_LIMITS.webhooksPerAccount).
  const projectUids = await findProjectUids(db, [...new Set(rows.flatMap((w) => (w.project_id === null ? [] : [Number(w.project_id)])))]);
  return rows.map((webhook) => ({ webhook, projectUid: webhook.project_id === null ? null : (projectUids.get(Number(webhook.project_id)) ?? null) }));
}

export async function updateWebhook(services: Services, account: Account, uid: string, changes: WebhookChanges): Promise<WebhookView> {
  const url = changes.url === undefined ? undefined : await checkOutboundUrl(services, changes.url, WEBHOOK_URL);
  const now = services.clock.now();
  const webhook = await services.store.write(async (trx) => {
    const current = await requireWebhook(trx, account, uid);
    const patch: Parameters<typeof updateWebhookRow>[2] = { updated_at: now };
    if (url !== undefined) patch.url = url;
    if (changes.events !== undefined) patch.events = JSON.stringify(changes.events);
    if (changes.status !== undefined) patch.status = changes.status;
    if (changes.projectUid !== undefined) patch.project_id = changes.projectUid === null ? null : await projectIdOf(trx, account, changes.projectUid);
    return (await updateWebhookRow(trx, current.id, patch))!;
  });
  return { webhook, projectUid: await projectUidOf(services.store.db, webhook.project_id) };
}

/** Deletes the endpoint; requests not yet delivered to it fail at their next attempt. */
export async function deleteWebhook(services: Services, account: Account, uid: string): Promise<WebhookView> {
  return services.store.write(async (trx) => {
    const webhook = await requireWebhook(trx, account, uid);
    const projectUid = await projectUidOf(trx, webhook.project_id);
    await deleteWebhookRow(trx, webhook.id);
    return { webhook, projectUid };
  });
}

/** A new secret, effective from the next attempt on (retries of older events are signed with it). */
export async function rotateWebhookSecret(services: Services, account: Account, uid: string): Promise<WebhookView & { secret: string }> {
  const secret = generateWebhookSecret();
  const sealed = services.secrets.seal(secret);
  const now = services.clock.now();
  const webhook = await services.store.write(async (trx) => {
    const current = await requireWebhook(trx, account, uid);
    return (await updateWebhookRow(trx, current.id, { secret: sealed, updated_at: now }))!;
  });
  return { webhook, projectUid: await projectUidOf(services.store.db, webhook.project_id), secret };
}

export interface DeliveryQuery {
  webhookUid?: string;
  kind?: 'webhook' | 'postback';
  status?: 'pending' | 'delivered' | 'failed';
  beforeId?: number;
  limit: number;
}

export interface DeliveryView {
  request: OutboundRequest;
  webhookUid: string | null;
  attempts: OutboundAttempt[];
}

/** Outbound requests of the account, newest first, each with its attempts. */
export async function listDeliveries(services: Services, account: Account, q: DeliveryQuery): Promise<DeliveryView[]> {
  const db = services.store.db;
  const webhookId = q.webhookUid === undefined ? undefined : Number((await requireWebhook(db, account, q.webhookUid)).id);
  const rows = await listOutbound(db, { accountId: account.id, webhookId, kind: q.kind, state: q.status, beforeId: q.beforeId, limit: q.limit });
  const attempts = await listOutboundAttempts(db, rows.map((r) => r.id));
  const hooks = new Map((await listWebhookRows(db, account.id)).map((h) => [Number(h.id), h.uid]));
  return rows.map((request) => ({
    request,
    webhookUid: request.webhook_id === null ? null : (hooks.get(request.webhook_id) ?? null),
    attempts: attempts.filter((a) => a.request_id === request.id),
  }));
}

/**
 * Puts failed requests of the account back in the queue; returns how many were requeued. A
 * requeued postback's email is posting again in the same transaction, so the mailbox watcher
 * flags it \Seen once the postback is delivered (docs/mailboxes.md).
 */
export async function retryDeliveries(services: Services, account: Account, ids: number[]): Promise<number> {
  const now = services.clock.now();
  const count = await services.store.write(async (trx) => {
    const requeued = await requeueFailedOutbound(trx, account.id, ids, now);
    await reopenInboundEmails(trx, requeued, now);
    return requeued.length;
  });
  if (count > 0) services.store.wake('outbound');
  return count;
}

// Retention (docs/operations.md, "Retention"): how long a project's messages, with their
// transmissions, attempts, events and outbound requests, are kept, and the purge that deletes what
// is older. The project's retention_days setting wins over the server's --retention-days; 0 keeps
// everything. will_purge_at in the API (get_messages) is willPurgeAt(): the purge deletes a message
// at its first run after that instant.
//
// The purge works in small batches, each its own short transaction, and pauses between batches, so
// ingest and delivery never wait behind it (on SQLite the single writer is held for one batch at a
// time). Rows still in use are never deleted (storage/retention.ts lists them).
import { setTimeout as sleep } from 'node:timers/promises';
import { DAY_MS } from '../domain/time.ts';
import { recordPurgedRows } from '../observability/attempts.ts';
import type { Services } from '../services.ts';
import {
  emptyPurgedCounts,
  listProjectRetentionRows,
  purgeEventsBatch,
  purgeMessagesBatch,
  purgeOutboundBatch,
  type PurgedCounts,
} from '../storage/retention.ts';
import { pruneOutbound } from '../storage/outbound.ts';
import type { Project } from '../storage/schema.ts';
import { readProjectSettings } from './projects.ts';

export type { PurgedCounts } from '../storage/retention.ts';

/** Parent rows deleted per transaction. */
export const PURGE_BATCH = 200;
/** Pause between two batches: the writer is free for everyone else meanwhile. */
export const PURGE_PAUSE_MS = 10;

/** How long finished outbound requests stay listed by list_webhook_deliveries (docs/webhooks.md). */
export const DELIVERED_OUTBOUND_KEPT_MS = 7 * DAY_MS;
export const FAILED_OUTBOUND_KEPT_MS = 30 * DAY_MS;

/** Days the project's history is kept; 0: forever. */
export function retentionDaysOf(services: Services, project: Pick<Project, 'settings'>): number {
  return readProjectSettings(project).retention_days ?? services.config.retentionDays;
}

/**
 * When a message created at `createdAt` (scheduled for `sendAt`, if it was) becomes due for the
 * purge (epoch ms), or null: never. Retention counts from when the message was due: its send_at, else acceptance.
 */
export function willPurgeAt(services: Services, project: Pick<Project, 'settings'>, createdAt: number, sendAt: number | null = null): number | null {
  const days = retentionDaysOf(services, project);
  return days > 0 ? Math.max(createdAt, sendAt ?? 0) + days * DAY_MS : null;
}

export interface PurgeOptions {
  batchSize?: number;
  pauseMs?: number;
  /** called after every batch with the totals so far */
  onProgress?: (totals: Readonly<PurgedCounts>) => void;
  /** checked between batches: true ends the purge early (the service is stopping) */
  shouldStop?: () => boolean;
}

function add(totals: PurgedCounts, more: Partial<PurgedCounts>): void {
  for (const [k, v] of Object.entries(more)) totals[k as keyof PurgedCounts] += v ?? 0;
}

/** Deletes everything past its retention; returns what it deleted. */
export async function purgeExpired(services: Services, opts: PurgeOptions = {}): Promise<PurgedCounts> {
  const { store, clock } = services;
  const limit = Math.max(1, opts.batchSize ?? PURGE_BATCH);
  const pauseMs = opts.pauseMs ?? PURGE_PAUSE_MS;
  const totals = emptyPurgedCounts();
  const now = clock.now();
  const stop = () => opts.shouldStop?.() === true;

  /** Runs one kind of batch until it comes back short (or the purge is told to stop). */
  const drain = async (batch: () => Promise<Partial<PurgedCounts> & { parents: number }>): Promise<void> => {
    while (!stop()) {
      const { parents, ...counts } = await batch();
      add(totals, counts);
      recordPurgedRows(services, counts);
      if (parents > 0) opts.onProgress?.(totals);
      if (parents < limit) return;
      await sleep(pauseMs);
    }
  };

  const projects = await listProjectRetentionRows(store.db);
  const scopes: Array<{ projectId: number | null; cutoff: number }> = [];
  for (const p of projects) {
    const days = retentionDaysOf(services, p);
    if (days > 0) scopes.push({ projectId: p.id, cutoff: now - days * DAY_MS });
  }
  // Rows of no project (account-wide webhooks) follow the server's retention.
  if (services.config.retentionDays > 0) scopes.push({ projectId: null, cutoff: now - services.config.retentionDays * DAY_MS });

  for (const scope of scopes) {
    if (stop()) break;
    const projectId = scope.projectId;
    if (projectId !== null) {
      await drain(async () => {
        const c = await store.write((trx) => purgeMessagesBatch(trx, { projectId, cutoff: scope.cutoff, limit }));
        return { ...c, parents: c.messages };
      });
    }
    await drain(async () => {
      const n = await store.write((trx) => purgeEventsBatch(trx, { ...scope, limit }));
      return { events: n, parents: n };
    });
    await drain(async () => {
      const r = await store.write((trx) => purgeOutboundBatch(trx, { ...scope, limit }));
      return { outbound_requests: r.requests, outbound_attempts: r.attempts, parents: r.requests };
    });
  }
  // Finished outbound requests leave the delivery listing after their own, shorter time.
  await drain(async () => {
    const n = await store.write((trx) => pruneOutbound(trx, { deliveredBefore: now - DELIVERED_OUTBOUND_KEPT_MS, failedBefore: now - FAILED_OUTBOUND_KEPT_MS, limit }));
    return { outbound_requests: n, parents: n };
  });
  return totals;
}

// The dashboard's overview of a project: per bucket of time, copies sent, delivered, deferred,
// failed, bounced, opened and clicked over the last 24 hours, 7 days or 30 days, and the queue now.
// Sent, delivered, failed, opened and clicked come from the transmissions' timestamps (the report
// indexes of migration 070); deferred and bounced from the event outbox (events_project_created).
import type { Services } from '../services.ts';
import { countEventBuckets, countTransmissionBuckets, summariseQueue } from '../storage/message-views.ts';
import type { Project } from '../storage/schema.ts';

export const OVERVIEW_RANGES = {
  '24h': { spanMs: 24 * 3_600_000, bucketMs: 3_600_000 },
  '7d': { spanMs: 7 * 86_400_000, bucketMs: 6 * 3_600_000 },
  '30d': { spanMs: 30 * 86_400_000, bucketMs: 86_400_000 },
} as const;
export type OverviewRange = keyof typeof OVERVIEW_RANGES;

export const OVERVIEW_SERIES = ['sent', 'delivered', 'deferred', 'failed', 'bounced', 'opened', 'clicked'] as const;
export type OverviewSeries = (typeof OVERVIEW_SERIES)[number];

export interface ProjectOverview {
  range: OverviewRange;
  /** start of each bucket, epoch ms */
  buckets: number[];
  series: Record<OverviewSeries, number[]>;
  totals: Record<OverviewSeries, number>;
  /** oldestDueAt: the oldest waiting copy that is due now; nextScheduledAt: the soonest one not yet due (send_at, a retry's time). */
  queue: { queued: number; retrying: number; oldestDueAt: number | null; nextScheduledAt: number | null };
}

export async function getProjectOverview(services: Services, project: Project, range: OverviewRange): Promise<ProjectOverview> {
  const { spanMs, bucketMs } = OVERVIEW_RANGES[range];
  const now = services.clock.now();
  const endMs = Math.ceil(now / bucketMs) * bucketMs;
  const startMs = endMs - spanMs;
  const n = spanMs / bucketMs;
  const buckets = Array.from({ length: n }, (_, i) => startMs + i * bucketMs);
  const db = services.store.db;
  const columns = { sent: 'created_at', delivered: 'completed_at', failed: 'failed_at', opened: 'opened_at', clicked: 'clicked_at' } as const;
  const series = Object.fromEntries(OVERVIEW_SERIES.map((s) => [s, new Array<number>(n).fill(0)])) as Record<OverviewSeries, number[]>;
  const [columnCounts, eventCounts, queue] = await Promise.all([
    Promise.all(Object.entries(columns).map(async ([name, column]) => ({ name: name as OverviewSeries, rows: await countTransmissionBuckets(db, project.id, column, startMs, endMs, bucketMs) }))),
    countEventBuckets(db, project.id, ['retry', 'bounced'], startMs, endMs, bucketMs),
    summariseQueue(db, project.id, now),
  ]);
  for (const { name, rows } of columnCounts) for (const r of rows) if (r.bucket >= 0 && r.bucket < n) series[name][r.bucket] += r.count;
  for (const r of eventCounts) {
    const name: OverviewSeries = r.type === 'retry' ? 'deferred' : 'bounced';
    if (r.bucket >= 0 && r.bucket < n) series[name][r.bucket] += r.count;
  }
  const totals = Object.fromEntries(OVERVIEW_SERIES.map((s) => [s, series[s].reduce((a, b) => a + b, 0)])) as Record<OverviewSeries, number>;
  const queued = queue.find((q) => q.status === 'queued');
  const retrying = queue.find((q) => q.status === 'retry');
  const dues = queue.map((q) => q.oldest_due).filter((d): d is number => d !== null);
  const scheduled = queue.map((q) => q.next_scheduled).filter((d): d is number => d !== null);
  return {
    range,
    buckets,
    series,
    totals,
    queue: { queued: queued?.count ?? 0, retrying: retrying?.count ?? 0, oldestDueAt: dues.length ? Math.min(...dues) : null, nextScheduledAt: scheduled.length ? Math.min(...scheduled) : null },
  };
}

// get_metrics: counts of the project's transmissions in the current hour, day, week and month
// (UTC) against the previous one. Definitions (docs/api/reports.md "get_metrics"):
//   created    created_at in the period
//   queued     created in the period and still queued or retry
//   delivered  completed_at in the period
//   failed     failed_at in the period
//   rejected   failed in the period with result_code SUPPRESSED (refused by the suppression list)
//   opened     opened_at in the period;  clicked: clicked_at in the period
//   spammed    spammed_at in the period (a recipient's complaint: the sandbox's complaint address;
//              Posthorn receives no feedback-loop reports from real mailbox providers yet)
// The current period runs from its start to its end (so far, in practice); the previous one is
// the whole period before it.
//
// Percentages follow what PostageApp's own API answers (as recorded in its official .NET client's
// test fixtures): a metric's percent is its value over `created` of the same period; `created`
// and `queued` carry no percent (0); diff_percent is current_percent - previous_percent, in
// percentage points (not the relative change of the value).
import { DAY_MS } from '../../domain/time.ts';
import { countInWindows, type MetricColumn, type MetricFilter, type TimeWindow } from '../../storage/reports.ts';
import type { Project } from '../../storage/schema.ts';
import type { Services } from '../../services.ts';

export const METRIC_PERIODS = ['hour', 'date', 'week', 'month'] as const;
export type MetricPeriod = (typeof METRIC_PERIODS)[number];

export const METRIC_NAMES = ['delivered', 'opened', 'clicked', 'failed', 'rejected', 'spammed', 'created', 'queued'] as const;
export type MetricName = (typeof METRIC_NAMES)[number];

export interface MetricValue {
  current_value: number;
  previous_value: number;
  current_percent: number;
  previous_percent: number;
  diff_percent: number;
}

export type Metrics = Record<MetricPeriod, Record<MetricName, MetricValue>>;

const HOUR_MS = 3_600_000;

/** What each metric counts: which timestamp, and what else must hold. */
const METRIC_SOURCES: Record<MetricName, { column: MetricColumn; filter: MetricFilter }> = {
  created: { column: 'created_at', filter: 'none' },
  queued: { column: 'created_at', filter: 'pending' },
  delivered: { column: 'completed_at', filter: 'none' },
  failed: { column: 'failed_at', filter: 'none' },
  rejected: { column: 'failed_at', filter: 'suppressed' },
  opened: { column: 'opened_at', filter: 'none' },
  clicked: { column: 'clicked_at', filter: 'none' },
  spammed: { column: 'spammed_at', filter: 'none' },
};

/** The current and previous window of each period containing nowMs (UTC; weeks start on Monday). */
export function metricWindows(nowMs: number): Record<MetricPeriod, { current: TimeWindow; previous: TimeWindow }> {
  const hourStart = Math.floor(nowMs / HOUR_MS) * HOUR_MS;
  const dayStart = Math.floor(nowMs / DAY_MS) * DAY_MS;
  const daysSinceMonday = (new Date(dayStart).getUTCDay() + 6) % 7;
  const weekStart = dayStart - daysSinceMonday * DAY_MS;
  const now = new Date(nowMs);
  const monthStart = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1);
  const nextMonthStart = Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1);
  const previousMonthStart = Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - 1, 1);
  const pair = (start: number, next: number, previous: number) => ({
    current: { startMs: start, endMs: next },
    previous: { startMs: previous, endMs: start },
  });
  return {
    hour: pair(hourStart, hourStart + HOUR_MS, hourStart - HOUR_MS),
    date: pair(dayStart, dayStart + DAY_MS, dayStart - DAY_MS),
    week: pair(weekStart, weekStart + 7 * DAY_MS, weekStart - 7 * DAY_MS),
    month: pair(monthStart, nextMonthStart, previousMonthStart),
  };
}

/** The metrics whose percent is not taken over `created` (PostageApp answers 0 for them). */
const WITHOUT_PERCENT: ReadonlySet<MetricName> = new Set(['created', 'queued']);

/** Two decimals, so differences of rounded percents stay free of float noise. */
function roundHundredths(n: number): number {
  return Math.round(n * 100) / 100;
}

/** Percent with two decimals, 0 when the whole is 0. */
function percentOf(part: number, whole: number): number {
  return whole === 0 ? 0 : roundHundredths((part / whole) * 100);
}

export async function getMetrics(services: Services, projectIds: readonly number[]): Promise<Metrics> {
  const periods = metricWindows(services.clock.now());
  // Window order: hour current, hour previous, date current, ... (two per period).
  const windows = METRIC_PERIODS.flatMap((p) => [periods[p].current, periods[p].previous]);
  const counts = {} as Record<MetricName, number[]>;
  for (const name of METRIC_NAMES) {
    const source = METRIC_SOURCES[name];
    counts[name] = await countInWindows(services.store.db, projectIds, source.column, source.filter, windows);
  }
  const metrics = {} as Metrics;
  METRIC_PERIODS.forEach((period, p) => {
    const createdNow = counts.created[2 * p];
    const createdBefore = counts.created[2 * p + 1];
    metrics[period] = {} as Record<MetricName, MetricValue>;
    for (const name of METRIC_NAMES) {
      const current = counts[name][2 * p];
      const previous = counts[name][2 * p + 1];
      const currentPercent = WITHOUT_PERCENT.has(name) ? 0 : percentOf(current, createdNow);
      const previousPercent = WITHOUT_PERCENT.has(name) ? 0 : percentOf(previous, createdBefore);
      metrics[period][name] = {
        current_value: current,
        previous_value: previous,
        current_percent: currentPercent,
        previous_percent: previousPercent,
        diff_percent: roundHundredths(currentPercent - previousPercent),
      };
    }
  });
  return metrics;
}

export async function getProjectMetrics(services: Services, project: Project): Promise<{ metrics: Metrics }> {
  return { metrics: await getMetrics(services, [project.id]) };
}

// messages_history and messages_history_detailed: one record per transmission of the project,
// newest first, filtered by inclusive UTC dates and paged.
import { DAY_MS, formatApiTime } from '../../domain/time.ts';
import { listHistoryPage, numberNewTransmissions, type HistoryRow } from '../../storage/reports.ts';
import type { Project } from '../../storage/schema.ts';
import type { Services } from '../../services.ts';
import { withFields } from '../../domain/objects.ts';

export interface HistoryRequest {
  /** first day included, as epoch ms of its first millisecond (UTC), or null for no lower bound */
  fromDayMs: number | null;
  /** last day included, as epoch ms of its first millisecond (UTC), or null for no upper bound */
  toDayMs: number | null;
  /** 1-based */
  page: number;
  perPage: number;
  detailed: boolean;
}

export interface HistoryRecord {
  unique_id: string;
  message_id: number;
  uid: string;
  recipient: string;
  status: string;
  created_at: string | null;
}

export interface DetailedHistoryRecord extends HistoryRecord {
  result_code: string | null;
  result_message: string | null;
  completed_at: string | null;
  failed_at: string | null;
  opened_at: string | null;
  clicked_at: string | null;
  attempts: number;
}

export interface HistoryPage {
  /** the dates filtered on, [from, to] as YYYY-MM-DD, null where open (PostageApp answers this too) */
  date_range: [string | null, string | null];
  messages_history: HistoryRecord[] | DetailedHistoryRecord[];
  page: number;
  per_page: number;
  /** whether a further page holds at least one record (found by reading one row more, not by counting) */
  has_more: boolean;
}

export async function listTransmissionHistory(services: Services, project: Project, req: HistoryRequest): Promise<HistoryPage> {
  // Rows written since the project's last history request get their numbers first: paging seeks by them.
  await numberNewTransmissions(services.store, project.id);
  const rows = await listHistoryPage(services.store.db, {
    projectId: project.id,
    fromMs: req.fromDayMs,
    // `to` is inclusive: everything before the start of the following day.
    untilMs: req.toDayMs === null ? null : req.toDayMs + DAY_MS,
    offset: (req.page - 1) * req.perPage,
    limit: req.perPage + 1,
  });
  const hasMore = rows.length > req.perPage;
  const pageRows = hasMore ? rows.slice(0, req.perPage) : rows;
  return {
    date_range: [formatDay(req.fromDayMs), formatDay(req.toDayMs)],
    messages_history: req.detailed ? pageRows.map(presentDetailed) : pageRows.map(presentRecord),
    page: req.page,
    per_page: req.perPage,
    has_more: hasMore,
  };
}

function formatDay(dayMs: number | null): string | null {
  return dayMs === null ? null : new Date(dayMs).toISOString().slice(0, 10);
}

function presentRecord(row: HistoryRow): HistoryRecord {
  return {
    unique_id: row.unique_id,
    message_id: Number(row.message_id),
    uid: row.uid,
    recipient: row.recipient,
    status: row.status,
    created_at: formatApiTime(row.created_at),
  };
}

function presentDetailed(row: HistoryRow): DetailedHistoryRecord {
  // Per record of a page: withFields, not a spread (domain/objects.ts).
  return withFields(presentRecord(row), {
    result_code: row.result_code,
    result_message: row.result_message,
    completed_at: formatApiTime(row.completed_at),
    failed_at: formatApiTime(row.failed_at),
    opened_at: formatApiTime(row.opened_at),
    clicked_at: formatApiTime(row.clicked_at),
    attempts: Number(row.attempts),
  });
}

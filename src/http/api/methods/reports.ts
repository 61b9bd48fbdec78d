// The read methods: what happened to the messages a project sent (docs/api/reports.md). Each
// handler reads its arguments, calls an operation in operations/reports/, and returns `data`.
import { Args, cutText } from '../../../domain/args.ts';
import { ApiError, callError } from '../../../domain/errors.ts';
import { parseApiDate } from '../../../domain/time.ts';
import type { Services } from '../../../services.ts';
import { listTransmissionHistory } from '../../../operations/reports/history.ts';
import {
  getMessageDeliveryStatus,
  getMessageReceipt,
  getMessageStatusCounts,
  getMessageTransmissions,
  getRecipientsList,
} from '../../../operations/reports/message-report.ts';
import { listMessages } from '../../../operations/reports/messages.ts';
import { getProjectMetrics } from '../../../operations/reports/metrics.ts';
import { getSuppressionList } from '../../../operations/reports/suppression-list.ts';
import { getAccountInfo, getProjectInfo } from '../../../operations/reports/usage-info.ts';
import { KeyedInOrder } from '../envelope.ts';
import { defineMethods, projectOf, type MethodCall } from './types.ts';
import { Type } from '@sinclair/typebox';
import { apiTime, HistoryPageData, MessageListing, MessageRef, MetricsData, SuppressionEntry, TransmissionReport, UsageInfo } from '../data-schemas.ts';
import { int, NO_ARGUMENTS, obj, optional, str, topLevelUid } from '../schema.ts';

/** Default per_page of every listing (the spec's figure), lowered to the configured maximum. */
const DEFAULT_PER_PAGE = 250;
/** Keeps (page - 1) * per_page a safe integer whatever the client sends. */
const MAX_PAGE = 1_000_000_000;

/** The top-level uid of the methods that look a message up by targetUid. */
export const TARGET_UID = Type.Object({ uid: topLevelUid('the message looked up when arguments.uid is absent; echoed in response.uid') });

/**
 * The message a lookup is about: `arguments.uid` when given, else the request's top-level uid
 * (Node 2.x and the Ruby gem send the target in arguments and a random uid at the top level).
 * A number is read as its decimal spelling; "" counts as absent.
 */
export function targetUid({ args, uid }: Pick<MethodCall, 'args' | 'uid'>): string {
  const fromArgs = args.string('uid');
  if (fromArgs !== undefined && fromArgs !== '') return fromArgs;
  if (typeof uid === 'string' && uid !== '') return uid;
  if (typeof uid === 'number') return String(uid);
  if (uid !== undefined && uid !== null && uid !== '') {
    throw callError('"uid" must be a string or a number');
  }
  throw new ApiError('bad_request', 'Missing uid: give the uid of the message in arguments.uid (or the top-level uid).');
}

function readPaging(services: Services, args: Args): { page: number; perPage: number } {
  const max = services.config.maxPerPage;
  return {
    page: args.int('page', { min: 1, max: MAX_PAGE, default: 1 }),
    perPage: args.int('per_page', { min: 1, max, default: Math.min(DEFAULT_PER_PAGE, max) }),
  };
}

/** An inclusive YYYY-MM-DD date (UTC) as the epoch ms of its first millisecond, or null when absent. */
function readDay(args: Args, field: string): number | null {
  const text = args.string(field);
  if (text === undefined || text.trim() === '') return null;
  const ms = parseApiDate(text.trim());
  if (ms === null) throw args.invalid(field, `must be a date written YYYY-MM-DD, got ${JSON.stringify(cutText(text))}`);
  return ms;
}

/** The .NET client's from/to beside api_key (runHistory). */
const HISTORY_TOP_LEVEL = Type.Object({
  from: Type.Optional(Type.String({ description: 'as arguments.from, read when arguments has no from' })),
  to: Type.Optional(Type.String({ description: 'as arguments.to, read when arguments has no to' })),
});

async function runHistory(call: MethodCall, detailed: boolean) {
  const { services, caller, args } = call;
  // The official .NET client sends from/to at the top level, beside api_key: read them there when
  // arguments does not have them.
  const top = new Args(call.body);
  const datesOf = (field: string) => (args.has(field) || !top.has(field) ? args : top);
  const fromDayMs = readDay(datesOf('from'), 'from');
  const toDayMs = readDay(datesOf('to'), 'to');
  if (fromDayMs !== null && toDayMs !== null && fromDayMs > toDayMs) {
    throw args.invalid('from', `(${cutText(datesOf('from').string('from') ?? '')}) must not be after "to" (${cutText(datesOf('to').string('to') ?? '')})`);
  }
  const { page, perPage } = readPaging(services, args);
  return { data: await listTransmissionHistory(services, projectOf(caller), { fromDayMs, toDayMs, page, perPage, detailed }) };
}

export const reportsMethods = defineMethods([
  {
    name: 'get_message_receipt',
    key: 'project',
    summary: 'The id and url of a message, by uid: proof that a send was received.',
    args: obj({ uid: optional(str({ description: 'the message uid; default: the top-level uid' })) }),
    topLevel: TARGET_UID,
    data: Type.Object({ message: MessageRef }),
    async run({ services, caller, args, uid }) {
      return { data: await getMessageReceipt(services, projectOf(caller), targetUid({ args, uid })) };
    },
  },
  {
    name: 'get_message_transmissions',
    key: 'project',
    summary: "A message's delivery report: each recipient's status, times and result.",
    args: obj({ uid: optional(str({ description: 'the message uid; default: the top-level uid' })) }),
    topLevel: TARGET_UID,
    data: Type.Object({ message: Type.Object({ id: Type.Integer(), send_at: apiTime('when a message scheduled with send_at is due; null when it was due at acceptance') }), transmissions: Type.Record(Type.String(), TransmissionReport, { description: 'by recipient address (a repeated address: "address#2", ...)' }) }),
    async run({ services, caller, args, uid }) {
      return { data: await getMessageTransmissions(services, projectOf(caller), targetUid({ args, uid })) };
    },
  },
  {
    name: 'messages_history',
    key: 'project',
    summary: "The project's transmissions, newest first, by inclusive date range, paged.",
    args: obj({ from: optional(str({ description: 'first day, YYYY-MM-DD (UTC), inclusive; also read at the top level' })), to: optional(str({ description: 'last day, YYYY-MM-DD (UTC), inclusive; also read at the top level' })), page: optional(int({ minimum: 1, maximum: MAX_PAGE, description: 'default 1' })), per_page: optional(int({ minimum: 1, description: 'default 250; at most --max-per-page, 1,000 unless configured' })) }),
    data: HistoryPageData,
    topLevel: HISTORY_TOP_LEVEL,
    run: (call) => runHistory(call, false),
  },
  {
    name: 'messages_history_detailed',
    key: 'project',
    summary: 'messages_history with each transmission\'s result, attempt count and event times.',
    args: obj({ from: optional(str({ description: 'first day, YYYY-MM-DD (UTC), inclusive; also read at the top level' })), to: optional(str({ description: 'last day, YYYY-MM-DD (UTC), inclusive; also read at the top level' })), page: optional(int({ minimum: 1, maximum: MAX_PAGE, description: 'default 1' })), per_page: optional(int({ minimum: 1, description: 'default 250; at most --max-per-page, 1,000 unless configured' })) }),
    data: HistoryPageData,
    topLevel: HISTORY_TOP_LEVEL,
    run: (call) => runHistory(call, true),
  },
  {
    name: 'get_messages',
    key: 'project',
    summary: "The project's messages, newest first, keyed by uid, with transmission counts, paged.",
    args: obj({ page: optional(int({ minimum: 1, maximum: MAX_PAGE, description: 'default 1' })), per_page: optional(int({ minimum: 1, description: 'default 250; at most --max-per-page, 1,000 unless configured' })) }),
    data: Type.Record(Type.String(), MessageListing, { description: 'by message uid' }),
    async run({ services, caller, args }) {
      // Newest first, as the keys of data (an object would put integer-like uids first).
      return { data: new KeyedInOrder(await listMessages(services, projectOf(caller), readPaging(services, args))) };
    },
  },
  {
    name: 'get_metrics',
    key: 'project',
    summary: 'Transmission counts this hour, day, week and month against the previous ones.',
    args: NO_ARGUMENTS,
    data: MetricsData,
    async run({ services, caller }) {
      return { data: await getProjectMetrics(services, projectOf(caller)) };
    },
  },
  {
    name: 'get_suppression_list',
    key: 'project',
    summary: 'The addresses the project will not send to, keyed by address.',
    args: obj({ page: optional(int({ minimum: 1, maximum: MAX_PAGE, description: 'default 1' })), per_page: optional(int({ minimum: 1, description: 'default 250; at most --max-per-page, 1,000 unless configured' })) }),
    data: Type.Record(Type.String(), SuppressionEntry, { description: 'by address' }),
    async run({ services, caller, args }) {
      const paged = args.has('page') || args.has('per_page');
      return { data: await getSuppressionList(services, projectOf(caller), paged ? readPaging(services, args) : null) };
    },
  },
  {
    name: 'get_project_info',
    key: 'project',
    summary: "The project's name, url and transmission counts.",
    args: NO_ARGUMENTS,
    data: Type.Object({ project: UsageInfo }),
    async run({ services, caller }) {
      return { data: await getProjectInfo(services, projectOf(caller)) };
    },
  },
  {
    name: 'get_account_info',
    key: 'any',
    summary: "The account's name, url and transmission counts over all its projects (a project key answers for its account).",
    args: NO_ARGUMENTS,
    data: Type.Object({ account: UsageInfo }),
    async run({ services, caller }) {
      return { data: await getAccountInfo(services, caller.account) };
    },
  },
  {
    name: 'message_status',
    key: 'project',
    summary: "Legacy: how many of a message's transmissions are in each status.",
    args: obj({ uid: optional(str({ description: 'the message uid; default: the top-level uid' })) }),
    topLevel: TARGET_UID,
    data: Type.Object({ message_status: Type.Record(Type.String(), Type.Integer({ minimum: 0 }), { description: 'transmissions by status' }) }),
    async run({ services, caller, args, uid }) {
      return { data: { message_status: await getMessageStatusCounts(services, projectOf(caller), targetUid({ args, uid })) } };
    },
  },
  {
    name: 'message_delivery_status',
    key: 'project',
    summary: 'Legacy: the status of a message as a whole (response.delivery_status) and of each recipient.',
    args: obj({ uid: optional(str({ description: 'the message uid; default: the top-level uid' })) }),
    topLevel: TARGET_UID,
    data: Type.Object({ delivery_status: Type.Array(Type.Object({ unique_id: Type.String(), recipient: Type.String(), status: Type.String() })) }, { description: "each recipient's status; response.delivery_status is the whole message's" }),
    response: Type.Object({ delivery_status: Type.Union([Type.Literal('queued'), Type.Literal('failed'), Type.Literal('completed')], { description: "the whole message's status: queued while any copy is not final, completed when every copy completed, else failed" }) }),
    async run({ services, caller, args, uid }) {
      const report = await getMessageDeliveryStatus(services, projectOf(caller), targetUid({ args, uid }));
      return { data: { delivery_status: report.recipients }, response: { delivery_status: report.overall } };
    },
  },
  {
    name: 'get_recipients_list',
    key: 'project',
    summary: "Legacy: a message's recipient addresses.",
    args: obj({ uid: optional(str({ description: 'the message uid; default: the top-level uid' })) }),
    topLevel: TARGET_UID,
    data: Type.Object({ recipients: Type.Array(Type.String()) }),
    async run({ services, caller, args, uid }) {
      return { data: { recipients: await getRecipientsList(services, projectOf(caller), targetUid({ args, uid })) } };
    },
  },
]);

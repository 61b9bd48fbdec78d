// message: find a project's messages (by recipient, subject, template, status, uid) and show one
// with its schedule, recipient override and per-recipient timeline: accepted, each attempt with its
// SMTP reply, opens, clicks, the final state or when it is due; a page of recipients at a time,
// filtered by address (docs/cli.md). Message content is the sender's, shown as text only.
import { unhandled } from './command-args.ts';
import { print, withServices } from './output.ts';
import { isoTime, resolveProject, table } from './scope.ts';
import { SWITCH, TEXT, type CliCommand, type CommandInput } from './types.ts';

async function message({ config, args, flags }: CommandInput): Promise<number> {
  const [sub, uid] = args;
  const json = flags.bool('json');
  const ops = await import('../operations/message-views.ts');
  return withServices(config, async (services) => {
    const { project } = await resolveProject(services, flags);
    switch (sub) {
      case 'find': {
        const result = await ops.searchMessages(services, project, {
          recipient: flags.text('recipient'),
          subject: flags.text('subject'),
          template: flags.text('template'),
          status: flags.text('status'),
          uid: flags.text('uid'),
          fromMs: flags.time('since') ?? null,
          cursor: flags.text('cursor'),
        });
        const out = {
          messages: result.items.map((i) => ({
            uid: i.message.uid,
            subject: i.message.subject,
            template: i.message.template,
            recipients: i.message.recipient_count,
            first_recipient: i.firstRecipient,
            statuses: i.statuses,
            scheduled_for: i.scheduledFor === null ? null : isoTime(i.scheduledFor),
            created_at: isoTime(i.message.created_at),
          })),
          next: result.next,
        };
        const rows = out.messages.map((m) => [
          m.created_at,
          m.uid,
          Object.entries(m.statuses).map(([s, n]) => `${s}:${n}`).join(' ') + (m.scheduled_for ? ` (scheduled for ${m.scheduled_for})` : ''),
          m.first_recipient,
          m.subject,
        ]);
        print(json, out, table(['CREATED', 'UID', 'STATUS', 'TO', 'SUBJECT'], rows, '(no messages)') + (out.next ? `\n(more: --cursor ${out.next})` : ''));
        return 0;
      }
      case 'show': {
        const found = await ops.findProjectMessageByUidOrId(services, project, uid);
        const view = await ops.getMessageView(services, found, project, { recipient: flags.text('recipient'), cursor: flags.text('cursor') });
        const out = {
          uid: view.message.uid,
          unique_id: view.message.unique_id,
          subject: view.message.subject,
          template: view.message.template,
          created_at: isoTime(view.message.created_at),
          send_at: view.sendAt === null ? null : isoTime(view.sendAt),
          recipient_override: view.recipientOverride,
          statuses: view.statuses,
          recipient_filter: view.recipientFilter,
          truncated: view.nextRecipients !== null,
          next: view.nextRecipients,
          recipients: view.recipients.map((r) => ({
            recipient: r.transmission.recipient,
            delivered_to: r.deliveredTo,
            status: r.transmission.status,
            result_code: r.transmission.result_code,
            timeline: r.entries.map((e) => ({
              at: isoTime(e.at),
              kind: e.kind,
              text: e.text ?? null,
              ...(e.attempt ? { outcome: e.attempt.outcome, result_code: e.attempt.result_code, mx_host: e.attempt.mx_host, duration_ms: e.attempt.duration_ms } : {}),
            })),
          })),
        };
        const lines = [`message ${out.uid} <${out.unique_id}>  ${out.created_at}`, `subject: ${out.subject ?? ''}`];
        if (out.send_at) lines.push(`scheduled for: ${out.send_at} (send_at)`);
        if (out.recipient_override) lines.push(`recipient override: every copy is sent to ${out.recipient_override}`);
        lines.push(`copies: ${Object.entries(out.statuses).map(([s, n]) => `${s}:${n}`).join(' ')}`);
        for (const r of out.recipients) {
          const to = r.delivered_to !== r.recipient ? ` -> ${r.delivered_to} (recipient override)` : '';
          lines.push('', `${r.recipient}: ${r.status}${r.result_code ? ` (${r.result_code})` : ''}${to}`);
          for (const e of r.timeline) {
            const detail = 'outcome' in e ? `${e.outcome} ${e.result_code ?? ''} ${e.mx_host ?? ''} ${e.duration_ms} ms` : '';
            lines.push(`  ${e.at}  ${e.kind.padEnd(9)} ${detail}${e.text ? ` ${e.text}` : ''}`.trimEnd());
          }
        }
        if (out.recipients.length === 0 && out.recipient_filter !== null) lines.push('', `(no recipient starts with ${out.recipient_filter})`);
        if (out.next) lines.push('', `(more recipients: --cursor ${out.next})`);
        // The sender's text: no control character reaches the terminal.
        print(json, out, lines.map((l) => l.replace(/[\u0000-\u0009\u000b-\u001f\u007f]/g, ' ')).join('\n'));
        return 0;
      }
      default:
        return unhandled(sub);
    }
  });
}

export const messageCommands: CliCommand[] = [
  {
    name: 'message',
    usage: [
      'message find [--recipient TEXT] [--subject TEXT] [--template SLUG] [--status S] [--since DATE] [--uid UID] [--project UID] [--json]',
      'message show UID|ID [--recipient PREFIX] [--cursor C] [--project UID] [--json]   its recipients with their timelines, 100 at a time',
    ],
    description: 'Messages of a project: newest first, 50 at a time (--cursor for the next page); one message with its recipients, 100 at a time (--cursor), those whose address starts with --recipient.',
    flags: {
      json: SWITCH,
      account: TEXT,
      project: TEXT,
      recipient: TEXT,
      subject: TEXT,
      template: TEXT,
      status: { kind: 'text', oneOf: async () => (await import('../operations/reports/message-report.ts')).TRANSMISSION_STATUSES },
      since: { kind: 'time' },
      uid: TEXT,
      cursor: TEXT,
    },
    subcommands: { find: {}, show: { args: ['UID'] } },
    run: message,
  },
];

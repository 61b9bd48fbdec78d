// send: a test message from the terminal, through the same operation as send_message (docs/cli.md).
// The running service delivers it; `posthorn message show UID` follows it.
import { randomUUID } from 'node:crypto';
import { flag, print, withServices } from './output.ts';
import { projectCaller, resolveProject } from './scope.ts';
import { UsageError, type CliCommand, type CommandInput } from './types.ts';

async function send({ config, flags }: CommandInput): Promise<number> {
  const json = flags.has('json');
  const to = (flags.get('to') ?? []).flatMap((t) => t.split(',')).map((t) => t.trim()).filter(Boolean);
  if (to.length === 0) throw new UsageError('send needs --to ADDRESS (repeatable)');
  const template = flag(flags, 'template');
  const text = flag(flags, 'text');
  const html = flag(flags, 'html');
  if (!template && text === undefined && html === undefined) throw new UsageError('send needs --text TEXT, --html HTML or --template SLUG');
  let variables: Record<string, unknown> | undefined;
  const raw = flag(flags, 'variables');
  if (raw !== undefined) {
    try {
      variables = JSON.parse(raw) as Record<string, unknown>;
    } catch {
      throw new UsageError('--variables expects a JSON object');
    }
  }
  const headers: Record<string, string> = {};
  const from = flag(flags, 'from');
  const subject = flag(flags, 'subject');
  if (from) headers.from = from;
  if (subject !== undefined) headers.subject = subject;
  const content: Record<string, string> = {};
  if (text !== undefined) content['text/plain'] = text;
  if (html !== undefined) content['text/html'] = html;
  const args = {
    recipients: to,
    headers,
    ...(Object.keys(content).length ? { content } : {}),
    ...(template ? { template } : {}),
    ...(variables ? { variables } : {}),
  };
  const [{ Args }, { readSendRequest }, { sendMessage }] = await Promise.all([
    import('../domain/args.ts'),
    import('../domain/send-request.ts'),
    import('../operations/send-message.ts'),
  ]);
  return withServices(config, async (services) => {
    const { account, project } = await resolveProject(services, flags);
    const request = readSendRequest(Args.from(args), { uid: flag(flags, 'uid') ?? randomUUID(), recipientOverride: undefined });
    const sent = await sendMessage(services, projectCaller(account, project), request);
    const out = { uid: request.uid, id: sent.id, url: sent.url, recipients: to };
    print(json, out, `message ${out.uid} accepted for ${to.join(', ')} (posthorn message show ${out.uid})`);
    return 0;
  });
}

export const sendCommands: CliCommand[] = [
  {
    name: 'send',
    usage: ['send --to ADDRESS [--from ADDRESS] [--subject TEXT] (--text TEXT | --html HTML | --template SLUG) [--variables JSON] [--project UID] [--json]'],
    description: 'Sends a test message from the terminal through the project, as send_message does; the running service delivers it.',
    flags: ['json', 'account', 'project', 'to', 'from', 'subject', 'text', 'html', 'template', 'variables', 'uid'],
    run: send,
  },
];

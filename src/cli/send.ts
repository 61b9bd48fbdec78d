// send: a test message from the terminal, through the same operation as send_message (docs/cli.md).
// The running service delivers it; `posthorn message show UID` follows it.
import { randomUUID } from 'node:crypto';
import { print, withServices } from './output.ts';
import { projectCaller, resolveProject } from './scope.ts';
import { SWITCH, TEXT, type CliCommand, type CommandInput } from './types.ts';

async function send({ config, flags }: CommandInput): Promise<number> {
  const json = flags.bool('json');
  const to = flags.list('to');
  const template = flags.text('template');
  const text = flags.text('text');
  const html = flags.text('html');
  const variables = flags.object('variables');
  const headers: Record<string, string> = {};
  const from = flags.text('from');
  const subject = flags.text('subject');
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
  // Read as send_message reads its arguments, before the database is opened: a message it would
  // refuse opens nothing.
  const request = readSendRequest(Args.from(args), { uid: flags.text('uid') ?? randomUUID(), recipientOverride: undefined });
  return withServices(config, async (services) => {
    const { account, project } = await resolveProject(services, flags);
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
    flags: {
      json: SWITCH,
      account: TEXT,
      project: TEXT,
      to: { kind: 'list' },
      from: TEXT,
      subject: TEXT,
      text: TEXT,
      html: TEXT,
      template: TEXT,
      variables: { kind: 'json-object' },
      uid: TEXT,
    },
    needs: ['to', ['text', 'html', 'template']],
    run: send,
  },
];

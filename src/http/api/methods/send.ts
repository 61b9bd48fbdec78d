// send_message (project key): the ingest path. Parsing and checks are the operation's; this row
// only passes the request's parts and presents data.message.{id, url}.
import type { ProjectCaller } from '../../../operations/context.ts';
import { sendMessage } from '../../../operations/send-message.ts';
import { defineMethods } from './types.ts';

export const sendMethods = defineMethods([
  {
    name: 'send_message',
    key: 'project',
    summary: 'Accepts a message for delivery: one transmission per recipient. Answers data.message.{id, url}.',
    async run({ services, caller, args, uid, body }) {
      const message = await sendMessage(services, caller as ProjectCaller, { args, uid, recipientOverride: body.recipient_override });
      return { data: { message: { id: message.id, url: message.url } } };
    },
  },
]);

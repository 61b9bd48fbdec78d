// get_message_content and get_message_source (project key): what a message said, as the dashboard's
// message page shows it (operations/message-views.ts). PostageApp has no method for either;
// docs/dashboard.md describes them.
import { Type } from '@sinclair/typebox';
import { findProjectMessage, getMessageContent, getMessageSource } from '../../../operations/message-views.ts';
import { nullable } from '../data-schemas.ts';
import { obj, optional, str } from '../schema.ts';
import { TARGET_UID, targetUid } from './reports.ts';
import { defineMethods, projectOf } from './types.ts';

const MESSAGE_ARGS = obj({
  uid: optional(str({ description: 'the message uid; default: the top-level uid' })),
  recipient: optional(str({ description: 'the copy whose variables are rendered in; default: the first recipient' })),
});

export const MessageContentData = Type.Object({
  message: Type.Object({
    uid: Type.String(),
    recipient: nullable(Type.String({ description: 'the copy rendered' })),
    delivered_to: nullable(Type.String({ description: 'where that copy really went: the recipient_override, or the recipient' })),
    subject: nullable(Type.String()),
    from: nullable(Type.String()),
    headers: Type.Record(Type.String(), Type.String()),
    text: nullable(Type.String()),
    html: nullable(Type.String({ description: 'attacker-controlled markup: show it only in a sandboxed frame' })),
    attachments: Type.Array(Type.Object({ filename: Type.String(), content_type: Type.String(), size: Type.Integer({ description: 'bytes' }) })),
  }),
});

export const MessageSourceData = Type.Object({
  message: Type.Object({
    uid: Type.String(),
    recipient: nullable(Type.String()),
    delivered_to: nullable(Type.String({ description: 'the address the source is addressed to: the recipient_override, or the recipient' })),
    source: Type.String({ description: 'the MIME message as composed for the copy (without the DKIM signature and tracking added at sending), base64' }),
  }),
});

export const messageContentMethods = defineMethods([
  {
    name: 'get_message_content',
    key: 'project',
    summary: 'The content of a message as a recipient received it: subject, From, headers, text and HTML parts, attachment names.',
    args: MESSAGE_ARGS,
    topLevel: TARGET_UID,
    data: MessageContentData,
    async run({ services, caller, args, uid }) {
      const message = await findProjectMessage(services, projectOf(caller), targetUid({ args, uid }));
      const c = await getMessageContent(services, message, args.string('recipient') || undefined);
      return {
        data: {
          message: {
            uid: message.uid,
            recipient: c.renderedFor,
            delivered_to: c.deliveredTo,
            subject: c.subject,
            from: c.from,
            headers: c.headers,
            text: c.text,
            html: c.html,
            attachments: c.attachments.map((a) => ({ filename: a.filename, content_type: a.contentType, size: a.sizeBytes })),
          },
        },
      };
    },
  },
  {
    name: 'get_message_source',
    key: 'project',
    summary: 'The MIME source of a message as composed for a recipient, base64.',
    args: MESSAGE_ARGS,
    topLevel: TARGET_UID,
    data: MessageSourceData,
    async run({ services, caller, args, uid }) {
      const message = await findProjectMessage(services, projectOf(caller), targetUid({ args, uid }));
      const { recipient, deliveredTo, mime } = await getMessageSource(services, message, args.string('recipient') || undefined);
      return { data: { message: { uid: message.uid, recipient, delivered_to: deliveredTo, source: mime.toString('base64') } } };
    },
  },
]);

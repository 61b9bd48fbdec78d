// send_message (project key): the ingest path. The edge reads the wire format into a SendRequest
// (domain/send-request.ts); the operation checks and stores it; this row presents data.message.{id, url}.
// docs/api/send-message.md describes every argument.
import { Type } from '@sinclair/typebox';
import { readSendRequest } from '../../../domain/send-request.ts';
import type { ProjectCaller } from '../../../operations/context.ts';
import { sendMessage } from '../../../operations/send-message.ts';
import { MessageRef } from '../data-schemas.ts';
import { any, anyOf, bool, map, obj, optional, str, text, topLevelUid } from '../schema.ts';
import { defineMethods } from './types.ts';

const Part = optional(text());
const Content = anyOf(
  [Type.String(), obj({ 'text/plain': Part, 'text/html': Part, 'text/css': Part })],
  'a string or an object {"text/plain", "text/html", "text/css"}',
  { description: 'the text/plain part as a string, or the parts by MIME type' },
);

export const SEND_MESSAGE_ARGS = obj({
  recipients: optional(
    any({
      description:
        'Required. An address ("a@example.com", "Ann <a@example.com>"), a comma-separated list, an array of these (nested arrays are flattened), or an object of address to that recipient\'s variables.',
    }),
  ),
  headers: optional(map(any(), { description: 'header name to value (from, subject, reply-to, cc, bcc, custom X- headers); names case-insensitive' })),
  content: optional(Content),
  message: optional(anyOf([Type.String(), obj({ 'text/plain': Part, 'text/html': Part, 'text/css': Part })], 'a string or an object {"text/plain", "text/html", "text/css"}', { description: 'alias of content' })),
  template: optional(str({ description: 'slug of one of the project\'s templates ("" means none)' })),
  variables: optional(map(any(), { description: 'global variables for {{name}} in subject, From, text and HTML' })),
  attachments: optional(
    map(anyOf([obj({ content_type: optional(text()), content: optional(text({ description: 'base64' })) }), Type.Null()], 'an object {"content_type": ..., "content": <base64>}'), {
      description: 'file name to {content_type, content (base64)}; a null entry is skipped',
    }),
  ),
  recipient_override: optional(str({ description: 'deliver every copy to this address instead (also accepted at the top level)' })),
  deliver: optional(bool({ description: 'default true; false validates and stores, never sends' })),
  tracking: optional(bool({ description: 'open and click tracking for this message; absent follows the project setting' })),
  send_at: optional(
    str({ description: 'when to send: ISO 8601 with a zone ("2026-03-14T09:30:00Z", "...+01:00") or "YYYY-MM-DD HH:MM:SS" in UTC; the past means now; at most --max-schedule-ahead-ms ahead (default 90 days)' }),
  ),
  subject: optional(str({ description: 'shorthand for headers.subject (the header wins when both are given)' })),
  from: optional(str({ description: 'shorthand for headers.from (the header wins when both are given)' })),
});

export const sendMethods = defineMethods([
  {
    name: 'send_message',
    key: 'project',
    summary: 'Accepts a message for delivery: one transmission per recipient. Answers data.message.{id, url}.',
    args: SEND_MESSAGE_ARGS,
    topLevel: Type.Object({
      uid: topLevelUid(
        'names the message, unique per project: a second send with a uid already used is refused as a duplicate (400 bad_request); a number is stored as its text; at most 255 characters; default: the SHA-256 of the arguments, so an identical resend is a duplicate too (docs/api/send-message.md, "Uid"); echoed in response.uid',
      ),
      recipient_override: Type.Optional(Type.String({ description: 'as arguments.recipient_override, which wins when both are given' })),
    }),
    data: Type.Object({ message: MessageRef }),
    async run({ services, caller, args, uid, body }) {
      const request = readSendRequest(args, { uid, recipientOverride: body.recipient_override, maxRecipients: services.config.maxRecipients });
      const message = await sendMessage(services, caller as ProjectCaller, request);
      return { data: { message: { id: message.id, url: message.url } } };
    },
  },
]);

// The payload of each webhook event kind, for the OpenAPI document's `webhooks` (http/openapi.ts),
// as docs/webhooks.md describes the request body.
import { Type, type TSchema } from '@sinclair/typebox';
import { nullable } from './api/data-schemas.ts';

const IsoTime = Type.String({ description: 'ISO 8601, UTC' });

function payload(event: string, extra: Record<string, TSchema> = {}) {
  return Type.Object(
    {
      event: Type.Literal(event),
      event_id: Type.String({ description: 'evt_<n>: unique per event, the same on every retry' }),
      project_uid: Type.String(),
      occurred_at: IsoTime,
      transmission_id: Type.Integer(),
      message_id: Type.Integer({ description: "send_message's data.message.id" }),
      message_uid: Type.String(),
      unique_id: Type.String({ description: 'the Message-ID without brackets' }),
      recipient: Type.String({ description: 'as given to send_message' }),
      delivered_to: Type.String({ description: 'where the copy really went, after recipient_override' }),
      status: Type.Union(['queued', 'retry', 'completed', 'failed'].map((s) => Type.Literal(s)), { description: "the transmission's API status after the event" }),
      result_code: Type.Optional(nullable(Type.String())),
      result_message: Type.Optional(nullable(Type.String())),
      host: Type.Optional(nullable(Type.String())),
      attempts: Type.Optional(Type.Integer({ minimum: 0 })),
      created_at: Type.Optional(IsoTime),
      next_attempt_at: Type.Optional(nullable(IsoTime)),
      variables: Type.Optional(Type.Record(Type.String(), Type.Unknown(), { description: 'global variables with the recipient\'s own over them' })),
      ...extra,
    },
    { description: 'Fields may be added later: ignore unknown ones.' },
  );
}

const reader = { user_agent: Type.Optional(nullable(Type.String({ description: "the reader's User-Agent" }))) };

export const WEBHOOK_PAYLOADS: Record<string, TSchema> = {
  delivered: payload('delivered'),
  retry: payload('retry'),
  failed: payload('failed'),
  bounced: payload('bounced'),
  opened: payload('opened', reader),
  clicked: payload('clicked', { ...reader, url: Type.String({ description: 'the link followed' }) }),
};

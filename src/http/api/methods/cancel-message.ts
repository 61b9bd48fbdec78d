// cancel_message (project key): cancels a message's copies that have not gone out yet
// (operations/cancel-message.ts). docs/api/cancel-message.md describes the arguments and answer.
import { Type } from '@sinclair/typebox';
import { ApiError } from '../../../domain/errors.ts';
import { cancelMessage } from '../../../operations/cancel-message.ts';
import type { ProjectCaller } from '../../../operations/context.ts';
import { anyOf, arr, int, obj, optional, str, text, topLevelUid } from '../schema.ts';
import { defineMethods } from './types.ts';

/** Most recipients one call names. */
const MAX_NAMED_RECIPIENTS = 1000;

export const CANCEL_MESSAGE_ARGS = obj({
  uid: optional(str({ description: 'the message\'s uid (the one send_message was given or derived); also accepted at the top level' })),
  id: optional(int({ minimum: 1, description: 'or the message\'s id, as send_message answered data.message.id' })),
  recipients: optional(
    anyOf([text(), arr(text())], 'an address or a list of addresses', { description: 'cancel only these recipients\' copies (Cc and Bcc copies are recipients too); default all' }),
  ),
});

export const CancelData = Type.Object({
  message: Type.Object({ id: Type.Integer(), uid: Type.String() }),
  cancelled: Type.Array(Type.String(), { description: 'recipients whose copy this call cancelled (now failed, CANCELLED)' }),
  not_cancelled: Type.Record(Type.String(), Type.Union(['completed', 'failed', 'in_flight', 'not_a_recipient'].map((r) => Type.Literal(r))), {
    description: 'the other recipients, with why: already completed or failed, being delivered right now (in_flight), or not a recipient of the message',
  }),
});

export const cancelMessageMethods = defineMethods([
  {
    name: 'cancel_message',
    key: 'project',
    summary: "Cancels a message's copies (all, or the recipients named) that have not been sent yet: they end failed with result CANCELLED.",
    args: CANCEL_MESSAGE_ARGS,
    topLevel: Type.Object({ uid: topLevelUid('the message to cancel when arguments has neither uid nor id; echoed in response.uid') }),
    data: CancelData,
    async run({ services, caller, args, uid }) {
      const id = args.int('id', { min: 1 });
      // The top-level uid names the message only when arguments name none: beside arguments.id it
      // is the request's own reference (the npm client sends a random one with every call).
      const givenUid = args.string('uid') || (id === undefined && typeof uid === 'string' && uid !== '' ? uid : undefined);
      if (givenUid === undefined && id === undefined) throw new ApiError('bad_request', 'Missing required argument "uid" (or "id"): the message to cancel.');
      const named = args.value('recipients');
      const recipients = named == null ? undefined : typeof named === 'string' ? [named] : (named as string[]);
      if (recipients && recipients.length > MAX_NAMED_RECIPIENTS) throw args.invalid('recipients', `may name at most ${MAX_NAMED_RECIPIENTS} addresses`);
      const result = await cancelMessage(services, caller as ProjectCaller, { uid: givenUid, id, recipients });
      return { data: { message: result.message, cancelled: result.cancelled, not_cancelled: result.notCancelled } };
    },
  },
]);

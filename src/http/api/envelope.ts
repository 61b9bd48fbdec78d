// The envelope: {"response": {"status", "uid", "message"?}, "data"?}. response.uid echoes the
// request's top-level uid with its JSON type, null when none was sent. Unknown errors never reach
// the client verbatim.
import type { FastifyReply } from 'fastify';
import type { Json } from '../../domain/args.ts';
import { ApiError, MESSAGES } from '../../domain/errors.ts';
import type { MethodResult } from './methods/types.ts';

export function sendOk(reply: FastifyReply, uid: Json | undefined, result: MethodResult): FastifyReply {
  return reply
    .code(200)
    .header('content-type', 'application/json; charset=utf-8')
    .send(JSON.stringify({ response: { status: 'ok', uid: uid ?? null, ...result.response }, data: result.data }));
}

export function sendError(reply: FastifyReply, uid: Json | undefined, error: unknown): FastifyReply {
  const known = error instanceof ApiError ? error : new ApiError('internal_server_error', MESSAGES.internal);
  return reply
    .code(known.httpCode)
    .header('content-type', 'application/json; charset=utf-8')
    .send(JSON.stringify({ response: { status: known.status, uid: uid ?? null, message: known.message } }));
}

// The envelope: {"response": {"status", "uid", "message"?}, "data"?}. response.uid echoes the
// request's top-level uid with its JSON type, null when none was sent. Unknown errors never reach
// the client verbatim; a database that cannot be reached is 503 naming the cause (nothing of the
// call was stored), with Retry-After, as a rate-limited call (429) is.
import type { FastifyReply } from 'fastify';
import type { Json } from '../../domain/args.ts';
import { ApiError, MESSAGES, StoreUnavailableError } from '../../domain/errors.ts';
import type { MethodResult } from './methods/types.ts';

/** Seconds a client should wait before retrying while the database is unavailable. */
export const STORE_RETRY_AFTER_S = 5;

/** An ApiError that tells the client when to retry (429, 503): sent as Retry-After, in whole seconds. */
export class RetryLaterError extends ApiError {
  constructor(
    status: 'too_many_requests' | 'service_unavailable',
    message: string,
    readonly retryAfterSeconds: number,
  ) {
    super(status, message);
  }
}

export function sendOk(reply: FastifyReply, uid: Json | undefined, result: MethodResult): FastifyReply {
  return reply
    .code(200)
    .header('content-type', 'application/json; charset=utf-8')
    .send(JSON.stringify({ response: { status: 'ok', uid: uid ?? null, ...result.response }, data: result.data }));
}

/** The cause's StoreUnavailableError, however deep storage or a library wrapped it; else null. */
export function storeUnavailableIn(error: unknown): StoreUnavailableError | null {
  for (let e = error, depth = 0; e instanceof Error && depth < 8; e = e.cause, depth++) {
    if (e instanceof StoreUnavailableError) return e;
  }
  return null;
}

/** The ApiError a thrown value is answered with. */
export function apiErrorOf(error: unknown): ApiError {
  if (error instanceof ApiError) return error;
  const unavailable = storeUnavailableIn(error);
  if (unavailable) {
    return new RetryLaterError(
      'service_unavailable',
      `The database is unavailable (${unavailable.message}); nothing of this call was stored. Please retry shortly.`,
      STORE_RETRY_AFTER_S,
    );
  }
  return new ApiError('internal_server_error', MESSAGES.internal);
}

export function sendError(reply: FastifyReply, uid: Json | undefined, error: unknown): FastifyReply {
  const known = apiErrorOf(error);
  if (known instanceof RetryLaterError) reply.header('retry-after', String(known.retryAfterSeconds));
  // nosniff: an error may echo what it was given (a path, a uid), and must never be read as a page.
  return reply
    .code(known.httpCode)
    .header('content-type', 'application/json; charset=utf-8')
    .header('x-content-type-options', 'nosniff')
    .send(JSON.stringify({ response: { status: known.status, uid: uid ?? null, message: known.message } }));
}

// The envelope: {"response": {"status", "uid", "message"?}, "data"?}. response.uid echoes the
// request's top-level uid with its JSON type, null when none was sent. Unknown errors never reach
// the client verbatim; a database that cannot be reached is 503 naming the cause (nothing of the
// call was stored), with Retry-After, as a rate-limited call (429) is.
import { STATUS_CODES } from 'node:http';
import type { FastifyReply } from 'fastify';
import { numberSpellingOf, type Json, type JsonObject } from '../../domain/args.ts';
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

/**
 * A top-level uid sent as a whole number beyond 2^53: the body keeps it as its digit string
 * (http/api/body.ts), and response.uid echoes it as the number it was, every digit written.
 */
export class NumberUid {
  constructor(readonly digits: string) {}
}

export type EchoedUid = Json | NumberUid | undefined;

/** The request's uid as response.uid echoes it: a digit string the body reader made from a number is a number again. */
export function echoedUid(body: JsonObject): EchoedUid {
  const uid = body.uid;
  return typeof uid === 'string' && numberSpellingOf(body, 'uid') === uid ? new NumberUid(uid) : uid;
}

/** The envelope's JSON text; response.uid is written first after status (so a NumberUid is put in its place). */
function envelopeText(response: Record<string, Json>, uid: EchoedUid, data?: unknown): string {
  const number = uid instanceof NumberUid ? uid.digits : null;
  const text = JSON.stringify({ response: { status: response.status, uid: number === null ? (uid as Json | undefined) ?? null : null, ...response }, data });
  return number === null ? text : text.replace('"uid":null', `"uid":${number}`);
}

export function sendOk(reply: FastifyReply, uid: EchoedUid, result: MethodResult): FastifyReply {
  const text =
    uid instanceof NumberUid || result.data instanceof KeyedInOrder
      ? orderedText(envelopeText({ status: 'ok', ...result.response }, uid, result.data instanceof KeyedInOrder ? ORDERED_DATA : result.data), result.data)
      : JSON.stringify({ response: { status: 'ok', uid: uid ?? null, ...result.response }, data: result.data });
  return reply.code(200).header('content-type', 'application/json; charset=utf-8').send(text);
}

/**
 * `data` keyed by something a client chose (get_messages: by message uid) in an order the API
 * promises (newest first). A JavaScript object puts integer-like keys ("2", "10") first, in
 * numeric order, and reads "__proto__" as its prototype: such data is written from its entries,
 * in their order (docs/api/reports.md, get_messages).
 */
export class KeyedInOrder {
  constructor(readonly entries: ReadonlyArray<readonly [string, unknown]>) {}
}

/** What stands for KeyedInOrder data in the envelope until its text is put in. */
const ORDERED_DATA = 0;

function orderedText(text: string, data: unknown): string {
  if (!(data instanceof KeyedInOrder)) return text;
  const body = data.entries.map(([key, value]) => `${JSON.stringify(key)}:${JSON.stringify(value)}`).join(',');
  // "data" is the envelope's last field: its placeholder ends the text.
  const placeholder = `"data":${ORDERED_DATA}}`;
  return `${text.slice(0, text.length - placeholder.length)}"data":{${body}}}`;
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
    const stored = unavailable.mayHaveWritten
      ? 'its answer was lost, so this call may have been stored: retry it with the same uid (if it was stored, the answer says the uid already exists)'
      : 'nothing of this call was stored';
    return new RetryLaterError('service_unavailable', `The database is unavailable (${unavailable.reason}); ${stored}. Please retry shortly.`, STORE_RETRY_AFTER_S);
  }
  return new ApiError('internal_server_error', MESSAGES.internal);
}

export function sendError(reply: FastifyReply, uid: EchoedUid, error: unknown): FastifyReply {
  const known = apiErrorOf(error);
  if (known instanceof RetryLaterError) reply.header('retry-after', String(known.retryAfterSeconds));
  // nosniff: an error may echo what it was given (a path, a uid), and must never be read as a page.
  return reply
    .code(known.httpCode)
    .header('content-type', 'application/json; charset=utf-8')
    .header('x-content-type-options', 'nosniff')
    .send(envelopeText({ status: known.status, message: known.message }, uid));
}

/** The envelope of an error, as JSON text, with no uid (no request was read). */
export function errorEnvelopeJson(error: ApiError): string {
  return envelopeText({ status: error.status, message: error.message }, null);
}

/**
 * A whole HTTP response in the envelope, for the answers written on the socket itself, before or
 * without a request Fastify could answer (a request Node's parser refused, headers too large, a
 * request that did not arrive in time: http/server.ts). The connection is closed after it.
 */
export function rawErrorResponse(error: ApiError): string {
  const body = errorEnvelopeJson(error);
  return (
    `HTTP/1.1 ${error.httpCode} ${STATUS_CODES[error.httpCode] ?? 'Error'}\r\n` +
    'Content-Type: application/json; charset=utf-8\r\n' +
    'X-Content-Type-Options: nosniff\r\n' +
    `Content-Length: ${Buffer.byteLength(body)}\r\n` +
    'Connection: close\r\n\r\n' +
    body
  );
}

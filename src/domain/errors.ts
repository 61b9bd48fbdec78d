// The edge contract: every response.status the API can answer, with its HTTP code, in one table.
// Operations throw ApiError with one of these names; anything else that escapes an operation is a
// defect and is answered as internal_server_error without its text (see http/api/envelope.ts).

export const API_STATUSES = {
  ok: 200,
  bad_request: 400,
  unauthorized: 401,
  not_found: 404,
  method_not_allowed: 405,
  request_timeout: 408,
  invalid_json: 406,
  invalid_utf8: 406,
  call_error: 406,
  conflict: 409,
  precondition_failed: 412,
  payload_too_large: 413,
  unsupported_media_type: 415,
  locked: 423,
  too_many_requests: 429,
  request_header_fields_too_large: 431,
  internal_server_error: 500,
  service_unavailable: 503,
} as const;

export type ApiStatus = keyof typeof API_STATUSES;
export type ErrorStatus = Exclude<ApiStatus, 'ok'>;

export class ApiError extends Error {
  readonly status: ErrorStatus;
  readonly httpCode: number;
  constructor(status: ErrorStatus, message: string) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.httpCode = API_STATUSES[status];
  }
}

/** 406 call_error: the request could not be processed, for `reason` (a sentence without its full stop). */
export function callError(reason: string): ApiError {
  return new ApiError('call_error', `Request could not be processed: ${reason}.`);
}

/** 400: a uid the caller chose is taken (projects, mailboxes, webhooks; send_message says more). */
export function duplicateUid(uid: string): ApiError {
  return new ApiError('bad_request', `Uid ${uid} already exists.`);
}

/** 412: the owner already holds the most rows of this kind it may. */
export function limitReached(owner: 'account' | 'project', max: number, things: string): ApiError {
  return new ApiError('precondition_failed', `The ${owner} already has ${max} ${things}, the most it may hold.`);
}

export const MESSAGES = {
  unauthorized: 'Invalid or inactive account API key used.',
  locked: 'The specified API key is not valid: the key or its account is disabled.',
  internal: 'Internal server error. The failure was logged; please try again later.',
  invalidJson: 'Posted content is not valid JSON.',
  versionConflict: (v: string) => `Invalid API version "${v}". Use /v.1.1/<method> or /v.1.0/<method>.json.`,
} as const;

/**
 * The database cannot be reached or cannot take writes (connection lost, server shutting down,
 * disk full). Storage throws it with a message naming the cause; the edges answer it as a 503 and
 * the workers pause until it passes. Nothing was stored by the call that got it, unless
 * `mayHaveWritten`: a statement that commits (a COMMIT, or a write on its own) reached the server
 * and its answer was lost (timed out, connection cut): it may have been written.
 *
 * `message` is for the log: it may name the file or the server's address. `reason` is what
 * clients and unauthenticated probes are shown (the 503 body, /readyz): the kind of the cause
 * (unreachable and why: refused, timeout; read-only; disk full; locked) and no host, port or path
 * (docs/operations.md, "When the database is away").
 */
export class StoreUnavailableError extends Error {
  readonly reason: string;
  readonly mayHaveWritten: boolean;

  constructor(message: string, options?: { cause?: unknown; reason?: string; mayHaveWritten?: boolean }) {
    super(message, options);
    this.name = 'StoreUnavailableError';
    this.reason = options?.reason ?? 'database unavailable';
    this.mayHaveWritten = options?.mayHaveWritten ?? false;
  }
}

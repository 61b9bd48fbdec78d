// The PostageApp API as one encapsulated Fastify plugin: POST {base}/v.<version>/<method>[.json]
// with a JSON body, answered in the envelope (docs/api/README.md). Its body parser, version and
// method checks, error handler and not-found answer live in this plugin's context only, so other
// edges (tracking, dashboard, operations endpoints) mount beside it with their own conventions.
// The order of checks is the clients' (compatibility.md): version, body (UTF-8, JSON), key
// (401/423), method (call_error), then the method's own argument checks.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Args, cutText, type Json, type JsonObject } from '../../domain/args.ts';
import { ApiError, callError, MESSAGES } from '../../domain/errors.ts';
import { authenticate } from '../../operations/authenticate.ts';
import type { Services } from '../../services.ts';
import { takeKeyToken } from '../../operations/rate-limits.ts';
import { checkArgumentPolicy } from './argument-policy.ts';
import { decodeBody } from './body.ts';
import { echoedUid, RetryLaterError, sendError, sendOk, storeUnavailableIn, type EchoedUid } from './envelope.ts';
import { METHODS } from './methods/index.ts';

const VERSIONS = new Set(['1.0', '1.1']);
const API_PATH = /^\/v\.([^/]*)\/([^/?]+?)(\.json)?(?:\?.*)?$/;

declare module 'fastify' {
  interface FastifyRequest {
    posthornMethod?: string;
  }
}

/** Registered at the root prefix; encapsulated, so its hooks and parsers apply to its routes only. */
export async function postageAppApi(app: FastifyInstance, opts: { services: Services }): Promise<void> {
  const { services } = opts;
  const { config } = services;
  // Every body is read as bytes: UTF-8 and JSON are checked by us, whatever the Content-Type
  // (v1.1 clients send JSON as application/x-www-form-urlencoded).
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_req, body, done) => done(null, body));

  // The version is checked before the body is read, so a wrong version is 409 even when the body
  // is also wrong or too large.
  app.addHook('onRequest', async (request, reply) => {
    const match = API_PATH.exec(request.url);
    if (!match) return;
    if (!VERSIONS.has(match[1])) return sendError(reply, null, new ApiError('conflict', MESSAGES.versionConflict(match[1])));
    if (request.method !== 'POST') {
      return sendError(reply, null, new ApiError('method_not_allowed', `Every API call is an HTTP POST; got ${request.method}.`));
    }
    // A compressed body is refused before it is read, so its bytes are never taken for JSON text.
    const encoding = contentEncodingOf(request.headers['content-encoding']);
    if (encoding !== null) {
      return sendError(
        reply,
        null,
        new ApiError('unsupported_media_type', `Content-Encoding ${encoding} is not accepted: send the request body uncompressed (no Content-Encoding, or identity).`),
      );
    }
    if (match[1] === '1.0' && !/^application\/json\s*(;|$)/i.test(request.headers['content-type'] ?? '')) {
      return sendError(reply, null, new ApiError('invalid_json', 'API version 1.0 requires the header Content-Type: application/json.'));
    }
    request.posthornMethod = match[2];
  });

  const outage = outageLog();
  app.post('/*', (request, reply) => handleApiCall(services, request, reply, outage));

  app.setNotFoundHandler((request, reply) => sendError(reply, null, new ApiError('not_found', `No such path: ${request.method} ${request.url.split('?')[0]}`)));
  app.setErrorHandler((error: Error & { statusCode?: number; code?: string }, request, reply) => {
    if (error.code === 'FST_ERR_CTP_BODY_TOO_LARGE' || error.statusCode === 413) {
      return sendError(reply, null, new ApiError('payload_too_large', `Request body exceeds the limit of ${config.maxBodyBytes} bytes.`));
    }
    if (error.statusCode !== undefined && error.statusCode < 500) {
      return sendError(reply, null, callError('malformed HTTP request'));
    }
    if (!storeUnavailableIn(error)) request.log.error({ err: error, path: request.url.split('?')[0] }, 'unhandled error in HTTP edge');
    return sendError(reply, null, error);
  });
}

/**
 * The Content-Encoding of a body that is not plain, as the client wrote it (cut), or null when
 * there is none or it is only identity. Bodies are read as they come: a gzip, br or deflate body
 * (or any other coding) would otherwise reach the JSON reader as bytes.
 */
function contentEncodingOf(header: string | string[] | undefined): string | null {
  if (header === undefined) return null;
  const text = Array.isArray(header) ? header.join(', ') : header;
  const codings = text.split(',').map((c) => c.trim().toLowerCase()).filter((c) => c !== '');
  if (codings.every((c) => c === 'identity')) return null;
  return JSON.stringify(cutText(text.trim(), 40));
}

/** How often, at most, the API logs the 503s of a database outage (with how many it answered). */
const OUTAGE_LOG_MS = 10_000;

/** What the API says of an outage: each 503 it answers, and each call that went through. */
interface OutageLog {
  unavailable(request: FastifyRequest, method: string | undefined, error: Error): void;
  answered(request: FastifyRequest): void;
}

/**
 * The warning of the 503s answered while the database is unavailable: the first one of an
 * outage at once, then one line per OUTAGE_LOG_MS with how many were answered since (an outage
 * under load answers thousands; docs/operations.md, "When the database is away"), the last of
 * them when OUTAGE_LOG_MS passes without another line; and when a call goes through again, one
 * line with the outage's total. The log keeps the cause's message (it may name the file or the
 * server); clients see its reason only (http/api/envelope.ts).
 */
function outageLog(): OutageLog {
  let since: number | null = null;
  let total = 0;
  let lastAt = 0;
  let unreported = 0;
  let last: { request: FastifyRequest; method: string | undefined; cause: string } | null = null;
  let timer: NodeJS.Timeout | null = null;
  const report = () => {
    if (timer) clearTimeout(timer);
    timer = null;
    if (unreported === 0 || !last) return;
    last.request.log.warn({ method: last.method, cause: last.cause, answered: unreported }, 'database unavailable: answered 503');
    lastAt = Date.now();
    unreported = 0;
  };
  return {
    unavailable(request, method, error) {
      const now = Date.now();
      since ??= now;
      total++;
      unreported++;
      last = { request, method, cause: error.message };
      if (now - lastAt >= OUTAGE_LOG_MS) report();
      else if (!timer) {
        timer = setTimeout(report, lastAt + OUTAGE_LOG_MS - now);
        timer.unref();
      }
    },
    answered(request) {
      if (since === null) return;
      report();
      request.log.info({ answered: total, outageMs: Date.now() - since }, 'database available again: the API answers; the outage answered 503 this many times');
      since = null;
      total = 0;
      lastAt = 0;
      last = null;
    },
  };
}

async function handleApiCall(
  services: Services,
  request: FastifyRequest,
  reply: FastifyReply,
  outage: OutageLog,
): Promise<void> {
  const methodName = request.posthornMethod;
  if (methodName === undefined) {
    return sendError(reply, null, new ApiError('not_found', `No such path: ${request.url.split('?')[0]}. API calls go to /v.1.1/<method>.`));
  }
  let uid: Json | undefined;
  let echo: EchoedUid;
  try {
    const body = decodeBody(request.body as Buffer | undefined);
    // The uid is echoed only once the body passed the policy: a uid nested thousands of levels
    // deep could not be written back.
    checkArgumentPolicy(body);
    uid = body.uid;
    echo = echoedUid(body);
    const apiKey = body.api_key;
    if (apiKey !== undefined && apiKey !== null && typeof apiKey !== 'string') {
      throw callError('"api_key" must be a string');
    }
    const caller = await authenticate(services, apiKey ?? '', METHODS.get(methodName)?.key);
    const token = takeKeyToken(services, caller.project ? `project:${caller.project.id}` : `account:${caller.account.id}`);
    if (!token.ok) {
      const seconds = Math.max(1, Math.ceil(token.retryAfterMs / 1000));
      throw new RetryLaterError('too_many_requests', `Rate limit of this API key exceeded (--rate-limit-per-key ${services.config.rateLimitPerKey}); retry in ${seconds} s.`, seconds);
    }
    const method = METHODS.get(methodName);
    if (!method) throw callError(`unknown method "${methodName}"`);
    if (method.key !== 'any' && method.key !== caller.keyKind) {
      throw new ApiError(
        'unauthorized',
        `Method ${methodName} needs ${method.key === 'project' ? 'a project' : 'an account'} API key; ${caller.keyKind === 'project' ? 'a project' : 'an account'} key was used.`,
      );
    }
    const args = Args.from(body.arguments);
    method.checkArgs(args.raw);
    const result = await method.run({ services, caller, args, uid, body: body as JsonObject });
    outage.answered(request);
    return sendOk(reply, echo, result);
  } catch (error) {
    const unavailable = storeUnavailableIn(error);
    if (unavailable) {
      outage.unavailable(request, methodName, unavailable);
    } else if (!(error instanceof ApiError)) {
      request.log.error({ err: error, method: methodName }, 'operation failed unexpectedly');
    }
    return sendError(reply, echo, error);
  }
}

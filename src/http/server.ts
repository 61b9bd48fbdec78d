// The HTTP listener's root: Fastify options, TLS, and the edges mounted on it (http/routes.ts).
// Each edge is its own plugin with its own conventions; the PostageApp API is http/api/plugin.ts.
import fs from 'node:fs';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { Bindings, ChildLoggerOptions } from 'fastify/types/logger.js';
import type { Socket } from 'node:net';
import { ApiError } from '../domain/errors.ts';
import { httpLimitsFrom, limitHttpServer } from '../listener-limits.ts';
import type { Services } from '../services.ts';
import { errorEnvelopeJson, rawErrorResponse, sendError } from './api/envelope.ts';
import { ROUTE_INSTALLERS } from './routes.ts';

export async function buildHttpServer(services: Services): Promise<FastifyInstance> {
  const { config } = services;
  const https = config.tlsCert && config.tlsKey ? { cert: fs.readFileSync(config.tlsCert), key: fs.readFileSync(config.tlsKey) } : null;
  const app = Fastify({
    loggerInstance: services.log,
    // Per-request log lines cost more than the request at ingest rates; errors are still logged.
    logController: new LogController({ disableRequestLogging: true }),
    childLoggerFactory: lazyChildLogger,
    bodyLimit: config.maxBodyBytes,
    // A path parameter names a domain (up to 253 characters, the DNS's limit) or a template slug on
    // the dashboard's pages (docs/dashboard.md); Fastify's default of 100 answered 414 to the pages
    // of a longer one. Percent-encoded, a 253-character name stays well under this.
    routerOptions: { maxParamLength: 1024 },
    // What Fastify answers itself (a path that does not decode, a parameter too long) and what
    // Node's HTTP parser refuses before there is a request are answered in the API's envelope
    // too (docs/api/README.md, "Errors"), never as Fastify's or Node's own text.
    frameworkErrors: (error, _request, reply) => {
      const code = (error as { code?: string }).code;
      const what = code === 'FST_ERR_BAD_URL' ? 'its path is not valid percent-encoded UTF-8' : code === 'FST_ERR_MAX_PARAM_LENGTH' ? 'a part of its path is too long' : 'it could not be routed';
      return sendError(reply, null, new ApiError('bad_request', `Malformed request: ${what}.`));
    },
    clientErrorHandler: answerClientError,
    ...(https ? { https } : {}),
  }) as unknown as FastifyInstance;
  // Slow and idle clients are cut, and one address holds a bounded share (src/listener-limits.ts);
  // one that does not send its request in time is answered 408 in the envelope before it is.
  limitHttpServer(app.server, httpLimitsFrom(config), { timeoutJson: errorEnvelopeJson(REQUEST_TIMEOUT) });

  for (const install of ROUTE_INSTALLERS) await install(app, services);
  return app;
}

const REQUEST_TIMEOUT = new ApiError('request_timeout', 'The request did not arrive in time (--http-headers-timeout-ms for the request line and headers, --http-request-timeout-ms for the body); the connection is closed.');

/**
 * Node's HTTP parser refused what a client sent before any request existed: a malformed request
 * line or header (400), headers larger than Node's limit (431), a request that did not arrive
 * within Node's own timeouts (408). Answered in the envelope, then the connection is closed, as
 * Node itself would (its default answer has no body). A reset connection has no one to answer.
 */
function answerClientError(error: Error & { code?: string }, socket: Socket): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  const answer =
    error.code === 'HPE_HEADER_OVERFLOW'
      ? new ApiError('request_header_fields_too_large', 'The request line and headers are larger than the server accepts (16 KiB); the connection is closed.')
      : error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? REQUEST_TIMEOUT
        : new ApiError('bad_request', `Malformed HTTP request (${error.code ?? 'unreadable'}): the request line or a header is not valid HTTP/1.1; the connection is closed.`);
  if (socket.writable) socket.end(rawErrorResponse(answer));
  // Whatever the client does next, the socket goes: ended once the answer is written, destroyed at once otherwise.
  socket.destroySoon();
}

/**
 * A request's logger (request.log), made only when something logs through it. Fastify otherwise
 * makes a pino child per request, its bindings (the request id) serialised through the redaction
 * at once: ~2% of the CPU of an ingest request (bench/, --profile), for the rare request that logs.
 */
function lazyChildLogger(logger: FastifyBaseLogger, bindings: Bindings, options: ChildLoggerOptions): FastifyBaseLogger {
  return new LazyChildLogger(logger, bindings, options) as unknown as FastifyBaseLogger;
}

/** One object per request, its methods on the prototype: the child is made at the first use. */
class LazyChildLogger {
  #child: FastifyBaseLogger | null = null;
  constructor(
    private readonly parent: FastifyBaseLogger,
    private readonly bindings: Bindings,
    private readonly options: ChildLoggerOptions,
  ) {}
  real(): FastifyBaseLogger {
    return (this.#child ??= this.parent.child(this.bindings, this.options));
  }
  get level(): string {
    return (this.#child ?? this.parent).level;
  }
  set level(level: string) {
    this.real().level = level;
  }
  child(bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return this.real().child(bindings, options);
  }
}
for (const level of ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const) {
  Object.defineProperty(LazyChildLogger.prototype, level, {
    value(this: LazyChildLogger, ...args: unknown[]) {
      (this.real()[level] as (...a: unknown[]) => void)(...args);
    },
  });
}

// The HTTP listener's root: Fastify options, TLS, and the edges mounted on it (http/routes.ts).
// Each edge is its own plugin with its own conventions; the PostageApp API is http/api/plugin.ts.
import fs from 'node:fs';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { Bindings, ChildLoggerOptions } from 'fastify/types/logger.js';
import { httpLimitsFrom, limitHttpServer } from '../listener-limits.ts';
import type { Services } from '../services.ts';
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
    ...(https ? { https } : {}),
  }) as unknown as FastifyInstance;
  // Slow and idle clients are cut, and one address holds a bounded share (src/listener-limits.ts).
  limitHttpServer(app.server, httpLimitsFrom(config));

  for (const install of ROUTE_INSTALLERS) await install(app, services);
  return app;
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

// The operations endpoints (docs/operations.md): /healthz (alive), /readyz (database answers, is
// migrated, the role's loops run), /metrics (Prometheus text), and /health as before for existing
// probes. Mounted on the API listener by http/routes.ts, and on the operations listener of a
// worker-only process by http/ops/listener.ts.
//
// On the API listener it also adds, at the root so every edge's requests pass through them: the
// request id (an `x-request-id` response header; Fastify binds it as `reqId` to the request's
// logger, which every edge uses for what it logs about a request), the API request metrics, and the access log
// (--access-log). These hooks read the API plugin's request.posthornMethod; an unknown method name
// is counted as "other" so a client cannot mint label values.
import type { FastifyInstance } from 'fastify';
import { metricsOf } from '../../observability/metrics.ts';
import { checkReadiness } from '../../observability/readiness.ts';
import type { Services } from '../../services.ts';
import { METHODS } from '../api/methods/index.ts';

const JSON_TYPE = 'application/json; charset=utf-8';

/** The three endpoints (and /health), on any Fastify instance. */
export function addOperationsRoutes(app: FastifyInstance, services: Services): void {
  const metrics = metricsOf(services);
  app.get('/healthz', async (_req, reply) => reply.header('content-type', JSON_TYPE).send('{"status":"ok"}'));
  // Kept for probes written against earlier releases: liveness, like /healthz.
  app.get('/health', async (_req, reply) => reply.header('content-type', JSON_TYPE).send('{"status":"ok"}'));
  app.get('/readyz', async (_req, reply) => {
    const readiness = await checkReadiness(services);
    return reply
      .code(readiness.ready ? 200 : 503)
      .header('content-type', JSON_TYPE)
      .header('cache-control', 'no-store')
      .send(JSON.stringify({ status: readiness.ready ? 'ready' : 'not ready', checks: readiness.checks }));
  });
  app.get('/metrics', async (_req, reply) => {
    const text = await metrics.render();
    return reply.header('content-type', metrics.registry.contentType).header('cache-control', 'no-store').send(text);
  });
}

/** Root hooks of the API listener: request id, request metrics, access log. */
export function addRequestObservers(app: FastifyInstance, services: Services): void {
  const metrics = metricsOf(services);
  const accessLog = services.config.accessLog;
  // No async context (AsyncLocalStorage) carries the id into operations: on Node 20 it turns on
  // promise hooks for the whole process, measured at ~5% of a send_message's CPU, and operations
  // log nothing of a request that the edge does not log itself, with request.log.
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id);
    done();
  });
  app.addHook('onResponse', (request, reply, done) => {
    const elapsedMs = reply.elapsedTime;
    const name = request.posthornMethod;
    if (name !== undefined) {
      const method = METHODS.has(name) ? name : 'other';
      metrics.apiRequests.inc({ method, status: String(reply.statusCode) });
      metrics.apiRequestDuration.observe({ method }, elapsedMs / 1000);
    }
    if (accessLog) {
      // The path only: query strings can carry tracking tokens. Bodies (and the keys in them) never.
      request.log.info(
        { event: 'http_request', method: request.method, path: request.url.split('?')[0].slice(0, 200), status: reply.statusCode, api_method: name, duration_ms: Math.round(elapsedMs * 10) / 10 },
        'request',
      );
    }
    done();
  });
}

/** For http/routes.ts: the endpoints and the root observers on the API listener. */
export function installOperationsEndpoints(app: FastifyInstance, services: Services): void {
  addRequestObservers(app, services);
  addOperationsRoutes(app, services);
}

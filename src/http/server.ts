// The HTTP listener's root: Fastify options, TLS, and the edges mounted on it (http/routes.ts).
// Each edge is its own plugin with its own conventions; the PostageApp API is http/api/plugin.ts.
import fs from 'node:fs';
import Fastify, { LogController, type FastifyInstance } from 'fastify';
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
    bodyLimit: config.maxBodyBytes,
    ...(https ? { https } : {}),
  }) as unknown as FastifyInstance;
  // Slow and idle clients are cut, and one address holds a bounded share (src/listener-limits.ts).
  limitHttpServer(app.server, httpLimitsFrom(config));

  for (const install of ROUTE_INSTALLERS) await install(app, services);
  return app;
}

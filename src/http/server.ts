// The HTTP listener's root: Fastify options, TLS, and the edges mounted on it (http/routes.ts).
// Each edge is its own plugin with its own conventions; the PostageApp API is http/api/plugin.ts.
import fs from 'node:fs';
import Fastify, { LogController, type FastifyInstance } from 'fastify';
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
    keepAliveTimeout: 65_000,
    ...(https ? { https } : {}),
  }) as unknown as FastifyInstance;

  for (const install of ROUTE_INSTALLERS) await install(app, services);
  return app;
}

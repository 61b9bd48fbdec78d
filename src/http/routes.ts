// Non-API HTTP routes (tracking pixel and links, health). Each installer adds its routes to the
// server; the API itself is in server.ts.
import type { FastifyInstance } from 'fastify';
import type { Services } from '../operations/context.ts';
import { installTrackingRoutes } from './tracking-routes.ts';

export type RouteInstaller = (app: FastifyInstance, services: Services) => Promise<void> | void;

const health: RouteInstaller = (app) => {
  app.get('/health', async (_req, reply) => reply.header('content-type', 'application/json').send('{"status":"ok"}'));
};

export const ROUTE_INSTALLERS: RouteInstaller[] = [health, installTrackingRoutes];

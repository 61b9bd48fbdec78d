// The edges of the HTTP listener, one line each: the PostageApp API (an encapsulated plugin with
// its own body handling, envelope errors and not-found answer), tracking pixel and links, health.
import type { FastifyInstance } from 'fastify';
import type { Services } from '../services.ts';
import { postageAppApi } from './api/plugin.ts';
import { installTrackingRoutes } from './tracking-routes.ts';

export type RouteInstaller = (app: FastifyInstance, services: Services) => Promise<void> | void;

const health: RouteInstaller = (app) => {
  app.get('/health', async (_req, reply) => reply.header('content-type', 'application/json').send('{"status":"ok"}'));
};

const api: RouteInstaller = async (app, services) => {
  await app.register(postageAppApi, { services });
};

export const ROUTE_INSTALLERS: RouteInstaller[] = [api, health, installTrackingRoutes];

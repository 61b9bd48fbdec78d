// The edges of the HTTP listener, one line each: the PostageApp API (an encapsulated plugin with
// its own body handling, envelope errors and not-found answer), its reference (/openapi.json,
// /docs), tracking pixel and links, and
// the operations endpoints (http/ops: /healthz, /readyz, /metrics, /health), first so that its root
// hooks (request id, API metrics, access log) see the requests of every edge mounted after it.
import type { FastifyInstance } from 'fastify';
import type { Services } from '../services.ts';
import { postageAppApi } from './api/plugin.ts';
import { installApiReference } from './api-reference.ts';
import { installOperationsEndpoints } from './ops/plugin.ts';
import { installTrackingRoutes } from './tracking-routes.ts';
import { installDashboard } from '../dashboard/plugin.ts';

export type RouteInstaller = (app: FastifyInstance, services: Services) => Promise<void> | void;

const api: RouteInstaller = async (app, services) => {
  await app.register(postageAppApi, { services });
};

export const ROUTE_INSTALLERS: RouteInstaller[] = [installOperationsEndpoints, api, installApiReference, installTrackingRoutes, installDashboard];

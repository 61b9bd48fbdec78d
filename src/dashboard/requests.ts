// What every dashboard page shares for reading a request and answering it: the viewer the
// session hook attached (plugin.ts), the form and query fields as strings, the HTML answer, the
// cookies' names and the tokens compared in constant time. Pages import these; plugin.ts, which
// installs the pages, imports them too, so pages never import the plugin.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { Viewer } from '../operations/users.ts';
import type { Services } from '../services.ts';

export const SESSION_COOKIE = 'posthorn_session';
export const LOGIN_COOKIE = 'posthorn_login';

declare module 'fastify' {
  interface FastifyRequest {
    dashboardViewer?: Viewer;
    dashboardStartedNs?: bigint;
  }
}

export interface DashboardRoutes {
  services: Services;
  /** Secure cookies: the dashboard is reached over HTTPS */
  secureCookies: boolean;
}

export function viewerOf(request: FastifyRequest): Viewer {
  const viewer = request.dashboardViewer;
  if (!viewer) throw new Error('dashboard route reached without a viewer');
  return viewer;
}

export function formOf(request: FastifyRequest): Record<string, string> {
  const body = request.body;
  const out: Record<string, string> = {};
  if (body && typeof body === 'object') {
    for (const [k, v] of Object.entries(body as Record<string, unknown>)) {
      if (typeof v === 'string') out[k] = v;
      else if (Array.isArray(v) && typeof v[0] === 'string') out[k] = v.join('\n');
    }
  }
  return out;
}

export function queryOf(request: FastifyRequest): Record<string, string> {
  return formOf({ body: request.query } as FastifyRequest);
}

export function sameToken(a: string | undefined, b: string): boolean {
  if (typeof a !== 'string') return false;
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

export function sendPage(reply: FastifyReply, body: string, status = 200): FastifyReply {
  return reply.code(status).header('content-type', 'text/html; charset=utf-8').header('cache-control', 'no-store').send(body);
}

export function newLoginToken(): string {
  return randomBytes(18).toString('base64url');
}

// What every dashboard page shares for reading a request and answering it: the viewer the
// sign-in check attached (plugin.ts) with the one-time token of each form a page renders, the form
// and query fields as strings, the HTML answer, the notice a form post leaves for the page it
// redirects to, the cookies' names and the tokens compared in constant time. Pages import these; plugin.ts, which
// installs the pages, imports them too, so pages never import the plugin.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { Viewer } from '../operations/users.ts';
import type { Services } from '../services.ts';

export const SESSION_COOKIE = 'posthorn_session';
export const LOGIN_COOKIE = 'posthorn_login';
export const NOTICE_COOKIE = 'posthorn_notice';
/** Seconds a notice waits for the page it was left for. */
const NOTICE_TTL_S = 60;
/** Characters of a notice kept: its cookie, URL-encoded, stays under browsers' 4 KiB. */
const NOTICE_CHARS = 400;

/** What a form post reports on the page it redirects to. */
export interface Notice {
  kind: 'ok' | 'error';
  text: string;
}

/**
 * The signed-in user as the pages of one request see it: the viewer, a new one-time token for each
 * form the page renders (docs/dashboard.md, "Forms"), and the notice a form post left for it.
 */
export interface PageViewer extends Viewer {
  /**
   * A token for one form: its submission is run once, however often it is sent; sent again, it
   * is answered on `returnPath` (default: the page shown, or for the answer to a post, the page
   * its form was on). A form that removes what its page shows names the page to go back to.
   */
  formToken(returnPath?: string): string;
  /** The notice a form post left (cleared as it is read; later calls give the same), or null. */
  takeNotice(): Notice | null;
}

/** The one-time token a POST used (plugin.ts): given back when the post changed nothing. */
export interface FormUse {
  nonce: string;
  /** the page the form was shown on */
  returnPath: string;
  /** the post was refused (an error notice, or an error answer): its token may be sent again */
  refused: boolean;
}

declare module 'fastify' {
  interface FastifyRequest {
    dashboardViewer?: PageViewer;
    dashboardStartedNs?: bigint;
    dashboardForm?: FormUse;
  }
  interface FastifyContextConfig {
    /** A POST that changes nothing (the template preview): no one-time token is used up. */
    dashboardReadOnly?: boolean;
  }
}

export interface DashboardRoutes {
  services: Services;
  /** Secure cookies: the dashboard is reached over HTTPS */
  secureCookies: boolean;
}

export function viewerOf(request: FastifyRequest): PageViewer {
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

/**
 * Answers a form post with a redirect and the notice the next page shows once, in a cookie signed
 * by this server (plugin.ts). Never in the URL: a link must not make the dashboard say anything
 * (docs/dashboard.md, "Notices"). An error notice says the post changed nothing: its one-time
 * form token is given back (docs/dashboard.md, "Forms").
 */
export function redirectWithNotice(reply: FastifyReply, routes: DashboardRoutes, location: string, notice: Notice): FastifyReply {
  if (notice.kind === 'error' && reply.request.dashboardForm) reply.request.dashboardForm.refused = true;
  const value = JSON.stringify({ kind: notice.kind, text: notice.text.slice(0, NOTICE_CHARS) });
  reply.setCookie(NOTICE_COOKIE, value, { path: '/', httpOnly: true, sameSite: 'lax', secure: routes.secureCookies, signed: true, maxAge: NOTICE_TTL_S });
  return reply.redirect(location, 303);
}

/** The notice a form post left (cleared as it is read), or null; an unsigned or altered one is dropped. */
export function takeNotice(request: FastifyRequest, reply: FastifyReply): Notice | null {
  const cookie = request.cookies[NOTICE_COOKIE];
  if (cookie === undefined) return null;
  reply.clearCookie(NOTICE_COOKIE, { path: '/' });
  const unsigned = request.unsignCookie(cookie);
  if (!unsigned.valid || unsigned.value === null) return null;
  try {
    const { kind, text } = JSON.parse(unsigned.value) as Partial<Notice>;
    return (kind === 'ok' || kind === 'error') && typeof text === 'string' ? { kind, text } : null;
  } catch {
    return null;
  }
}

export function newLoginToken(): string {
  return randomBytes(18).toString('base64url');
}

// The web dashboard (docs/dashboard.md): the product's second edge, beside the PostageApp API. It
// calls operations only. Server-rendered pages (dashboard/html.ts escapes everything), forms
// posted as application/x-www-form-urlencoded, a session cookie, and static assets from
// dashboard/assets/ (uPlot from node_modules): no inline script or style, so the Content-Security-
// Policy below forbids both. Encapsulated: its body parsers, hooks and error page apply to its
// routes only.
import cookie from '@fastify/cookie';
import formbody from '@fastify/formbody';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ApiError } from '../domain/errors.ts';
import { issueFormToken, releaseFormToken, useFormToken } from '../operations/form-tokens.ts';
import { findViewer, type Viewer } from '../operations/users.ts';
import type { Services } from '../services.ts';
import { serveAsset } from './assets.ts';
import { html } from './html.ts';
import { FORM_TOKEN_FIELD, page } from './layout.ts';
import { formOf, redirectWithNotice, sameToken, sendPage, SESSION_COOKIE, takeNotice, type DashboardRoutes, type Notice, type PageViewer } from './requests.ts';
import { installDomainPages } from './pages/domains.ts';
import { installKeyPages } from './pages/keys.ts';
import { installMailboxPages } from './pages/mailboxes.ts';
import { installMessagePages } from './pages/messages.ts';
import { installOverviewPages } from './pages/overview.ts';
import { installProjectSettingsPages } from './pages/project-settings.ts';
import { installSignInPages, installSignOut } from './pages/sign-in.ts';
import { installSuppressionPages } from './pages/suppressions.ts';
import { installTemplatePages } from './pages/templates.ts';
import { installUserPages } from './pages/users.ts';
import { installWebhookPages } from './pages/webhooks.ts';

/** Every dashboard answer carries these; routes that frame content set their own policy first. */
export const PAGE_CSP =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; frame-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/** The answer to a form sent again (docs/dashboard.md, "Forms"), shown on the page the form was on. */
const ALREADY_SUBMITTED =
  'This form was already submitted (a reload, or Back or Forward, sends it again): it was not run a second time. A key, secret or password shown then is not shown again.';

/**
 * The viewer as this request's pages see it: each form rendered gets a one-time token naming
 * `returnPath`, the page a repeated submission of it is sent back to (for a page that answers a
 * POST, the page its form was on).
 */
function pageViewer(services: Services, viewer: Viewer, request: FastifyRequest, reply: FastifyReply, returnPath: string): PageViewer {
  let notice: Notice | null | undefined;
  return {
    user: viewer.user,
    account: viewer.account,
    scopeProject: viewer.scopeProject,
    csrfToken: viewer.csrfToken,
    expiresAt: viewer.expiresAt,
    formToken: (other) => issueFormToken(services, viewer, other ?? returnPath),
    takeNotice: () => (notice === undefined ? (notice = takeNotice(request, reply)) : notice),
  };
}

function errorPage(viewer: PageViewer | null, status: number, message: string): string {
  const title = status === 404 ? 'Not found' : status === 403 ? 'Refused' : status >= 500 ? 'Something went wrong' : 'Cannot do that';
  return page(title, { viewer }, html`<p class="notice error" role="alert">${message}</p><p><a href="/">Back to the overview</a></p>`);
}

export async function dashboard(app: FastifyInstance, opts: { services: Services }): Promise<void> {
  const { services } = opts;
  const secureCookies = Boolean(services.config.tlsCert) || services.config.publicUrl.startsWith('https://');
  // Signed cookies: the notice a form post leaves for the next page (requests.ts redirectWithNotice).
  await app.register(cookie, { secret: services.secrets.deriveKey('posthorn dashboard notices v1') });
  await app.register(formbody, { bodyLimit: services.config.maxBodyBytes });

  // Server-Timing: the time this process spent on the request, for the browser's devtools and
  // bench/dashboard.ts (server time without the client's share).
  app.addHook('onRequest', async (request) => {
    request.dashboardStartedNs = process.hrtime.bigint();
  });
  app.addHook('onSend', async (request, reply, payload) => {
    if (request.dashboardStartedNs !== undefined) {
      reply.header('server-timing', `app;dur=${(Number(process.hrtime.bigint() - request.dashboardStartedNs) / 1e6).toFixed(2)}`);
    }
    if (!reply.hasHeader('content-security-policy')) reply.header('content-security-policy', PAGE_CSP);
    reply.header('x-content-type-options', 'nosniff');
    reply.header('referrer-policy', 'same-origin');
    if (!reply.hasHeader('x-frame-options')) reply.header('x-frame-options', 'DENY');
    return payload;
  });

  app.setErrorHandler((error: Error & { statusCode?: number }, request, reply) => {
    const viewer = request.dashboardViewer ?? null;
    if (error instanceof ApiError) return sendPage(reply, errorPage(viewer, error.httpCode, error.message), error.httpCode);
    if (error.statusCode !== undefined && error.statusCode < 500) return sendPage(reply, errorPage(viewer, 400, 'The request could not be read.'), 400);
    request.log.error({ err: error, path: request.url.split('?')[0] }, 'unhandled error in the dashboard');
    return sendPage(reply, errorPage(viewer, 500, 'The failure was logged; please try again.'), 500);
  });

  app.get('/assets/:name', async (request, reply) => serveAsset(reply, (request.params as { name: string }).name));

  const routes: DashboardRoutes = { services, secureCookies };
  installSignInPages(app, routes);

  // Everything else needs a live sign-in; every POST also needs its CSRF token and, unless
  // it changes nothing, a one-time form token (docs/dashboard.md, "Forms").
  await app.register(async (authed) => {
    authed.addHook('preHandler', async (request, reply) => {
      const viewer = await findViewer(services, request.cookies[SESSION_COOKIE]);
      if (!viewer) {
        if (request.method === 'GET') {
          const next = request.url.startsWith('/') && !request.url.startsWith('//') ? request.url : '/';
          return reply.redirect(`/login${next === '/' ? '' : `?next=${encodeURIComponent(next)}`}`, 303);
        }
        return sendPage(reply, errorPage(null, 403, 'Your session has ended: sign in again.'), 403);
      }
      const posted = request.method !== 'GET' && request.method !== 'HEAD';
      if (!posted) {
        request.dashboardViewer = pageViewer(services, viewer, request, reply, request.url);
        return;
      }
      const form = formOf(request);
      const sent = form._csrf ?? (request.headers['x-csrf-token'] as string | undefined);
      if (!sameToken(sent, viewer.csrfToken)) {
        request.dashboardViewer = pageViewer(services, viewer, request, reply, '/');
        return sendPage(reply, errorPage(request.dashboardViewer, 403, 'This form has expired or did not come from this dashboard: reload the page and try again.'), 403);
      }
      if (request.routeOptions.config.dashboardReadOnly) {
        request.dashboardViewer = pageViewer(services, viewer, request, reply, '/');
        return;
      }
      const use = await useFormToken(services, viewer, form[FORM_TOKEN_FIELD]);
      request.dashboardViewer = pageViewer(services, viewer, request, reply, use.kind === 'invalid' ? '/' : use.returnPath);
      if (use.kind === 'invalid') {
        return sendPage(reply, errorPage(request.dashboardViewer, 403, 'This form has expired or did not come from this dashboard: reload the page and try again.'), 403);
      }
      if (use.kind === 'repeated') return redirectWithNotice(reply, routes, use.returnPath, { kind: 'error', text: ALREADY_SUBMITTED });
      request.dashboardForm = { nonce: use.nonce, returnPath: use.returnPath, refused: false };
    });
    // A post that changed nothing (refused with an error notice or an error answer) gives its token
    // back before the answer leaves, so sending the same form again tries again.
    authed.addHook('onSend', async (request, reply, payload) => {
      const used = request.dashboardForm;
      if (used && (used.refused || reply.statusCode >= 400)) {
        request.dashboardForm = undefined;
        await releaseFormToken(services, used.nonce).catch((error: unknown) => request.log.warn({ err: error }, 'a refused form\'s token could not be given back'));
      }
      return payload;
    });
    installSignOut(authed, routes);
    installOverviewPages(authed, routes);
    installMessagePages(authed, routes);
    installTemplatePages(authed, routes);
    installSuppressionPages(authed, routes);
    installKeyPages(authed, routes);
    installProjectSettingsPages(authed, routes);
    installDomainPages(authed, routes);
    installWebhookPages(authed, routes);
    installMailboxPages(authed, routes);
    installUserPages(authed, routes);
  });
}

/** The dashboard's entry in the HTTP listener's list of edges (http/routes.ts). */
export async function installDashboard(app: FastifyInstance, services: Services): Promise<void> {
  await app.register(dashboard, { services });
}

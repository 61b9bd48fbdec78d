// Signing in and out. The sign-in form carries a token that must match a cookie set with the form
// (a session does not exist yet to hold one); failures are counted per client address and per
// email by operations/users.ts, and say nothing about whether the email exists.
import type { FastifyInstance } from 'fastify';
import { signIn, signOut, SignInRefused, SESSION_TTL_MS } from '../../operations/users.ts';
import { html } from '../html.ts';
import { notice, page } from '../layout.ts';
import { LOGIN_COOKIE, SESSION_COOKIE, formOf, newLoginToken, queryOf, sameToken, sendPage, type DashboardRoutes } from '../requests.ts';

/** Where to go after signing in: a path of this site only (never //host or a scheme). */
function safeNext(next: string | undefined): string {
  return next && /^\/(?![/\\])[^\s]*$/.test(next) ? next : '/';
}

export function installSignInPages(app: FastifyInstance, { services, secureCookies }: DashboardRoutes): void {
  const cookieBase = { path: '/', httpOnly: true, sameSite: 'lax' as const, secure: secureCookies };

  const renderForm = (token: string, next: string, email: string, error: string | null) =>
    page(
      'Sign in',
      { viewer: null },
      html`${error ? notice('error', error) : ''}
<form method="post" action="/login" class="card narrow">
<input type="hidden" name="_csrf" value="${token}">
<input type="hidden" name="next" value="${next}">
<label for="email">Email</label>
<input id="email" name="email" type="email" autocomplete="username" required value="${email}" autofocus>
<label for="password">Password</label>
<input id="password" name="password" type="password" autocomplete="current-password" required>
<button type="submit">Sign in</button>
</form>
<p class="hint">No account yet? <code>posthorn init</code> creates one and prints how to sign in; <code>posthorn user create</code> adds users.</p>`,
    );

  app.get('/login', async (request, reply) => {
    const token = newLoginToken();
    reply.setCookie(LOGIN_COOKIE, token, { ...cookieBase, maxAge: 3600 });
    return sendPage(reply, renderForm(token, safeNext(queryOf(request).next), '', null));
  });

  app.post('/login', async (request, reply) => {
    const form = formOf(request);
    const expected = request.cookies[LOGIN_COOKIE];
    if (!expected || !sameToken(form._csrf, expected)) {
      return sendPage(reply, page('Refused', { viewer: null }, html`${notice('error', 'This form has expired: reload the sign-in page and try again.')}<p><a href="/login">Sign in</a></p>`), 403);
    }
    const next = safeNext(form.next);
    try {
      const session = await signIn(services, { email: form.email ?? '', password: form.password ?? '', clientAddress: request.ip });
      reply.setCookie(SESSION_COOKIE, session.token, { ...cookieBase, maxAge: Math.floor(SESSION_TTL_MS / 1000) });
      reply.clearCookie(LOGIN_COOKIE, { path: '/' });
      return reply.redirect(next, 303);
    } catch (error) {
      if (!(error instanceof SignInRefused)) throw error;
      return sendPage(reply, renderForm(expected, next, form.email ?? '', error.message), error.reason === 'throttled' ? 429 : 401);
    }
  });
}

/** Sign out: behind the session check (the CSRF token is required), so it is installed with the pages. */
export function installSignOut(app: FastifyInstance, { services }: DashboardRoutes): void {
  app.post('/logout', async (request, reply) => {
    await signOut(services, request.cookies[SESSION_COOKIE]);
    reply.clearCookie(SESSION_COOKIE, { path: '/' });
    return reply.redirect('/login', 303);
  });
}

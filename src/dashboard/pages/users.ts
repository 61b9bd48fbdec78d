// Dashboard users of the account: list, and add one (optionally scoped to a project) with a
// generated password shown once. Account users only; `posthorn user reset-password` sets new ones.
import type { FastifyInstance } from 'fastify';
import { ApiError } from '../../domain/errors.ts';
import { createUser, listAccountUsers, listViewerProjects } from '../../operations/users.ts';
import { formatTime, html } from '../html.ts';
import { csrfField, page } from '../layout.ts';
import { formOf, redirectWithNotice, sendPage, viewerOf, type DashboardRoutes } from '../requests.ts';
import { requireAccountUser } from './common.ts';

export function installUserPages(app: FastifyInstance, routes: DashboardRoutes): void {
  const { services } = routes;
  app.get('/users', async (request, reply) => {
    const viewer = viewerOf(request);
    requireAccountUser(viewer);
    const [users, projects] = await Promise.all([listAccountUsers(services, viewer), listViewerProjects(services, viewer)]);
    const body = html`<form method="post" action="/users" class="card">${csrfField(viewer)}
<label for="u-email">Add a user: email</label><input id="u-email" name="email" type="email" required>
<label for="u-project">Sees</label><select id="u-project" name="project"><option value="">every project of the account</option>${projects.map((p) => html`<option value="${p.uid}">only ${p.name}</option>`)}</select>
<button type="submit">Add user</button></form>
<table><thead><tr><th scope="col">Email</th><th scope="col">Sees</th><th scope="col">Last sign-in</th><th scope="col">Created</th></tr></thead><tbody>
${users.map((u) => html`<tr><td>${u.user.email}</td><td>${u.projectUid ?? 'every project'}</td><td>${formatTime(u.user.signed_in_at)}</td><td>${formatTime(Number(u.user.created_at))}</td></tr>`)}
</tbody></table>
<p class="hint">A forgotten password: <code>posthorn user reset-password --email EMAIL</code>.</p>`;
    return sendPage(reply, page('Users', { viewer, section: 'users' }, body));
  });

  app.post('/users', async (request, reply) => {
    const viewer = viewerOf(request);
    requireAccountUser(viewer);
    const form = formOf(request);
    try {
      const created = await createUser(services, { accountUid: viewer.account.uid, email: form.email ?? '', projectUid: form.project || null });
      const body = html`<section class="card"><p class="notice ok" role="status">${created.user.email} can now sign in with this password. Copy it now: it is not shown again.</p>
<p><label for="new-password">Password</label> <input id="new-password" class="key" readonly value="${created.password}"> <button type="button" class="copy" data-copy-from="new-password">Copy</button></p>
<p><a href="/users">Done</a></p></section>`;
      return sendPage(reply, page('New user', { viewer, section: 'users' }, body));
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
      return redirectWithNotice(reply, routes, '/users', { kind: 'error', text: error.message });
    }
  });
}

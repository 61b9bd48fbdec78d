// The suppression list of a project: search, add (by hand), remove.
import type { FastifyInstance } from 'fastify';
import { ApiError } from '../../domain/errors.ts';
import { searchSuppressions } from '../../operations/suppression-views.ts';
import { addToSuppressionList, removeFromSuppressionList, shownAddress } from '../../operations/suppressions.ts';
import { formatTime, html, queryString } from '../html.ts';
import { csrfField, page, projectPicker } from '../layout.ts';
import { formOf, queryOf, redirectWithNotice, sendPage, viewerOf, type DashboardRoutes } from '../requests.ts';
import { pickProject } from './common.ts';

export function installSuppressionPages(app: FastifyInstance, routes: DashboardRoutes): void {
  const { services } = routes;
  app.get('/suppressions', async (request, reply) => {
    const viewer = viewerOf(request);
    const q = queryOf(request);
    const { projects, project } = await pickProject(services, viewer, q.project);
    const { rows, next } = await searchSuppressions(services, project, { contains: q.q, after: q.after });
    const body = html`${projectPicker(projects, project, '/suppressions')}
<form method="post" action="/suppressions/add" class="card">
${csrfField(viewer)}<input type="hidden" name="project" value="${project.uid}">
<label for="s-add">Add addresses (one a line)</label><textarea id="s-add" name="addresses" rows="3" required></textarea>
<label for="s-note">Note</label><input id="s-note" name="message" maxlength="1000">
<button type="submit">Add to the suppression list</button>
</form>
<form method="get" action="/suppressions" role="search" class="filters"><input type="hidden" name="project" value="${project.uid}">
<div class="field"><label for="s-q">Search addresses</label><input id="s-q" name="q" value="${q.q ?? ''}"></div><div class="field actions"><button type="submit">Search</button></div></form>
<table><thead><tr><th scope="col">Address</th><th scope="col">Status</th><th scope="col">Reason</th><th scope="col">Blocked until</th><th scope="col">Note</th><th scope="col"><span class="visually-hidden">Remove</span></th></tr></thead>
<tbody>${rows.length === 0 ? html`<tr><td colspan="6" class="empty">No entries.</td></tr>` : rows.map(
      (s) => html`<tr><td>${shownAddress(s)}</td><td>${s.status}</td><td>${s.suppression_state}</td><td>${formatTime(s.blocked_until)}</td><td>${s.message ?? ''}</td>
<td><form method="post" action="/suppressions/remove">${csrfField(viewer)}<input type="hidden" name="project" value="${project.uid}"><input type="hidden" name="address" value="${shownAddress(s)}"><button type="submit" class="link" aria-label="Remove ${shownAddress(s)}">Remove</button></form></td></tr>`,
    )}</tbody></table>
${next ? html`<nav class="pager"><a href="/suppressions${queryString({ project: project.uid, q: q.q, after: next })}" rel="next">More</a></nav>` : ''}`;
    return sendPage(reply, page('Suppressions', { viewer, section: 'suppressions' }, body));
  });

  const back = (project: string) => `/suppressions${queryString({ project })}`;

  app.post('/suppressions/add', async (request, reply) => {
    const viewer = viewerOf(request);
    const form = formOf(request);
    const { project } = await pickProject(services, viewer, form.project);
    // One a line (a line may be "Name <address>"); commas and semicolons separate too, as in a pasted list.
    const addresses = (form.addresses ?? '').split(/[\r\n,;]+/).map((a) => a.trim()).filter((a) => a !== '');
    try {
      const added = await addToSuppressionList(services, project, { addresses, message: form.message?.trim() || null });
      return redirectWithNotice(reply, routes, back(project.uid), { kind: 'ok', text: `Added: ${Object.keys(added).join(', ')}` });
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
      return redirectWithNotice(reply, routes, back(project.uid), { kind: 'error', text: `${error.message} Nothing was added.` });
    }
  });

  app.post('/suppressions/remove', async (request, reply) => {
    const viewer = viewerOf(request);
    const form = formOf(request);
    const { project } = await pickProject(services, viewer, form.project);
    try {
      const { removed } = await removeFromSuppressionList(services, project, { addresses: [form.address ?? ''] });
      return redirectWithNotice(reply, routes, back(project.uid), { kind: 'ok', text: `Removed: ${removed.join(', ')}` });
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
      return redirectWithNotice(reply, routes, back(project.uid), { kind: 'error', text: error.message });
    }
  });
}

// The suppression list of a project: search, add (by hand), remove (after a confirmation page,
// docs/dashboard.md, "Confirmations").
import type { FastifyInstance } from 'fastify';
import { ApiError } from '../../domain/errors.ts';
import { findSuppression, searchSuppressions } from '../../operations/suppression-views.ts';
import { addToSuppressionList, readAddressLines, removeFromSuppressionList, shownAddress } from '../../operations/suppressions.ts';
import type { Project } from '../../operations/context.ts';
import { formatTime, html, queryString, type SafeHtml } from '../html.ts';
import { csrfField, page, projectPicker } from '../layout.ts';
import { formOf, queryOf, redirectWithNotice, sendPage, viewerOf, type DashboardRoutes, type PageViewer } from '../requests.ts';
import { confirmationPage, pickProject } from './common.ts';

/** The list page; `added` keeps a refused add's text and says which lines are not addresses. */
function listPage(viewer: PageViewer, projects: readonly Project[], project: Project, q: Record<string, string>, rows: Awaited<ReturnType<typeof searchSuppressions>>['rows'], next: string | null, added: { typed?: string; note?: string; error?: string } = {}): SafeHtml {
  return html`${projectPicker(projects, project, '/suppressions')}
<form method="post" action="/suppressions/add" class="card">
${csrfField(viewer)}<input type="hidden" name="project" value="${project.uid}">
<label for="s-add">Add addresses (one a line)</label><textarea id="s-add" name="addresses" rows="3" required${added.error ? html` aria-invalid="true" aria-describedby="err-add"` : ''}>${added.typed ?? ''}</textarea>${added.error ? html`<p class="field-error" id="err-add" role="alert">${added.error}</p>` : ''}
<label for="s-note">Note</label><input id="s-note" name="message" maxlength="1000" value="${added.note ?? ''}">
<button type="submit">Add to the suppression list</button>
</form>
<form method="get" action="/suppressions" role="search" class="filters"><input type="hidden" name="project" value="${project.uid}">
<div class="field"><label for="s-q">Search addresses</label><input id="s-q" name="q" value="${q.q ?? ''}"></div><div class="field actions"><button type="submit">Search</button></div></form>
<table><thead><tr><th scope="col">Address</th><th scope="col">Status</th><th scope="col">Reason</th><th scope="col">Blocked until</th><th scope="col">Note</th><th scope="col"><span class="visually-hidden">Remove</span></th></tr></thead>
<tbody>${rows.length === 0 ? html`<tr><td colspan="6" class="empty">No entries.</td></tr>` : rows.map(
      (s) => html`<tr><td>${shownAddress(s)}</td><td>${s.status}</td><td>${s.suppression_state}</td><td>${formatTime(s.blocked_until)}</td><td>${s.message ?? ''}</td>
<td><a href="/suppressions/remove${queryString({ project: project.uid, address: shownAddress(s), q: q.q })}" aria-label="Remove ${shownAddress(s)}">Remove…</a></td></tr>`,
    )}</tbody></table>
${next ? html`<nav class="pager"><a href="/suppressions${queryString({ project: project.uid, q: q.q, after: next })}" rel="next">More</a></nav>` : ''}`;
}

export function installSuppressionPages(app: FastifyInstance, routes: DashboardRoutes): void {
  const { services } = routes;
  app.get('/suppressions', async (request, reply) => {
    const viewer = viewerOf(request);
    const q = queryOf(request);
    const { projects, project } = await pickProject(services, viewer, q.project);
    const { rows, next } = await searchSuppressions(services, project, { contains: q.q, after: q.after });
    return sendPage(reply, page('Suppressions', { viewer, section: 'suppressions' }, listPage(viewer, projects, project, q, rows, next)));
  });

  const back = (project: string, q?: string) => `/suppressions${queryString({ project, q })}`;

  app.post('/suppressions/add', async (request, reply) => {
    const viewer = viewerOf(request);
    const form = formOf(request);
    const { project } = await pickProject(services, viewer, form.project);
    const { addresses, bad } = readAddressLines(form.addresses ?? '');
    if (bad.length > 0) {
      // Nothing is added and what was typed is shown again, with the lines to fix (docs/dashboard.md, "Pages").
      const { rows, next } = await searchSuppressions(services, project, {});
      const lines = bad.slice(0, 20).map((b) => `line ${b.line} (“${b.text.slice(0, 80)}”)`).join(', ') + (bad.length > 20 ? `, and ${bad.length - 20} more lines` : '');
      const error = `Not an address: ${lines}. Nothing was added: fix or remove ${bad.length === 1 ? 'that line' : 'those lines'} and add again.`;
      const { projects } = await pickProject(services, viewer, form.project);
      return sendPage(reply, page('Suppressions', { viewer, section: 'suppressions' }, listPage(viewer, projects, project, { project: project.uid }, rows, next, { typed: form.addresses, note: form.message, error })), 406);
    }
    try {
      const added = await addToSuppressionList(services, project, { addresses, message: form.message?.trim() || null });
      return redirectWithNotice(reply, routes, back(project.uid), { kind: 'ok', text: `Added: ${Object.keys(added).join(', ')}` });
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
      return redirectWithNotice(reply, routes, back(project.uid), { kind: 'error', text: `${error.message} Nothing was added.` });
    }
  });

  // Removal asks first: this page changes nothing; its form (a POST) removes.
  app.get('/suppressions/remove', async (request, reply) => {
    const viewer = viewerOf(request);
    const q = queryOf(request);
    const { project } = await pickProject(services, viewer, q.project);
    const entry = await findSuppression(services, project, q.address ?? '');
    if (!entry) throw new ApiError('not_found', `${(q.address ?? '').slice(0, 320)} is not on the suppression list of ${project.name}.`);
    const address = shownAddress(entry);
    return sendPage(reply, confirmationPage(viewer, {
      title: 'Remove a suppression',
      section: 'suppressions',
      what: html`<p>Remove <strong>${address}</strong> from the suppression list of ${project.name}?
It is there as ${entry.status} (${entry.suppression_state})${entry.message ? html`: ${entry.message}` : ''}. Once removed, mail to it is sent again; if it still bounces or complains, that hurts the sending reputation. Adding it back does not restore what the entry recorded.</p>`,
      action: '/suppressions/remove',
      fields: { project: project.uid, address, ...(q.q ? { q: q.q } : {}) },
      button: 'Remove from the list',
      back: back(project.uid, q.q),
      returnPath: back(project.uid, q.q),
    }));
  });

  app.post('/suppressions/remove', async (request, reply) => {
    const viewer = viewerOf(request);
    const form = formOf(request);
    const { project } = await pickProject(services, viewer, form.project);
    try {
      const { removed } = await removeFromSuppressionList(services, project, { addresses: [form.address ?? ''] });
      return redirectWithNotice(reply, routes, back(project.uid, form.q), { kind: 'ok', text: `Removed: ${removed.join(', ')}` });
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
      return redirectWithNotice(reply, routes, back(project.uid, form.q), { kind: 'error', text: error.message });
    }
  });
}

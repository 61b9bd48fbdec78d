// A project's API key: its prefix, and rotation (the old key stops working at once; the new one is
// shown on the answer to the POST, this once, and is in no URL, log or later page).
import type { FastifyInstance } from 'fastify';
import { getProject, rotateProjectKey } from '../../operations/projects.ts';
import { requireViewerProject } from '../../operations/users.ts';
import { html } from '../html.ts';
import { csrfField, page } from '../layout.ts';
import { sendPage, viewerOf, type DashboardRoutes } from '../requests.ts';
import { pickProject } from './common.ts';

export function installKeyPages(app: FastifyInstance, { services }: DashboardRoutes): void {
  app.get('/keys', async (request, reply) => {
    const { project } = await pickProject(services, viewerOf(request), undefined);
    return reply.redirect(`/projects/${encodeURIComponent(project.uid)}/keys`, 303);
  });

  app.get('/projects/:uid/keys', async (request, reply) => {
    const viewer = viewerOf(request);
    const { projects } = await pickProject(services, viewer, undefined);
    const project = await requireViewerProject(services, viewer, (request.params as { uid: string }).uid);
    const view = await getProject(services, viewer.account, project.uid);
    const body = html`${projects.length > 1 ? html`<nav class="ranges" aria-label="Projects">${projects.map((p) => html`<a href="/projects/${encodeURIComponent(p.uid)}/keys"${p.id === project.id ? html` aria-current="page"` : ''}>${p.name}</a>`)}</nav>` : ''}
<section class="card">
<h2>${project.name}</h2>
<p>Active key: <code>${view.keyPrefix ? `${view.keyPrefix}…` : '(none)'}</code></p>
<form method="post" action="/projects/${encodeURIComponent(project.uid)}/keys">${csrfField(viewer)}
<p>Rotating makes the current key stop working immediately; the new key is shown once.</p>
<button type="submit" class="danger">Rotate the key</button></form>
</section>`;
    return sendPage(reply, page('Project key', { viewer, section: 'keys' }, body));
  });

  app.post('/projects/:uid/keys', async (request, reply) => {
    const viewer = viewerOf(request);
    const project = await requireViewerProject(services, viewer, (request.params as { uid: string }).uid);
    const { apiKey } = await rotateProjectKey(services, viewer.account, project.uid);
    const body = html`<section class="card">
<p class="notice ok" role="status">The key of ${project.name} was rotated. Copy the new key now: it is not shown again.</p>
<p><label for="new-key">New API key</label> <input id="new-key" class="key" readonly value="${apiKey}"> <button type="button" class="copy" data-copy-from="new-key">Copy</button></p>
<p><a href="/projects/${encodeURIComponent(project.uid)}/keys">Done</a></p></section>`;
    return sendPage(reply, page('New project key', { viewer, section: 'keys' }, body));
  });
}

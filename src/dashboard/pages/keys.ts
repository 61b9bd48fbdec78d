// A project's API key: its prefix, and rotation after a confirmation page (docs/dashboard.md,
// "Confirmations"): the old key stops working at once; the new one is shown on the answer to the
// POST, this once, and is in no URL, log or later page.
import type { FastifyInstance } from 'fastify';
import { getProject, rotateProjectKey } from '../../operations/projects.ts';
import { requireViewerProject } from '../../operations/users.ts';
import { html } from '../html.ts';
import { page } from '../layout.ts';
import { sendPage, viewerOf, type DashboardRoutes } from '../requests.ts';
import { confirmationPage, pickProject } from './common.ts';

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
<p>Rotating makes the current key stop working immediately; the new key is shown once.</p>
<p><a class="button danger" href="/projects/${encodeURIComponent(project.uid)}/keys/rotate">Rotate the key…</a></p>
</section>`;
    return sendPage(reply, page('Project key', { viewer, section: 'keys' }, body));
  });

  // Rotation asks first: this page changes nothing; its form (a POST) rotates.
  app.get('/projects/:uid/keys/rotate', async (request, reply) => {
    const viewer = viewerOf(request);
    const project = await requireViewerProject(services, viewer, (request.params as { uid: string }).uid);
    const view = await getProject(services, viewer.account, project.uid);
    const keys = `/projects/${encodeURIComponent(project.uid)}/keys`;
    return sendPage(reply, confirmationPage(viewer, {
      title: 'Rotate the project key',
      section: 'keys',
      what: html`<p>Rotate the API key of ${project.name}${view.keyPrefix ? html` (<code>${view.keyPrefix}…</code>)` : ''}?
The current key stops working at once: every application and client library sending with it is refused (401) until it is given the new key, which is shown once. This cannot be undone.</p>`,
      action: `${keys}/rotate`,
      button: 'Rotate the key',
      back: keys,
      returnPath: keys,
    }));
  });

  app.post('/projects/:uid/keys/rotate', async (request, reply) => {
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

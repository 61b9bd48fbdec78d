// Sending domains: the DNS records to publish (with copy buttons), the last check's results, a
// button to check again, and removal after a confirmation page (docs/dashboard.md,
// "Confirmations"). Account users only (domains belong to the account).
import type { FastifyInstance } from 'fastify';
import { ApiError } from '../../domain/errors.ts';
import { checkDomain, createDomain, getDomain, listDomains, removeDomain, type DomainView } from '../../operations/domains.ts';
import { formatTime, html } from '../html.ts';
import { csrfField, page } from '../layout.ts';
import { formOf, redirectWithNotice, sendPage, viewerOf, type DashboardRoutes, type PageViewer } from '../requests.ts';
import { confirmationPage, requireAccountUser } from './common.ts';

function domainCard(viewer: PageViewer, v: DomainView) {
  const name = v.domain.name;
  return html`<section class="card" aria-labelledby="d-${v.domain.id}">
<h2 id="d-${v.domain.id}">${name} ${v.lastCheck ? html`<span class="badge ${v.lastCheck.status === 'ok' ? 'completed' : 'retry'}">${v.lastCheck.status}</span>` : html`<span class="badge">not checked</span>`}</h2>
<table><thead><tr><th scope="col">Purpose</th><th scope="col">Type</th><th scope="col">Name</th><th scope="col">Value</th><th scope="col">Check</th></tr></thead><tbody>
${Object.entries(v.records).map(([purpose, r]) => {
    const check = v.lastCheck?.records[purpose as keyof typeof v.records];
    return html`<tr><td>${purpose}</td><td>${r.type}</td><td><code>${r.name}</code> <button type="button" class="copy" data-copy="${r.name}">Copy</button></td>
<td class="record"><code>${r.value}</code> <button type="button" class="copy" data-copy="${r.value}">Copy</button><br><small>${r.note}</small></td>
<td>${check ? html`<span class="badge ${check.status === 'ok' ? 'completed' : 'failed'}">${check.status}</span>${check.found.length ? html`<br><small>found: ${check.found.join(' | ')}</small>` : ''}` : ''}</td></tr>`;
  })}</tbody></table>
<p>${v.domain.checked_at ? html`Checked ${formatTime(Number(v.domain.checked_at))}.` : ''}</p>
<div class="actions"><form method="post" action="/domains/${encodeURIComponent(name)}/check">${csrfField(viewer)}<button type="submit">Check DNS now</button></form>
<a class="button danger" href="/domains/${encodeURIComponent(name)}/delete" aria-label="Remove ${name}">Remove…</a></div>
</section>`;
}

export function installDomainPages(app: FastifyInstance, routes: DashboardRoutes): void {
  const { services } = routes;
  app.get('/domains', async (request, reply) => {
    const viewer = viewerOf(request);
    requireAccountUser(viewer);
    const domains = await listDomains(services, viewer.account);
    const body = html`<form method="post" action="/domains" class="card">${csrfField(viewer)}<label for="d-name">Add a sending domain</label><input id="d-name" name="name" required placeholder="example.com"><button type="submit">Add</button></form>
${domains.length === 0 ? html`<p>No domain yet.</p>` : domains.map((d) => domainCard(viewer, d))}`;
    return sendPage(reply, page('Domains', { viewer, section: 'domains' }, body));
  });

  // Removal asks first: this page changes nothing; its form (a POST) removes.
  app.get('/domains/:name/delete', async (request, reply) => {
    const viewer = viewerOf(request);
    requireAccountUser(viewer);
    const found = await getDomain(services, viewer.account, { name: (request.params as { name: string }).name });
    return sendPage(reply, confirmationPage(viewer, {
      title: 'Remove a sending domain',
      section: 'domains',
      what: html`<p>Remove the sending domain <strong>${found.domain.name}</strong>?
Its DKIM key is deleted: mail from ${found.domain.name} is no longer signed with it (it goes out unsigned, or signed for a parent domain of the account's), and the DKIM record published for it matches no key. Adding the domain again makes a new key, whose record must be published again. This cannot be undone.</p>`,
      action: `/domains/${encodeURIComponent(found.domain.name)}/delete`,
      button: 'Remove the domain',
      back: '/domains',
      returnPath: '/domains',
    }));
  });

  const act = (path: string, run: (viewer: ReturnType<typeof viewerOf>, name: string, form: Record<string, string>) => Promise<string>) =>
    app.post(path, async (request, reply) => {
      const viewer = viewerOf(request);
      requireAccountUser(viewer);
      const form = formOf(request);
      const name = (request.params as { name?: string }).name ?? form.name ?? '';
      try {
        return redirectWithNotice(reply, routes, '/domains', { kind: 'ok', text: await run(viewer, name, form) });
      } catch (error) {
        if (!(error instanceof ApiError)) throw error;
        return redirectWithNotice(reply, routes, '/domains', { kind: 'error', text: error.message });
      }
    });
  act('/domains', async (viewer, name) => `Added ${(await createDomain(services, viewer.account, { name })).domain.name}: publish its records below.`);
  act('/domains/:name/check', async (viewer, name) => `Checked ${name}: ${(await checkDomain(services, viewer.account, { name })).lastCheck?.status ?? ''}.`);
  act('/domains/:name/delete', async (viewer, name) => `Removed ${await removeDomain(services, viewer.account, { name })}.`);
}

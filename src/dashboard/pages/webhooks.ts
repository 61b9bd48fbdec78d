// Webhook endpoints with their recent deliveries, retry of failed ones, secret rotation (the new
// secret shown once) and removal, each after a confirmation page (docs/dashboard.md,
// "Confirmations"), disabling and enabling an endpoint (update_webhook's and delete_webhook's
// operations). Account users only.
import type { FastifyInstance, FastifyReply } from 'fastify';
import { ApiError } from '../../domain/errors.ts';
import {
  createWebhook,
  deleteWebhook,
  listDeliveries,
  listWebhooks,
  retryDeliveries,
  rotateWebhookSecret,
  updateWebhook,
  WEBHOOK_EVENTS,
  type WebhookEvent,
  type WebhookView,
} from '../../operations/webhooks.ts';
import { listViewerProjects } from '../../operations/users.ts';
import { formatTime, html } from '../html.ts';
import { csrfField, page } from '../layout.ts';
import { formOf, redirectWithNotice, sendPage, viewerOf, type DashboardRoutes, type PageViewer } from '../requests.ts';
import { confirmationPage, requireAccountUser } from './common.ts';

const RECENT_DELIVERIES = 50;

export function installWebhookPages(app: FastifyInstance, routes: DashboardRoutes): void {
  const { services } = routes;
  app.get('/webhooks', async (request, reply) => {
    const viewer = viewerOf(request);
    requireAccountUser(viewer);
    const [hooks, deliveries, projects] = await Promise.all([
      listWebhooks(services, viewer.account),
      listDeliveries(services, viewer.account, { kind: 'webhook', limit: RECENT_DELIVERIES }),
      listViewerProjects(services, viewer),
    ]);
    const body = html`<form method="post" action="/webhooks" class="card">${csrfField(viewer)}
<label for="w-url">Endpoint URL</label><input id="w-url" name="url" type="url" required placeholder="https://example.com/hooks/posthorn">
<label for="w-project">Project</label><select id="w-project" name="project"><option value="">every project</option>${projects.map((p) => html`<option value="${p.uid}">${p.name}</option>`)}</select>
<fieldset><legend>Events</legend>${WEBHOOK_EVENTS.map((e) => html`<label class="check"><input type="checkbox" name="events" value="${e}" checked> ${e}</label>`)}</fieldset>
<button type="submit">Add webhook</button></form>
<h2>Endpoints</h2>
<table><thead><tr><th scope="col">URL</th><th scope="col">Project</th><th scope="col">Events</th><th scope="col">Status</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead><tbody>
${hooks.length === 0 ? html`<tr><td colspan="5" class="empty">No webhook yet.</td></tr>` : hooks.map(
      (h) => html`<tr><td class="url">${h.webhook.url}</td><td>${h.projectUid ?? 'every project'}</td><td>${(JSON.parse(h.webhook.events) as string[]).join(', ')}</td><td>${h.webhook.status === 'active' ? 'active' : html`<span class="badge failed">disabled</span>`}</td>
<td>${endpointActions(viewer, h)}</td></tr>`,
    )}</tbody></table>
<h2>Recent deliveries</h2>
<table><thead><tr><th scope="col">Created</th><th scope="col">Event</th><th scope="col">URL</th><th scope="col">State</th><th scope="col">Attempts</th><th scope="col">Last answer</th><th scope="col"><span class="visually-hidden">Retry</span></th></tr></thead><tbody>
${deliveries.length === 0 ? html`<tr><td colspan="7" class="empty">No delivery yet.</td></tr>` : deliveries.map(
      (d) => html`<tr><td>${formatTime(Number(d.request.created_at))}</td><td>${d.request.event_type ?? ''}</td><td class="url">${d.request.url}</td><td><span class="badge ${d.request.state}">${d.request.state}</span></td><td>${Number(d.request.attempts)}</td><td>${d.request.last_status_code ?? ''} ${d.request.last_error ?? ''}</td>
<td>${d.request.state === 'failed' ? html`<form method="post" action="/webhooks/deliveries/${Number(d.request.id)}/retry">${csrfField(viewer)}<button type="submit" class="link">Retry</button></form>` : ''}</td></tr>`,
    )}</tbody></table>`;
    return sendPage(reply, page('Webhooks', { viewer, section: 'webhooks' }, body));
  });

  const fail = (reply: FastifyReply, error: unknown) => {
    if (!(error instanceof ApiError)) throw error;
    return redirectWithNotice(reply, routes, '/webhooks', { kind: 'error', text: error.message });
  };

  app.post('/webhooks', async (request, reply) => {
    const viewer = viewerOf(request);
    requireAccountUser(viewer);
    const form = formOf(request);
    const events = (form.events ?? '').split('\n').filter((e): e is WebhookEvent => (WEBHOOK_EVENTS as readonly string[]).includes(e));
    try {
      const created = await createWebhook(services, viewer.account, { url: form.url ?? '', events: events.length ? events : undefined, projectUid: form.project || undefined });
      return sendPage(reply, secretShown(viewer, created.webhook.url, created.secret));
    } catch (error) {
      return fail(reply, error);
    }
  });

  /** The account's endpoint named by the URL, or not_found. */
  const endpointOf = async (viewer: PageViewer, uid: string): Promise<WebhookView> => {
    const hook = (await listWebhooks(services, viewer.account)).find((h) => h.webhook.uid === uid);
    if (!hook) throw new ApiError('not_found', `Webhook ${uid} not found.`);
    return hook;
  };

  // Rotation asks first: the endpoint's receiver rejects everything signed after it until it has
  // the new secret.
  app.get('/webhooks/:uid/rotate', async (request, reply) => {
    const viewer = viewerOf(request);
    requireAccountUser(viewer);
    const hook = await endpointOf(viewer, uidOf(request));
    return sendPage(reply, confirmationPage(viewer, {
      title: 'Rotate a webhook secret',
      section: 'webhooks',
      what: html`<p>Rotate the signing secret of <strong class="url">${hook.webhook.url}</strong> (${hook.projectUid ?? 'every project'})?
The current secret stops being used at once: every request from now on, retries of older events included, is signed with the new one, which is shown once. Until the receiver has the new secret it rejects them as unsigned. This cannot be undone.</p>`,
      action: `/webhooks/${encodeURIComponent(hook.webhook.uid)}/rotate`,
      button: 'Rotate the secret',
      back: '/webhooks',
      returnPath: '/webhooks',
    }));
  });

  app.post('/webhooks/:uid/rotate', async (request, reply) => {
    const viewer = viewerOf(request);
    requireAccountUser(viewer);
    try {
      const rotated = await rotateWebhookSecret(services, viewer.account, uidOf(request));
      return sendPage(reply, secretShown(viewer, rotated.webhook.url, rotated.secret));
    } catch (error) {
      return fail(reply, error);
    }
  });

  // Disabling keeps the endpoint and its secret; it receives no new events until it is enabled again.
  app.post('/webhooks/:uid/status', async (request, reply) => {
    const viewer = viewerOf(request);
    requireAccountUser(viewer);
    const status = formOf(request).status === 'disabled' ? 'disabled' : 'active';
    try {
      const { webhook } = await updateWebhook(services, viewer.account, uidOf(request), { status });
      return redirectWithNotice(reply, routes, '/webhooks', { kind: 'ok', text: `${status === 'active' ? 'Enabled' : 'Disabled'}: ${webhook.url}` });
    } catch (error) {
      return fail(reply, error);
    }
  });

  // Removal asks first: this page changes nothing; its form (a POST) removes.
  app.get('/webhooks/:uid/remove', async (request, reply) => {
    const viewer = viewerOf(request);
    requireAccountUser(viewer);
    const hook = await endpointOf(viewer, uidOf(request));
    return sendPage(reply, confirmationPage(viewer, {
      title: 'Remove a webhook',
      section: 'webhooks',
      what: html`<p>Remove the endpoint <strong class="url">${hook.webhook.url}</strong> (${hook.projectUid ?? 'every project'})?
It receives no new events, and requests not yet delivered to it are not sent. This cannot be undone: to stop it for a while, disable it instead.</p>`,
      action: `/webhooks/${encodeURIComponent(hook.webhook.uid)}/remove`,
      button: 'Remove the endpoint',
      back: '/webhooks',
      returnPath: '/webhooks',
    }));
  });

  app.post('/webhooks/:uid/remove', async (request, reply) => {
    const viewer = viewerOf(request);
    requireAccountUser(viewer);
    try {
      const { webhook } = await deleteWebhook(services, viewer.account, uidOf(request));
      return redirectWithNotice(reply, routes, '/webhooks', { kind: 'ok', text: `Removed: ${webhook.url}` });
    } catch (error) {
      return fail(reply, error);
    }
  });

  app.post('/webhooks/deliveries/:id/retry', async (request, reply) => {
    const viewer = viewerOf(request);
    requireAccountUser(viewer);
    const id = Number((request.params as { id: string }).id);
    const count = Number.isSafeInteger(id) ? await retryDeliveries(services, viewer.account, [id]) : 0;
    return redirectWithNotice(reply, routes, '/webhooks', count ? { kind: 'ok', text: 'Delivery queued again.' } : { kind: 'error', text: 'Only a failed delivery can be retried.' });
  });
}

function uidOf(request: { params: unknown }): string {
  return (request.params as { uid: string }).uid;
}

/** An endpoint's row: rotate its secret and remove it (each asked first), disable or enable it. */
function endpointActions(viewer: PageViewer, h: WebhookView) {
  const base = `/webhooks/${encodeURIComponent(h.webhook.uid)}`;
  const disabled = h.webhook.status !== 'active';
  return html`<div class="actions"><a href="${base}/rotate" aria-label="Rotate the secret of ${h.webhook.url}">Rotate secret…</a>
<form method="post" action="${base}/status">${csrfField(viewer)}<input type="hidden" name="status" value="${disabled ? 'active' : 'disabled'}"><button type="submit" class="link" aria-label="${disabled ? 'Enable' : 'Disable'} ${h.webhook.url}">${disabled ? 'Enable' : 'Disable'}</button></form>
<a href="${base}/remove" aria-label="Remove ${h.webhook.url}">Remove…</a></div>`;
}

function secretShown(viewer: PageViewer, url: string, secret: string): string {
  return page(
    'Webhook secret',
    { viewer, section: 'webhooks' },
    html`<section class="card"><p class="notice ok" role="status">The signing secret of ${url}. Copy it now: it is not shown again.</p>
<p><label for="secret">Secret</label> <input id="secret" class="key" readonly value="${secret}"> <button type="button" class="copy" data-copy-from="secret">Copy</button></p>
<p><a href="/webhooks">Done</a></p></section>`,
  );
}

// Inbound mailboxes and their state: polling, auth failed (and why), error. Account users only.
// Credentials are never shown.
import type { FastifyInstance } from 'fastify';
import { listMailboxes } from '../../operations/mailboxes.ts';
import { formatTime, html } from '../html.ts';
import { page } from '../layout.ts';
import { sendPage, viewerOf, type DashboardRoutes } from '../requests.ts';
import { requireAccountUser } from './common.ts';

export function installMailboxPages(app: FastifyInstance, { services }: DashboardRoutes): void {
  app.get('/mailboxes', async (request, reply) => {
    const viewer = viewerOf(request);
    requireAccountUser(viewer);
    const boxes = await listMailboxes(services, viewer.account);
    const body = html`<p>Mailboxes are added with the <code>create_mailbox</code> API method (docs/mailboxes.md).</p>
<table><thead><tr><th scope="col">Mailbox</th><th scope="col">Server</th><th scope="col">State</th><th scope="col">Last error</th><th scope="col">Checked</th><th scope="col">Next check</th><th scope="col">Posts to</th></tr></thead><tbody>
${boxes.length === 0 ? html`<tr><td colspan="7" class="empty">No mailbox yet.</td></tr>` : boxes.map(
      (m) => html`<tr><td>${m.label ?? m.uid}<br><small>${m.username}</small></td><td>${m.host}:${m.port}${m.tls ? ' (TLS)' : ''}</td>
<td><span class="badge ${m.status === 'active' ? 'completed' : 'failed'}">${m.status === 'active' ? 'polling' : m.status.replace('_', ' ')}</span>${m.failures ? html` <small>${m.failures} failures</small>` : ''}</td>
<td>${m.last_error ?? ''}</td><td>${formatTime(m.checked_at)}</td><td>${formatTime(m.next_check_at)}</td><td class="url">${m.postback_url}</td></tr>`,
    )}</tbody></table>`;
    return sendPage(reply, page('Mailboxes', { viewer, section: 'mailboxes' }, body));
  });
}

// Messages: the search (keyset-paged, polled for new rows by assets/app.js while on the first
// page), one message (the page send_message's data.message.url names), its HTML part in a
// sandboxed frame with its own policy (no scripts; remote images only when asked), and its MIME
// source as a download. Everything of a message is attacker-controlled and escaped. A sandbox
// project's messages say so (docs/sandbox.md).
import type { FastifyInstance } from 'fastify';
import { ApiError } from '../../domain/errors.ts';
import { parseApiDate } from '../../domain/time.ts';
import { TRANSMISSION_STATUSES } from '../../operations/reports/message-report.ts';
import {
  findViewerMessage,
  getMessageContent,
  getMessageSource,
  getMessageView,
  searchMessages,
  type MessageFilters,
  type MessageListItem,
  type MessageView,
  type RecipientTimeline,
} from '../../operations/message-views.ts';
import type { Project } from '../../operations/context.ts';
import { formatTime, html, queryString, showBidiControls, type SafeHtml } from '../html.ts';
import { page, projectLabel } from '../layout.ts';
import { queryOf, sendPage, viewerOf, type DashboardRoutes } from '../requests.ts';
import { pickProject, sandboxBadge, sandboxNote } from './common.ts';
import type { Viewer } from '../../operations/users.ts';

/** The frame of a message's HTML part: nothing may run, nothing may be fetched but inline images. */
function framePolicy(images: boolean): string {
  return `sandbox; default-src 'none'; style-src 'unsafe-inline'; font-src data:; img-src data: cid:${images ? ' https: http:' : ''}; frame-ancestors 'self'; form-action 'none'; base-uri 'none'`;
}

const FILTER_FIELDS = ['recipient', 'uid', 'subject', 'template', 'status', 'from', 'until'] as const;

function readFilters(q: Record<string, string>): MessageFilters {
  const day = (field: 'from' | 'until'): number | null => {
    const text = (q[field] ?? '').trim();
    if (text === '') return null;
    const ms = parseApiDate(text);
    if (ms === null) throw new ApiError('call_error', `The ${field} date must be written YYYY-MM-DD, got "${text.slice(0, 40)}".`);
    // until is inclusive of its day
    return field === 'until' ? ms + 86_400_000 : ms;
  };
  return {
    recipient: q.recipient,
    uid: q.uid,
    subject: q.subject,
    template: q.template,
    status: q.status,
    fromMs: day('from'),
    untilMs: day('until'),
    cursor: q.cursor,
  };
}

function statusBadges(statuses: Record<string, number>): SafeHtml {
  return html`${Object.entries(statuses).map(([s, n]) => html`<span class="badge ${s}">${s}${n > 1 ? html` ×${n}` : ''}</span> `)}`;
}

function messageRows(items: readonly MessageListItem[]): SafeHtml {
  if (items.length === 0) return html`<tr><td colspan="5" class="empty">No messages match.</td></tr>`;
  return html`${items.map(
    ({ message: m, statuses, firstRecipient }) => html`<tr>
<td><time datetime="${new Date(Number(m.created_at)).toISOString()}">${formatTime(Number(m.created_at))}</time></td>
<td><a href="/messages/${Number(m.id)}">${m.subject || '(no subject)'}</a><br><small class="uid">${m.uid}</small></td>
<td>${firstRecipient ?? ''}${m.recipient_count > 1 ? html` <small>+${m.recipient_count - 1}</small>` : ''}</td>
<td>${m.template ?? ''}</td>
<td>${statusBadges(statuses)}</td>
</tr>`,
  )}`;
}

function searchForm(project: Project, projects: readonly Project[], q: Record<string, string>): SafeHtml {
  const field = (name: string, label: string, type = 'text') =>
    html`<div class="field"><label for="f-${name}">${label}</label><input id="f-${name}" name="${name}" type="${type}" value="${q[name] ?? ''}"></div>`;
  return html`<form method="get" action="/messages" class="filters" role="search">
${projects.length > 1 ? html`<div class="field"><label for="f-project">Project</label><select id="f-project" name="project">${projects.map((p) => html`<option value="${p.uid}"${p.id === project.id ? html` selected` : ''}>${projectLabel(p)}</option>`)}</select></div>` : html`<input type="hidden" name="project" value="${project.uid}">`}
${field('recipient', 'Recipient')}${field('uid', 'UID')}${field('subject', 'Subject')}${field('template', 'Template')}
<div class="field"><label for="f-status">Status</label><select id="f-status" name="status"><option value="">any</option>${TRANSMISSION_STATUSES.map(
    (s) => html`<option value="${s}"${q.status === s ? html` selected` : ''}>${s}</option>`,
  )}</select></div>
${field('from', 'From day', 'date')}${field('until', 'Until day', 'date')}
<div class="field actions"><button type="submit">Search</button> <a href="/messages?project=${encodeURIComponent(project.uid)}">Clear</a></div>
</form>`;
}

function timelineOf(r: RecipientTimeline): SafeHtml {
  const t = r.transmission;
  return html`<section class="card recipient" aria-label="Recipient ${t.recipient}">
<h3>${t.recipient_name ? html`${t.recipient_name} ` : ''}&lt;${t.recipient}&gt; <span class="badge ${t.status}">${t.status}</span></h3>
<ol class="timeline">${r.entries.map((e) => {
    const when = html`<time datetime="${new Date(e.at).toISOString()}">${formatTime(e.at)}</time>`;
    if (e.kind === 'attempt' && e.attempt) {
      const a = e.attempt;
      return html`<li class="attempt ${a.outcome}">${when} <strong>attempt: ${a.outcome}</strong>
<dl class="inline"><dt>MX host</dt><dd>${a.mx_host ?? '(none reached)'}</dd><dt>TLS</dt><dd>${a.tls == null ? 'not recorded' : a.tls ? 'yes' : 'no'}</dd><dt>Reply</dt><dd><code>${a.result_code ?? ''}</code> ${a.result_message ?? ''}</dd><dt>Duration</dt><dd>${Number(a.duration_ms)} ms</dd></dl></li>`;
    }
    return html`<li class="${e.kind}">${when} <strong>${e.kind}</strong>${e.text ? html` <span>${e.text}</span>` : ''}</li>`;
  })}</ol>
<p><a href="/messages/${Number(t.message_id)}/source?recipient=${encodeURIComponent(t.recipient)}" download>MIME source as composed for ${t.recipient}</a></p>
${r.suppression ? html`<p class="notice error">Suppressed: ${r.suppression.status} (${r.suppression.suppression_state})${r.suppression.message ? html` — ${r.suppression.message}` : ''}</p>` : ''}
</section>`;
}

function messagePage(viewer: Viewer, view: MessageView, content: Awaited<ReturnType<typeof getMessageContent>>, images: boolean): SafeHtml {
  const m = view.message;
  const id = Number(m.id);
  return html`${sandboxNote(viewer, view.project)}<dl class="summary">
<dt>Project</dt><dd><a href="/projects/${encodeURIComponent(view.project.uid)}">${view.project.name}</a>${sandboxBadge(view.project)}</dd>
<dt>UID</dt><dd><code>${m.uid}</code> <button type="button" class="copy" data-copy="${m.uid}">Copy</button></dd>
<dt>Message-ID</dt><dd><code>${content.messageId}</code></dd>
<dt>Accepted</dt><dd>${formatTime(Number(m.created_at))}</dd>
<dt>Template</dt><dd>${m.template ?? '(none)'}</dd>
<dt>From</dt><dd>${content.from ?? ''}</dd>
<dt>Subject</dt><dd class="subject">${content.subject ?? '(no subject)'}</dd>
</dl>
<p><a class="button" href="/messages/${id}/source" download>Download the MIME source</a></p>
<h2>Headers</h2>
${Object.keys(content.headers).length === 0 ? html`<p>No extra headers.</p>` : html`<table class="headers"><tbody>${Object.entries(content.headers).map(([k, v]) => html`<tr><th scope="row">${k}</th><td>${v}</td></tr>`)}</tbody></table>`}
<h2>Recipients</h2>
${view.recipients.map(timelineOf)}
${view.truncated ? html`<p>Only the first ${view.recipients.length} recipients are shown.</p>` : ''}
<h2>Content${content.renderedFor ? html` <small>as sent to ${content.renderedFor}</small>` : ''}</h2>
${content.html !== null
    ? html`<h3>HTML part</h3>
<p>${images ? html`Remote images are shown. <a href="/messages/${id}">Block them</a>` : html`Remote images are blocked. <a href="/messages/${id}?images=1">Show remote images</a>`}</p>
<iframe class="message-html" title="HTML part of the message" sandbox src="/messages/${id}/html${images ? '?images=1' : ''}"></iframe>`
    : ''}
${content.text !== null ? html`<h3>Text part</h3><pre class="text-part">${content.text}</pre>` : ''}
<h3>Attachments</h3>
${content.attachments.length === 0 ? html`<p>None.</p>` : html`<ul class="attachments">${content.attachments.map((a) => html`<li><span class="filename">${showBidiControls(a.filename)}</span> <small>${a.contentType}, ${a.sizeBytes} bytes</small></li>`)}</ul>`}
<h2>Webhook deliveries</h2>
${view.webhookDeliveries.length === 0
    ? html`<p>None.</p>`
    : html`<table><thead><tr><th scope="col">Event</th><th scope="col">Recipient</th><th scope="col">URL</th><th scope="col">State</th><th scope="col">Attempts</th><th scope="col">Last answer</th></tr></thead><tbody>${view.webhookDeliveries.map(
        (d) => html`<tr><td>${d.eventType ?? ''}</td><td>${d.recipient ?? ''}</td><td class="url">${d.url}</td><td><span class="badge ${d.state}">${d.state}</span></td><td>${d.attempts}</td><td>${d.lastStatusCode ?? ''} ${d.lastError ?? ''}</td></tr>`,
      )}</tbody></table>`}`;
}

export function installMessagePages(app: FastifyInstance, { services }: DashboardRoutes): void {
  app.get('/messages', async (request, reply) => {
    const viewer = viewerOf(request);
    const q = queryOf(request);
    const { projects, project } = await pickProject(services, viewer, q.project);
    const result = await searchMessages(services, project, readFilters(q));
    const params: Record<string, string> = { project: project.uid };
    for (const f of FILTER_FIELDS) if (q[f]) params[f] = q[f];
    const live = !q.cursor ? html` data-live="/messages/rows${queryString(params)}"` : '';
    const body = html`${searchForm(project, projects, q)}
${sandboxNote(viewer, project)}
<table class="messages"><caption class="visually-hidden">Messages, newest first</caption>
<thead><tr><th scope="col">Accepted</th><th scope="col">Subject and UID</th><th scope="col">Recipient</th><th scope="col">Template</th><th scope="col">Status</th></tr></thead>
<tbody${live}>${messageRows(result.items)}</tbody></table>
<nav class="pager" aria-label="Pages">${q.cursor ? html`<a href="/messages${queryString(params)}">Newest</a> ` : ''}${result.next ? html`<a href="/messages${queryString({ ...params, cursor: result.next })}" rel="next">Older</a>` : ''}</nav>`;
    return sendPage(reply, page('Messages', { viewer, section: 'messages' }, body));
  });

  // The first page's rows alone, for the live update of the list.
  app.get('/messages/rows', async (request, reply) => {
    const viewer = viewerOf(request);
    const q = queryOf(request);
    const { project } = await pickProject(services, viewer, q.project);
    const result = await searchMessages(services, project, readFilters({ ...q, cursor: '' }));
    return reply.header('content-type', 'text/html; charset=utf-8').header('cache-control', 'no-store').send(messageRows(result.items).value);
  });

  const messageId = (request: { params: unknown }) => (request.params as { id: string }).id;

  app.get('/messages/:id', async (request, reply) => {
    const viewer = viewerOf(request);
    const { message, project } = await findViewerMessage(services, viewer, messageId(request));
    const [view, content] = await Promise.all([getMessageView(services, message, project), getMessageContent(services, message)]);
    const images = queryOf(request).images === '1';
    return sendPage(reply, page(`Message ${message.uid}`, { viewer, section: 'messages' }, messagePage(viewer, view, content, images)));
  });

  app.get('/messages/:id/html', async (request, reply) => {
    const viewer = viewerOf(request);
    const { message } = await findViewerMessage(services, viewer, messageId(request));
    const content = await getMessageContent(services, message);
    return reply
      .header('content-security-policy', framePolicy(queryOf(request).images === '1'))
      .header('x-frame-options', 'SAMEORIGIN')
      .header('content-type', 'text/html; charset=utf-8')
      .header('cache-control', 'no-store')
      .send(content.html ?? '');
  });

  app.get('/messages/:id/source', async (request, reply) => {
    const viewer = viewerOf(request);
    const { message } = await findViewerMessage(services, viewer, messageId(request));
    const { mime } = await getMessageSource(services, message, queryOf(request).recipient || undefined);
    return reply
      .header('content-type', 'message/rfc822')
      .header('content-disposition', `attachment; filename="message-${Number(message.id)}.eml"`)
      .header('cache-control', 'no-store')
      .send(mime);
  });
}

export { framePolicy };

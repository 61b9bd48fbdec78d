// Messages: the search (keyset-paged, polled for new rows by assets/app.js while on the first
// page), one message (the page send_message's data.message.url names) with its copies and webhook
// deliveries a page at a time (keyset) and a recipient filter, its HTML part in a sandboxed frame
// with its own policy (no scripts; remote images only when asked), its MIME source as a download,
// and a form that cancels the copies still waiting (cancel_message's operation) after a confirmation
// page. Everything of a message is attacker-controlled and escaped. A message accepted in sandbox
// mode says so, in the list and on its page, whatever the project's setting now; a sandbox project
// says so above its list (docs/sandbox.md).
import type { FastifyInstance } from 'fastify';
import { ApiError } from '../../domain/errors.ts';
import { parseMailbox, splitAddressList } from '../../domain/recipients.ts';
import { parseApiDate } from '../../domain/time.ts';
import { cancelMessage } from '../../operations/cancel-message.ts';
import { retryCopyNow } from '../../operations/retry-now.ts';
import { TRANSMISSION_STATUSES } from '../../operations/reports/message-report.ts';
import {
  findViewerMessage,
  getMessageContent,
  getMessageSource,
  getMessageView,
  searchMessages,
  type MessageContent,
  type MessageFilters,
  type MessageListItem,
  type MessageView,
  type RecipientTimeline,
} from '../../operations/message-views.ts';
import type { Project } from '../../operations/context.ts';

import { formatTime, html, queryString, showBidiControls, type SafeHtml } from '../html.ts';
import { csrfField, page, projectLabel } from '../layout.ts';
import { formOf, queryOf, redirectWithNotice, sendPage, viewerOf, type DashboardRoutes, type Notice, type PageViewer } from '../requests.ts';
import { confirmationPage, messageSandboxBadge, messageSandboxNote, pickProject, sandboxNote } from './common.ts';

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

function timeOf(ms: number): SafeHtml {
  return html`<time datetime="${new Date(ms).toISOString()}">${formatTime(ms)}</time>`;
}

function messageRows(items: readonly MessageListItem[]): SafeHtml {
  if (items.length === 0) return html`<tr><td colspan="5" class="empty">No messages match.</td></tr>`;
  return html`${items.map(
    ({ message: m, statuses, firstRecipient, scheduledFor, sandbox }) => html`<tr data-key="${Number(m.id)}">
<td><time datetime="${new Date(Number(m.created_at)).toISOString()}">${formatTime(Number(m.created_at))}</time></td>
<td><a href="/messages/${Number(m.id)}">${m.subject || '(no subject)'}</a>${messageSandboxBadge(sandbox)}<br><small class="uid">${m.uid}</small></td>
<td>${firstRecipient ?? ''}${m.recipient_count > 1 ? html` <small>+${m.recipient_count - 1}</small>` : ''}</td>
<td>${m.template ?? ''}</td>
<td>${statusBadges(statuses)}${scheduledFor !== null ? html`<br><small class="scheduled">scheduled for ${timeOf(scheduledFor)}</small>` : ''}</td>
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
${field('from', 'From day (UTC)', 'date')}${field('until', 'Until day (UTC)', 'date')}
<div class="field actions"><button type="submit">Search</button> <a href="/messages?project=${encodeURIComponent(project.uid)}">Clear</a></div>
</form>`;
}

/**
 * An address header's mailboxes (From), each display name and address isolated on its own: a
 * RIGHT-TO-LEFT OVERRIDE in a name reorders the name only, never the address beside it, as on the
 * recipient cards (docs/dashboard.md, "Hostile text"). A value that is not a list of mailboxes (a
 * submitted message's own From) shows its bidirectional controls as code points instead.
 */
function mailboxes(value: string | null): SafeHtml | string {
  if (!value) return '';
  const parsed = splitAddressList(value).map(parseMailbox);
  if (parsed.length === 0 || parsed.some((p) => !p.ok)) return html`${showBidiControls(value)}`;
  return html`${parsed.map((p, i) => (p.ok ? html`${i > 0 ? html`, ` : ''}${p.mailbox.name ? html`${p.mailbox.name} &lt;${p.mailbox.address}&gt;` : p.mailbox.address}` : ''))}`;
}

function timelineOf(r: RecipientTimeline, viewer: PageViewer): SafeHtml {
  const t = r.transmission;
  return html`<section class="card recipient" aria-label="Recipient ${t.recipient}">
<h3>${t.recipient_name ? html`${t.recipient_name} ` : ''}&lt;${t.recipient}&gt; <span class="badge ${t.status}">${t.status}</span></h3>
${t.subject !== null ? html`<p class="subject">Subject as sent to this recipient: ${t.subject}</p>` : ''}
${r.deliveredTo !== t.recipient ? html`<p class="delivered-to">Delivery address: <strong>${r.deliveredTo}</strong> (the message's recipient override), not ${t.recipient}</p>` : ''}
<ol class="timeline">${r.entries.map((e) => {
    const when = timeOf(e.at);
    if (e.kind === 'attempt' && e.attempt) {
      const a = e.attempt;
      return html`<li class="attempt ${a.outcome}">${when} <strong>attempt: ${a.outcome}</strong>
<dl class="inline"><dt>MX host</dt><dd>${a.mx_host ?? '(none reached)'}</dd><dt>TLS</dt><dd>${a.tls == null ? 'not recorded' : a.tls ? 'yes' : 'no'}</dd><dt>Reply</dt><dd><code>${a.result_code ?? ''}</code> ${a.result_message ?? ''}</dd><dt>Duration</dt><dd>${Number(a.duration_ms)} ms</dd></dl></li>`;
    }
    if (e.kind === 'due') return html`<li class="due">${when} <strong>due</strong> <span>${t.attempts > 0 ? 'the next attempt' : e.at > Number(t.created_at) ? 'send_at: not sent before then' : 'the first attempt'}</span></li>`;
    return html`<li class="${e.kind}">${when} <strong>${e.kind}</strong>${e.text ? html` <span>${e.text}</span>` : ''}</li>`;
  })}</ol>
<p><a href="/messages/${Number(t.message_id)}/source?recipient=${encodeURIComponent(t.recipient)}" download>MIME source as composed for ${t.recipient}</a></p>
${t.status === 'retry' && t.locked_by === null ? html`<form method="post" action="/messages/${Number(t.message_id)}/retry" class="retry-now">${csrfField(viewer)}<input type="hidden" name="copy" value="${Number(t.id)}"><button type="submit" aria-label="Retry now: ${t.recipient}">Retry now</button></form>` : ''}
${r.suppression ? html`<p class="notice error">Suppressed: ${r.suppression.status} (${r.suppression.suppression_state})${r.suppression.message ? html` — ${r.suppression.message}` : ''}</p>` : ''}
</section>`;
}

/** The message page's own query: the recipient filter and the two pages (docs/dashboard.md, "One message"). */
const VIEW_FIELDS = ['recipient', 'cursor', 'hooks', 'images'] as const;

function viewParams(q: Record<string, string>): Record<string, string> {
  const params: Record<string, string> = {};
  for (const f of VIEW_FIELDS) if (q[f]) params[f] = q[f];
  return params;
}

function recipientsSection(view: MessageView, q: Record<string, string>, id: number, viewer: PageViewer): SafeHtml {
  const params = viewParams(q);
  const link = (changes: Record<string, string>, anchor: string) => `/messages/${id}${queryString({ ...params, ...changes })}#${anchor}`;
  return html`<h2 id="recipients">Recipients <small>(${view.message.recipient_count})</small></h2>
${view.message.recipient_count > 1 || view.recipientFilter !== null
    ? html`<form method="get" action="/messages/${id}#recipients" class="filters one-field" role="search">
<div class="field"><label for="f-recipient">Recipient: an address or its beginning</label><input id="f-recipient" name="recipient" type="search" value="${view.recipientFilter ?? ''}"></div>
<div class="field actions"><button type="submit">Find</button>${view.recipientFilter !== null ? html` <a href="/messages/${id}#recipients">Every recipient</a>` : ''}</div>
</form>`
    : ''}
${view.recipients.length === 0 ? html`<p class="empty">${view.recipientFilter !== null ? html`No recipient of this message starts with “${view.recipientFilter}”${q.cursor ? ' after the previous page' : ''}.` : 'No recipient on this page.'}</p>` : view.recipients.map((r) => timelineOf(r, viewer))}
<nav class="pager" aria-label="Pages of recipients">${q.cursor ? html`<a href="${link({ cursor: '' }, 'recipients')}">First recipients</a> ` : ''}${view.nextRecipients ? html`<a href="${link({ cursor: view.nextRecipients }, 'recipients')}" rel="next">Next recipients</a>` : ''}</nav>`;
}

function webhooksSection(view: MessageView, q: Record<string, string>, id: number): SafeHtml {
  const params = viewParams(q);
  const link = (hooks: string) => `/messages/${id}${queryString({ ...params, hooks })}#webhook-deliveries`;
  const filter = view.recipientFilter;
  // The recipient filter of the page (docs/dashboard.md, "One message"): the same field as the
  // recipients' own, so both sections show the same recipients.
  const form =
    view.message.recipient_count > 1 || filter !== null
      ? html`<form method="get" action="/messages/${id}#webhook-deliveries" class="filters one-field" role="search">
<div class="field"><label for="f-hooks-recipient">Recipient: an address or its beginning</label><input id="f-hooks-recipient" name="recipient" type="search" value="${filter ?? ''}"></div>
<div class="field actions"><button type="submit">Find</button>${filter !== null ? html` <a href="/messages/${id}#webhook-deliveries">Every recipient</a>` : ''}</div>
</form>`
      : '';
  const none = filter !== null ? html`No webhook delivery about a recipient starting with “${filter}”${q.hooks ? ' after the previous page' : ''}.` : html`None${q.hooks ? ' after the previous page' : ''}.`;
  return html`<h2 id="webhook-deliveries">Webhook deliveries${filter !== null ? html` <small>about recipients starting with “${filter}”</small>` : ''}</h2>
${form}
${view.webhookDeliveries.length === 0
    ? html`<p class="empty">${none}</p>`
    : html`<table><thead><tr><th scope="col">Event</th><th scope="col">Recipient</th><th scope="col">URL</th><th scope="col">State</th><th scope="col">Attempts</th><th scope="col">Last answer</th></tr></thead><tbody>${view.webhookDeliveries.map(
        (d) => html`<tr><td>${d.eventType ?? ''}</td><td>${d.recipient ?? ''}</td><td class="url">${d.url}${d.urlReduced ? html` <small>(an account-wide endpoint: its path and query are not shown)</small>` : ''}</td><td><span class="badge ${d.state}">${d.state}</span></td><td>${d.attempts}</td><td>${d.lastStatusCode ?? ''} ${d.lastError ?? ''}</td></tr>`,
      )}</tbody></table>`}
<nav class="pager" aria-label="Pages of webhook deliveries">${q.hooks ? html`<a href="${link('')}">First deliveries</a> ` : ''}${view.nextWebhookDeliveries ? html`<a href="${link(view.nextWebhookDeliveries)}" rel="next">Next deliveries</a>` : ''}</nav>`;
}

/** Copies cancel_message would stop now (held ones are reported, not stopped). */
function waitingCopies(view: MessageView): number {
  return (view.statuses.queued ?? 0) + (view.statuses.retry ?? 0);
}

function messagePage(viewer: PageViewer, view: MessageView, content: MessageContent, q: Record<string, string>): SafeHtml {
  const m = view.message;
  const id = Number(m.id);
  const images = q.images === '1';
  const waiting = waitingCopies(view);
  return html`${messageSandboxNote(viewer, view.project, view.sandbox)}<dl class="summary">
<dt>Project</dt><dd><a href="/projects/${encodeURIComponent(view.project.uid)}">${view.project.name}</a>${messageSandboxBadge(view.sandbox)}</dd>
<dt>UID</dt><dd><code>${m.uid}</code> <button type="button" class="copy" data-copy="${m.uid}">Copy</button></dd>
<dt>Message-ID</dt><dd><code>${content.messageId}</code></dd>
<dt>Accepted</dt><dd>${formatTime(Number(m.created_at))}</dd>
${view.sendAt !== null ? html`<dt>Scheduled for</dt><dd class="scheduled">${timeOf(view.sendAt)} <small>(send_at: no copy is sent before then)</small></dd>` : ''}
${view.recipientOverride !== null ? html`<dt>Recipient override</dt><dd>every copy is sent to <strong>${view.recipientOverride}</strong> instead of its recipient</dd>` : ''}
<dt>Template</dt><dd>${m.template ?? '(none)'}</dd>
<dt>From</dt><dd class="from">${mailboxes(content.from)}</dd>
<dt>Subject</dt><dd class="subject">${content.subject ?? '(no subject)'}</dd>
<dt>Copies</dt><dd>${statusBadges(view.statuses)}</dd>
</dl>
${waiting > 0
    ? html`<p class="cancel"><a class="button danger" href="/messages/${id}/cancel">Cancel the ${waiting === 1 ? html`copy` : html`${waiting} copies`} not sent yet…</a></p>`
    : ''}
<p><a class="button" href="/messages/${id}/source" download>Download the MIME source</a></p>
<h2>Headers</h2>
${Object.keys(content.headers).length === 0 ? html`<p>No extra headers.</p>` : html`<dl class="headers">${Object.entries(content.headers).map(([k, v]) => html`<dt>${k}</dt><dd>${v}</dd>`)}</dl>`}
${recipientsSection(view, q, id, viewer)}
<h2>Content${content.renderedFor ? html` <small>as sent to ${content.renderedFor}${content.deliveredTo !== content.renderedFor ? html` (delivered to ${content.deliveredTo})` : ''}</small>` : ''}</h2>
${content.html !== null
    ? html`<h3>HTML part</h3>
<p>${images ? html`Remote images are shown. <a href="/messages/${id}">Block them</a>` : html`Remote images are blocked. <a href="/messages/${id}?images=1">Show remote images</a>`}</p>
<iframe class="message-html" title="HTML part of the message" sandbox src="/messages/${id}/html${images ? '?images=1' : ''}"></iframe>`
    : ''}
${content.text !== null ? html`<h3>Text part</h3><pre class="text-part">${content.text}</pre>` : ''}
<h3>Attachments</h3>
${content.attachments.length === 0 ? html`<p>None.</p>` : html`<ul class="attachments">${content.attachments.map((a) => html`<li><span class="filename">${showBidiControls(a.filename)}</span> <small>${a.contentType}, ${a.sizeBytes} bytes</small></li>`)}</ul>`}
${webhooksSection(view, q, id)}`;
}

/** What a cancel did, in the words of cancel_message's answer (docs/api/cancel-message.md). */
function cancelNotice(cancelled: number, inFlight: number): Notice {
  const copies = (n: number) => (n === 1 ? '1 copy' : `${n} copies`);
  const held = inFlight > 0 ? ` ${copies(inFlight)} being delivered right now could not be stopped.` : '';
  if (cancelled === 0) return { kind: 'error', text: `Nothing was cancelled: no copy was waiting.${held}` };
  return { kind: 'ok', text: `Cancelled ${copies(cancelled)}: they end as failed (CANCELLED) and are not sent.${held}` };
}

export function installMessagePages(app: FastifyInstance, routes: DashboardRoutes): void {
  const { services } = routes;
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
    const q = queryOf(request);
    const [view, content] = await Promise.all([
      getMessageView(services, message, project, { recipient: q.recipient, cursor: q.cursor, webhooksCursor: q.hooks, viewer }),
      getMessageContent(services, message),
    ]);
    return sendPage(reply, page(`Message ${message.uid}`, { viewer, section: 'messages' }, messagePage(viewer, view, content, q)));
  });

  // Cancelling asks first (docs/dashboard.md, "Confirmations"): this page changes nothing; its form
  // (a POST) cancels.
  app.get('/messages/:id/cancel', async (request, reply) => {
    const viewer = viewerOf(request);
    const { message, project } = await findViewerMessage(services, viewer, messageId(request));
    const view = await getMessageView(services, message, project, {});
    const waiting = waitingCopies(view);
    const location = `/messages/${Number(message.id)}`;
    if (waiting === 0) {
      return sendPage(reply, page('Cancel a message', { viewer, section: 'messages' }, html`<section class="card"><p>No copy of the message <code>${message.uid}</code> waits to be sent: there is nothing to cancel.</p><p><a href="${location}">Back to the message</a></p></section>`));
    }
    const copies = waiting === 1 ? 'copy' : `${waiting} copies`;
    return sendPage(reply, confirmationPage(viewer, {
      title: 'Cancel a message',
      section: 'messages',
      what: html`<p>Cancel the ${copies} of the message <code>${message.uid}</code> (${message.subject || '(no subject)'}) not sent yet${view.sendAt !== null ? html`, scheduled for ${timeOf(view.sendAt)}` : ''}?
${waiting === 1 ? 'It ends' : 'They end'} as failed (CANCELLED) and ${waiting === 1 ? 'is' : 'are'} never sent; a copy being delivered at this instant cannot be stopped. This cannot be undone: to send the message, send it again.</p>`,
      action: `${location}/cancel`,
      button: waiting === 1 ? 'Cancel the copy' : `Cancel the ${waiting} copies`,
      back: location,
      returnPath: location,
    }));
  });

  // The same operation as the API's cancel_message: every waiting copy of the message.
  app.post('/messages/:id/cancel', async (request, reply) => {
    const viewer = viewerOf(request);
    const { message, project } = await findViewerMessage(services, viewer, messageId(request));
    const location = `/messages/${Number(message.id)}`;
    try {
      const result = await cancelMessage(services, { keyKind: 'project', account: viewer.account, project }, { id: Number(message.id) });
      const inFlight = Object.values(result.notCancelled).filter((why) => why === 'in_flight').length;
      return redirectWithNotice(reply, routes, location, cancelNotice(result.cancelled.length, inFlight));
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
      return redirectWithNotice(reply, routes, location, { kind: 'error', text: error.message });
    }
  });

  // A copy waiting to retry made due now (operations/retry-now.ts); the delivery workers send it.
  app.post('/messages/:id/retry', async (request, reply) => {
    const viewer = viewerOf(request);
    const { message, project } = await findViewerMessage(services, viewer, messageId(request));
    const location = `/messages/${Number(message.id)}`;
    const copy = formOf(request).copy ?? '';
    try {
      if (!/^\d{1,15}$/.test(copy)) throw new ApiError('call_error', 'No copy was named to retry.');
      const { recipient } = await retryCopyNow(services, project, { messageId: Number(message.id), transmissionId: Number(copy) });
      return redirectWithNotice(reply, routes, location, { kind: 'ok', text: `The copy to ${recipient} is due now: a delivery worker sends it next.` });
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
      return redirectWithNotice(reply, routes, location, { kind: 'error', text: error.message });
    }
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

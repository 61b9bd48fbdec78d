// The overview: per project, charts of sent / delivered / deferred / failed / bounced / opened /
// clicked over the last 24 hours, 7 days or 30 days (uPlot, drawn by assets/charts.js from the
// data-* attributes), and the queue now. A sandbox project says so above its counts (which hold the
// copies of every message, each delivered in the mode it was accepted with); when the
// project tracks opens and clicks that readers cannot reach (--public-url on this machine alone),
// the card says what to set.
import type { FastifyInstance } from 'fastify';
import { getProjectOverview, OVERVIEW_RANGES, OVERVIEW_SERIES, type OverviewRange, type ProjectOverview } from '../../operations/dashboard-overview.ts';
import { unreachableTrackingProblem } from '../../operations/tracking.ts';
import { ApiError } from '../../domain/errors.ts';
import { listViewerProjects, requireViewerProject, type Viewer } from '../../operations/users.ts';
import type { Project } from '../../operations/context.ts';
import { formatTime, html, type SafeHtml } from '../html.ts';
import { notice, page } from '../layout.ts';
import { queryOf, sendPage, viewerOf, type DashboardRoutes } from '../requests.ts';
import { sandboxBadge, sandboxNote } from './common.ts';

/** Projects charted on one overview page. */
const MAX_PROJECTS_SHOWN = 20;

function readRange(text: string | undefined): OverviewRange {
  return text !== undefined && Object.hasOwn(OVERVIEW_RANGES, text) ? (text as OverviewRange) : '24h';
}

function rangeLinks(base: string, current: OverviewRange): SafeHtml {
  return html`<nav class="ranges" aria-label="Time range">${(Object.keys(OVERVIEW_RANGES) as OverviewRange[]).map(
    (r) => html`<a href="${base}?range=${r}"${r === current ? html` aria-current="true"` : ''}>${r === '24h' ? 'Last 24 hours' : r === '7d' ? 'Last 7 days' : 'Last 30 days'}</a>`,
  )}</nav>`;
}

function projectSection(viewer: Viewer, project: Project, o: ProjectOverview, trackingProblem: string | null): SafeHtml {
  const data = JSON.stringify({ buckets: o.buckets, series: o.series });
  return html`<section class="card project-overview" aria-labelledby="p-${project.id}">
<h2 id="p-${project.id}"><a href="/projects/${encodeURIComponent(project.uid)}">${project.name}</a>${sandboxBadge(project)}</h2>
${sandboxNote(viewer, project)}
${trackingProblem ? notice('warn', `Tracking: ${trackingProblem}.`) : ''}
<div class="chart" data-chart="${data}" role="img" aria-label="Copies per ${o.range === '24h' ? 'hour' : o.range === '7d' ? 'six hours' : 'day'}: ${OVERVIEW_SERIES.map((s) => `${s} ${o.totals[s]}`).join(', ')}"></div>
<table class="totals"><caption class="visually-hidden">Totals</caption><thead><tr>${OVERVIEW_SERIES.map((s) => html`<th scope="col">${s}</th>`)}</tr></thead>
<tbody><tr>${OVERVIEW_SERIES.map((s) => html`<td>${o.totals[s]}</td>`)}</tr></tbody></table>
<p class="hint">Hours and days in UTC. Delivered counts, as get_metrics does, copies the receiving server accepted and also copies sent with deliver: false (NOT_SENT) and test sends to null.postageapp.com, which complete without leaving this machine.</p>
<p class="queue">Queue now: <strong>${o.queue.queued}</strong> queued, <strong>${o.queue.retrying}</strong> retrying${
    o.queue.oldestDueAt !== null ? html`, oldest due <time datetime="${new Date(o.queue.oldestDueAt).toISOString()}">${formatTime(o.queue.oldestDueAt)}</time>` : ''
  }${
    o.queue.nextScheduledAt !== null ? html`, next scheduled <time datetime="${new Date(o.queue.nextScheduledAt).toISOString()}">${formatTime(o.queue.nextScheduledAt)}</time>` : ''
  }.
<a href="/messages?project=${encodeURIComponent(project.uid)}">Messages</a> · <a href="/templates?project=${encodeURIComponent(project.uid)}">Templates</a> · <a href="/projects/${encodeURIComponent(project.uid)}/keys">Key</a>${viewer.scopeProject ? '' : html` · <a href="/projects/${encodeURIComponent(project.uid)}/settings">Settings</a>`}</p>
</section>`;
}

export function installOverviewPages(app: FastifyInstance, { services }: DashboardRoutes): void {
  app.get('/', async (request, reply) => {
    const viewer = viewerOf(request);
    const range = readRange(queryOf(request).range);
    const projects = (await listViewerProjects(services, viewer)).slice(0, MAX_PROJECTS_SHOWN);
    const overviews = await Promise.all(projects.map((p) => getProjectOverview(services, p, range)));
    const problems = await Promise.all(projects.map((p) => unreachableTrackingProblem(services, p)));
    const body = html`${rangeLinks('/', range)}
${projects.length === 0 ? html`<p>No project yet.</p>` : projects.map((p, i) => projectSection(viewer, p, overviews[i], problems[i]))}`;
    return sendPage(reply, page('Overview', { viewer, section: 'overview', scripts: ['uplot.js', 'charts.js'] }, body));
  });

  // The account's page (get_account_info's url): the overview of its projects, for a user of that account.
  app.get('/accounts/:uid', async (request, reply) => {
    const viewer = viewerOf(request);
    if ((request.params as { uid: string }).uid !== viewer.account.uid) throw new ApiError('not_found', 'No such account.');
    return reply.redirect('/', 303);
  });

  app.get('/projects/:uid', async (request, reply) => {
    const viewer = viewerOf(request);
    const project = await requireViewerProject(services, viewer, (request.params as { uid: string }).uid);
    const range = readRange(queryOf(request).range);
    const overview = await getProjectOverview(services, project, range);
    const body = html`${rangeLinks(`/projects/${encodeURIComponent(project.uid)}`, range)}${projectSection(viewer, project, overview, await unreachableTrackingProblem(services, project))}`;
    return sendPage(reply, page(project.name, { viewer, section: 'overview', scripts: ['uplot.js', 'charts.js'] }, body));
  });
}

// A project's settings: name, sandbox, open and click tracking, default From and retention, saved
// through the operation of the API's update_project (the same checks; each refusal shown beside the
// field it names). Account users only, as update_project takes the account key.
import type { FastifyInstance } from 'fastify';
import { ApiError } from '../../domain/errors.ts';
import type { Project } from '../../operations/context.ts';
import { defaultFromOf, readProjectSettings, readProjectSettingsText, updateProject } from '../../operations/projects.ts';
import { requireViewerProject } from '../../operations/users.ts';
import { html, type SafeHtml } from '../html.ts';
import { csrfField, notice, page } from '../layout.ts';
import { formOf, redirectWithNotice, sendPage, viewerOf, type DashboardRoutes, type PageViewer } from '../requests.ts';
import { requireAccountUser, sandboxBadge } from './common.ts';

const FIELDS = ['name', 'sandbox', 'tracking', 'default_from', 'retention_days'] as const;
type Field = (typeof FIELDS)[number];

/** The form's values of a stored project. */
function valuesOf(project: Project): Record<Field, string> {
  const s = readProjectSettings(project);
  return {
    name: project.name,
    sandbox: s.sandbox ? 'on' : '',
    tracking: s.tracking ? 'on' : '',
    default_from: s.default_from ?? '',
    retention_days: s.retention_days === undefined ? '' : String(s.retention_days),
  };
}

/** The changes the form asks for, and every field's refusal at once (operations/projects.ts). */
function changesOf(form: Record<string, string>) {
  // A checkbox left unticked is not posted: off.
  return readProjectSettingsText({ name: form.name ?? '', sandbox: form.sandbox === 'on', tracking: form.tracking === 'on', default_from: form.default_from ?? '', retention_days: form.retention_days ?? '' });
}

/** Which field an operation's error names ('argument "settings.default_from" ...', 'setting "default_from" ...'). */
function fieldOfError(message: string): Field | null {
  const m = /"(?:settings\.)?(name|sandbox|tracking|default_from|retention_days)"/.exec(message);
  return m ? (m[1] as Field) : null;
}

function settingsForm(viewer: PageViewer, project: Project, values: Record<string, string>, errors: Partial<Record<Field | 'form', string>>, server: { retentionDays: number; defaultFrom: string }): SafeHtml {
  const err = (f: Field) => html`<p class="field-error" id="err-${f}" role="status">${errors[f] ?? ''}</p>`;
  const hint = (f: Field, text: SafeHtml) => html`<p class="hint" id="hint-${f}">${text}</p>`;
  const describedBy = (f: Field) => html` aria-describedby="err-${f} hint-${f}"${errors[f] ? html` aria-invalid="true"` : ''}`;
  const check = (f: 'sandbox' | 'tracking', label: string, text: SafeHtml) =>
    html`<div class="field"><label class="check"><input type="checkbox" id="s-${f}" name="${f}" value="on"${values[f] === 'on' ? html` checked` : ''}${describedBy(f)}> ${label}</label>${err(f)}${hint(f, text)}</div>`;
  return html`<form method="post" action="/projects/${encodeURIComponent(project.uid)}/settings" class="card" novalidate>${csrfField(viewer)}
<div class="field"><label for="s-name">Name</label><input id="s-name" name="name" value="${values.name ?? ''}" maxlength="200"${describedBy('name')}>${err('name')}${hint('name', html``)}</div>
${check('sandbox', 'Sandbox', html`Nothing leaves this machine: every copy is answered by the sandbox and its simulator addresses (docs/sandbox.md). Turn it off to send real mail.`)}
${check('tracking', 'Open and click tracking', html`Adds a tracking pixel and tracked links to the HTML part of every message (docs/tracking.md).`)}
<div class="field"><label for="s-default_from">Default From</label><input id="s-default_from" name="default_from" value="${values.default_from ?? ''}" placeholder="${server.defaultFrom}"${describedBy('default_from')}>${err('default_from')}${hint('default_from', html`Used when a message and its template name no From; empty: ${server.defaultFrom} (the host name of --mailer-host).`)}</div>
<div class="field"><label for="s-retention_days">Keep messages (days)</label><input id="s-retention_days" name="retention_days" inputmode="numeric" value="${values.retention_days ?? ''}" placeholder="${server.retentionDays}"${describedBy('retention_days')}>${err('retention_days')}${hint('retention_days', html`0 keeps them forever; empty: the server's default (${server.retentionDays} days).`)}</div>
${errors.form ? notice('error', errors.form) : ''}
<button type="submit">Save settings</button></form>`;
}

export function installProjectSettingsPages(app: FastifyInstance, routes: DashboardRoutes): void {
  const { services } = routes;
  const projectOf = async (viewer: PageViewer, params: unknown) => {
    requireAccountUser(viewer);
    return requireViewerProject(services, viewer, (params as { uid: string }).uid);
  };
  // What an empty field means: the server's own (docs/configuration.md).
  const serverDefaults = { retentionDays: services.config.retentionDays, defaultFrom: defaultFromOf(services, { settings: '{}' }) };
  const render = (viewer: PageViewer, project: Project, body: SafeHtml) =>
    page(`Settings of ${project.name}`, { viewer, section: 'overview' }, html`<p><a href="/projects/${encodeURIComponent(project.uid)}">${project.name}</a>${sandboxBadge(project)}</p>${body}`);

  app.get('/projects/:uid/settings', async (request, reply) => {
    const viewer = viewerOf(request);
    const project = await projectOf(viewer, request.params);
    return sendPage(reply, render(viewer, project, settingsForm(viewer, project, valuesOf(project), {}, serverDefaults)));
  });

  app.post('/projects/:uid/settings', async (request, reply) => {
    const viewer = viewerOf(request);
    const project = await projectOf(viewer, request.params);
    const form = formOf(request);
    const values = { ...form, sandbox: form.sandbox === 'on' ? 'on' : '', tracking: form.tracking === 'on' ? 'on' : '' };
    const { changes, errors } = changesOf(form);
    if (Object.keys(errors).length > 0) return sendPage(reply, render(viewer, project, settingsForm(viewer, project, values, errors, serverDefaults)), 406);
    try {
      const { project: saved } = await updateProject(services, viewer.account, project.uid, changes);
      const mode = readProjectSettings(saved).sandbox ? 'in sandbox mode: nothing it sends leaves this machine' : 'live: it sends real mail';
      return redirectWithNotice(reply, routes, `/projects/${encodeURIComponent(saved.uid)}/settings`, { kind: 'ok', text: `Settings of ${saved.name} saved. The project is ${mode}.` });
    } catch (error) {
      if (!(error instanceof ApiError) || error.status === 'not_found') throw error;
      const field = fieldOfError(error.message) ?? 'form';
      return sendPage(reply, render(viewer, project, settingsForm(viewer, project, values, { [field]: error.message }, serverDefaults)), error.httpCode);
    }
  });
}

// Templates and layouts: list, create, edit with a live preview, delete (after a confirmation page,
// docs/dashboard.md, "Confirmations"). The preview renders the
// edited (unsaved) fields with sample variables through the real merge and variable code
// (operations/template-preview.ts): assets/preview.js posts the form into the sandboxed preview
// frame (its HTML part styled as sent, nothing run) and fetches the field errors as JSON.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ApiError } from '../../domain/errors.ts';
import type { Caller } from '../../operations/context.ts';
import { previewTemplate } from '../../operations/template-preview.ts';
import { createTemplate, deleteTemplate, getTemplate, listTemplates, updateTemplate, type TemplateInput } from '../../operations/templates.ts';
import type { Viewer } from '../../operations/users.ts';
import type { Project, Template } from '../../operations/context.ts';
import { html, type SafeHtml } from '../html.ts';
import { csrfField, notice, page, projectPicker } from '../layout.ts';
import { formOf, queryOf, redirectWithNotice, sendPage, viewerOf, type DashboardRoutes, type PageViewer } from '../requests.ts';
import { framePolicy } from './messages.ts';
import { confirmationPage, pickProject } from './common.ts';

const FIELDS = ['name', 'subject', 'from', 'parent', 'text', 'html', 'css'] as const;

function callerFor(viewer: Viewer, project: Project): Caller {
  return { keyKind: 'project', account: viewer.account, project };
}

function inputOf(form: Record<string, string>): TemplateInput {
  const input: TemplateInput = {};
  for (const f of FIELDS) input[f] = (form[f] ?? '').replace(/\r\n/g, '\n');
  return input;
}

/** The preview's sample variables: a JSON object, or the error shown beside the field. */
function sampleVariables(text: string | undefined): { variables: Record<string, unknown>; error: string | null } {
  if (!text || text.trim() === '') return { variables: {}, error: null };
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    return { variables: {}, error: `The sample variables are not a JSON object: ${(error as Error).message}.` };
  }
  if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) return { variables: parsed as Record<string, unknown>, error: null };
  return { variables: {}, error: 'The sample variables are not a JSON object: write them as {"name": "value"}.' };
}

/** Which field an operation's error is about, when it names one ("argument "subject" ..."). */
function fieldOfError(message: string): string | null {
  const m = /"(slug|name|subject|from|text|html|css|parent)"/.exec(message) ?? /\b(parent|layout)\b/i.exec(message);
  if (!m) return null;
  return m[1].toLowerCase() === 'layout' ? 'parent' : m[1].toLowerCase();
}

function editor(viewer: PageViewer, project: Project, slug: string | null, values: Record<string, string>, errors: Record<string, string>): SafeHtml {
  const err = (f: string) => html`<p class="field-error" id="err-${f}" role="status">${errors[f] ?? ''}</p>`;
  const describedBy = (f: string) => html` aria-describedby="err-${f}"`;
  const input = (f: string, label: string) =>
    html`<div class="field"><label for="t-${f}">${label}</label><input id="t-${f}" name="${f}" value="${values[f] ?? ''}"${describedBy(f)}>${err(f)}</div>`;
  const area = (f: string, label: string, rows: number) =>
    html`<div class="field wide"><label for="t-${f}">${label}</label><textarea id="t-${f}" name="${f}" rows="${rows}" spellcheck="false"${describedBy(f)}>${values[f] ?? ''}</textarea>${err(f)}</div>`;
  const action = slug === null ? '/templates' : `/templates/${encodeURIComponent(slug)}`;
  return html`<div class="editor">
<form method="post" action="${action}" id="template-form" class="card" data-preview-json="/templates/~preview.json">
${csrfField(viewer)}<input type="hidden" name="project" value="${project.uid}">
${slug === null ? html`<div class="field"><label for="t-slug">Slug</label><input id="t-slug" name="slug" required value="${values.slug ?? ''}" pattern="[A-Za-z0-9_.\\-]+"${describedBy('slug')}>${err('slug')}</div>` : ''}
${input('name', 'Name')}${input('subject', 'Subject')}${input('from', 'From')}${input('parent', 'Layout (parent template slug)')}
${area('html', 'HTML part', 12)}${area('text', 'Text part', 6)}${area('css', 'CSS', 4)}
<div class="field wide"><label for="t-variables">Sample variables (JSON object, preview only)</label><textarea id="t-variables" name="variables" rows="3" spellcheck="false"${describedBy('variables')}>${values.variables ?? '{"name": "Ada"}'}</textarea>${err('variables')}</div>
${errors.template ? notice('error', errors.template) : ''}
<div class="actions"><button type="submit">Save</button>
<button type="submit" formaction="/templates/~preview" formtarget="preview" id="preview-button" class="secondary">Preview</button></div>
</form>
<section class="card preview" aria-label="Preview">
<h2>Preview</h2>
<dl class="summary"><dt>Subject</dt><dd id="preview-subject"></dd><dt>From</dt><dd id="preview-from"></dd></dl>
<iframe name="preview" id="preview-frame" title="Preview of the HTML part" sandbox src="about:blank"></iframe>
<h3>Text part</h3><pre id="preview-text" class="text-part"></pre>
</section>
</div>`;
}

function templateValues(t: Template): Record<string, string> {
  return {
    name: t.name ?? '',
    subject: t.subject ?? '',
    from: t.from_address ?? '',
    parent: t.parent_slug ?? '',
    text: t.text_body ?? '',
    html: t.html_body ?? '',
    css: t.css ?? '',
  };
}

export function installTemplatePages(app: FastifyInstance, routes: DashboardRoutes): void {
  const { services } = routes;
  app.get('/templates', async (request, reply) => {
    const viewer = viewerOf(request);
    const q = queryOf(request);
    const { projects, project } = await pickProject(services, viewer, q.project);
    const { templates } = await listTemplates(services, { caller: callerFor(viewer, project), projectUid: undefined });
    const p = encodeURIComponent(project.uid);
    const body = html`${projectPicker(projects, project, '/templates')}
<p><a class="button" href="/templates/~new?project=${p}">New template</a></p>
<table><thead><tr><th scope="col">Slug</th><th scope="col">Name</th><th scope="col">Subject</th><th scope="col">Layout</th><th scope="col">Updated</th></tr></thead>
<tbody>${templates.map(
      (t) => html`<tr><td><a href="/templates/${encodeURIComponent(t.slug)}?project=${p}">${t.slug}</a></td><td>${t.name ?? ''}</td><td>${t.subject ?? ''}</td><td>${t.parent_slug ?? ''}</td><td>${new Date(Number(t.updated_at)).toISOString().slice(0, 16).replace('T', ' ')}</td></tr>`,
    )}</tbody></table>`;
    return sendPage(reply, page('Templates', { viewer, section: 'templates' }, body));
  });

  app.get('/templates/~new', async (request, reply) => {
    const viewer = viewerOf(request);
    const { project } = await pickProject(services, viewer, queryOf(request).project);
    return sendPage(reply, page('New template', { viewer, section: 'templates', scripts: ['preview.js'] }, editor(viewer, project, null, {}, {})));
  });

  app.get('/templates/:slug', async (request, reply) => {
    const viewer = viewerOf(request);
    const { project } = await pickProject(services, viewer, queryOf(request).project);
    const slug = (request.params as { slug: string }).slug;
    const { template } = await getTemplate(services, { caller: callerFor(viewer, project), projectUid: undefined }, slug);
    const body = html`${editor(viewer, project, slug, templateValues(template), {})}
<p><a class="button danger" href="/templates/${encodeURIComponent(slug)}/delete?project=${encodeURIComponent(project.uid)}">Delete template ${slug}…</a></p>`;
    return sendPage(reply, page(`Template ${slug}`, { viewer, section: 'templates', scripts: ['preview.js'] }, body));
  });

  const save = async (request: FastifyRequest, reply: FastifyReply, slug: string | null) => {
    const viewer = viewerOf(request);
    const form = formOf(request);
    const { project } = await pickProject(services, viewer, form.project);
    const target = { caller: callerFor(viewer, project), projectUid: undefined };
    const name = slug ?? (form.slug ?? '').trim();
    try {
      if (slug === null) await createTemplate(services, target, name, inputOf(form));
      else await updateTemplate(services, target, slug, inputOf(form));
    } catch (error) {
      if (!(error instanceof ApiError) || error.status === 'not_found') throw error;
      const field = fieldOfError(error.message) ?? 'template';
      const title = slug === null ? 'New template' : `Template ${slug}`;
      return sendPage(reply, page(title, { viewer, section: 'templates', scripts: ['preview.js'] }, editor(viewer, project, slug, form, { [field]: error.message })), error.httpCode);
    }
    return redirectWithNotice(reply, routes, `/templates?project=${encodeURIComponent(project.uid)}`, { kind: 'ok', text: `Template ${name} saved.` });
  };
  app.post('/templates', (request, reply) => save(request, reply, null));
  app.post('/templates/:slug', (request, reply) => save(request, reply, (request.params as { slug: string }).slug));

  // Deletion asks first: this page changes nothing; its form (a POST) deletes.
  app.get('/templates/:slug/delete', async (request, reply) => {
    const viewer = viewerOf(request);
    const { project } = await pickProject(services, viewer, queryOf(request).project);
    const slug = (request.params as { slug: string }).slug;
    const { template } = await getTemplate(services, { caller: callerFor(viewer, project), projectUid: undefined }, slug);
    const list = `/templates?project=${encodeURIComponent(project.uid)}`;
    return sendPage(reply, confirmationPage(viewer, {
      title: 'Delete a template',
      section: 'templates',
      what: html`<p>Delete the template <strong>${template.slug}</strong>${template.name ? html` (${template.name})` : ''} of the project ${project.name}?
Its subject, From, HTML, text and CSS are deleted; a send_message naming it is refused from then on. Messages already accepted keep the content they were accepted with. This cannot be undone.</p>`,
      action: `/templates/${encodeURIComponent(template.slug)}/delete`,
      fields: { project: project.uid },
      button: 'Delete the template',
      back: `/templates/${encodeURIComponent(template.slug)}?project=${encodeURIComponent(project.uid)}`,
      returnPath: list,
    }));
  });

  app.post('/templates/:slug/delete', async (request, reply) => {
    const viewer = viewerOf(request);
    const { project } = await pickProject(services, viewer, formOf(request).project);
    const slug = (request.params as { slug: string }).slug;
    await deleteTemplate(services, { caller: callerFor(viewer, project), projectUid: undefined }, slug);
    return redirectWithNotice(reply, routes, `/templates?project=${encodeURIComponent(project.uid)}`, { kind: 'ok', text: `Template ${slug} deleted.` });
  });

  const preview = async (request: FastifyRequest) => {
    const viewer = viewerOf(request);
    const form = formOf(request);
    const { project } = await pickProject(services, viewer, form.project);
    const sample = sampleVariables(form.variables);
    const result = await previewTemplate(services, project, { template: inputOf(form), variables: sample.variables });
    return sample.error === null ? result : { ...result, errors: { ...result.errors, variables: sample.error } };
  };

  // The preview changes nothing: its posts use up no one-time form token (the editor's form keeps
  // its token for Save; docs/dashboard.md, "Forms").
  // Into the sandboxed frame: the HTML part as it would be sent, under the message frame's policy.
  app.post('/templates/~preview', { config: { dashboardReadOnly: true } }, async (request, reply) => {
    const result = await preview(request);
    const body = result.html ?? (Object.keys(result.errors).length > 0 ? '<p>Fix the errors beside the fields to see the preview.</p>' : '<p>(no HTML part)</p>');
    return reply.header('content-security-policy', framePolicy(false)).header('x-frame-options', 'SAMEORIGIN').header('content-type', 'text/html; charset=utf-8').header('cache-control', 'no-store').send(body);
  });

  // Subject, From, text and the field errors, for the editor to show beside the fields.
  app.post('/templates/~preview.json', { config: { dashboardReadOnly: true } }, async (request, reply) => {
    const result = await preview(request);
    return reply.header('content-type', 'application/json; charset=utf-8').header('cache-control', 'no-store').send(
      JSON.stringify({ subject: result.subject, from: result.from, text: result.text, errors: result.errors }),
    );
  });
}

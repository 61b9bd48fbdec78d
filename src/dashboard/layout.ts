// The frame of every dashboard page: head (one stylesheet, scripts from /assets only), navigation,
// the signed-in user and the sign-out form (a POST carrying the sign-in's CSRF token), and the
// notice a form post left for the page.
import type { Project } from '../operations/context.ts';
import { readProjectSettings } from '../operations/projects.ts';
import { html, type HtmlValue, type SafeHtml } from './html.ts';
import type { Notice, PageViewer } from './requests.ts';

/** The hidden field of a form's one-time token (docs/dashboard.md, "Forms"). */
export const FORM_TOKEN_FIELD = '_form';

export interface PageContext {
  viewer: PageViewer | null;
  /** the nav entry to mark as current */
  section?: string;
  /** scripts from /assets to load (deferred) */
  scripts?: string[];
}

const NAV: Array<[string, string, string, boolean]> = [
  ['overview', '/', 'Overview', false],
  ['messages', '/messages', 'Messages', false],
  ['templates', '/templates', 'Templates', false],
  ['suppressions', '/suppressions', 'Suppressions', false],
  ['keys', '/keys', 'Keys', false],
  // account-wide pages: account users only
  ['domains', '/domains', 'Domains', true],
  ['webhooks', '/webhooks', 'Webhooks', true],
  ['mailboxes', '/mailboxes', 'Mailboxes', true],
  ['users', '/users', 'Users', true],
];

/**
 * The hidden fields every form that changes something carries: the sign-in's CSRF token and a
 * one-time token of its own, new at each call (docs/dashboard.md, "Forms"): call it once per form.
 * `returnPath`: the page a repeated submission is sent back to, when not the page shown.
 */
export function csrfField(viewer: PageViewer, returnPath?: string): SafeHtml {
  return html`<input type="hidden" name="_csrf" value="${viewer.csrfToken}"><input type="hidden" name="${FORM_TOKEN_FIELD}" value="${viewer.formToken(returnPath)}">`;
}

export function page(title: string, ctx: PageContext, body: HtmlValue): string {
  const viewer = ctx.viewer;
  const nav = viewer
    ? html`<nav aria-label="Main"><ul>${NAV.filter(([, , , accountOnly]) => !accountOnly || !viewer.scopeProject).map(
        ([key, href, label]) => html`<li><a href="${href}"${ctx.section === key ? html` aria-current="page"` : ''}>${label}</a></li>`,
      )}</ul></nav>
      <form method="post" action="/logout" class="signout">${csrfField(viewer)}<span class="who">${viewer.user.email}</span> <button type="submit" class="link">Sign out</button></form>`
    : '';
  const scripts = ['app.js', ...(ctx.scripts ?? [])];
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<title>${title} · Posthorn</title>
<link rel="stylesheet" href="/assets/style.css">
<link rel="icon" href="data:image/svg+xml,%3Csvg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 100 100'%3E%3Ctext y='.9em' font-size='90'%3E%F0%9F%93%AF%3C/text%3E%3C/svg%3E">
${scripts.map((s) => html`<script src="/assets/${s}" defer></script>`)}
</head>
<body>
<a class="skip" href="#main">Skip to content</a>
<header class="top"><a class="brand" href="/">Posthorn</a>${nav}</header>
<main id="main">
<h1>${title}</h1>
${postNotice(viewer ? viewer.takeNotice() : null)}
${body}
</main>
</body>
</html>`.value;
}

/** A project's name as a picker shows it: a sandbox project says so (docs/sandbox.md). */
export function projectLabel(project: Project): string {
  return readProjectSettings(project).sandbox ? `${project.name} (sandbox)` : project.name;
}

/** A project selector (GET form) for pages about one project; hidden when the viewer sees one project. */
export function projectPicker(projects: readonly Project[], current: Project, action: string, extra: Record<string, string> = {}): SafeHtml {
  if (projects.length <= 1) return html`<p class="project">Project: <strong>${projectLabel(current)}</strong></p>`;
  return html`<form method="get" action="${action}" class="picker">
<label for="project">Project</label>
<select id="project" name="project" data-autosubmit>${projects.map(
    (p) => html`<option value="${p.uid}"${p.id === current.id ? html` selected` : ''}>${projectLabel(p)}</option>`,
  )}</select>
${Object.entries(extra).map(([k, v]) => html`<input type="hidden" name="${k}" value="${v}">`)}
<button type="submit">Show</button>
</form>`;
}

export function notice(kind: 'ok' | 'warn' | 'error', text: HtmlValue): SafeHtml {
  return html`<p class="notice ${kind}" role="${kind === 'error' ? 'alert' : 'status'}">${text}</p>`;
}

/** The notice a form post left for the page (requests.ts takeNotice), if any: page() shows it under the title. */
function postNotice(shown: Notice | null): SafeHtml | '' {
  return shown ? notice(shown.kind, shown.text) : '';
}

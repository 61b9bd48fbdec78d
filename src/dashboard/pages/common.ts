// What several pages share: choosing the project a page is about among those the viewer sees,
// saying that a project is a sandbox wherever its counts or messages are shown, and which messages
// were accepted in sandbox mode (the mode is each message's own, fixed at acceptance: docs/sandbox.md),
// and the page a destructive action asks on first (docs/dashboard.md, "Confirmations").
import { ApiError } from '../../domain/errors.ts';
import { readProjectSettings } from '../../operations/projects.ts';
import { listViewerProjects, requireViewerProject, type Viewer } from '../../operations/users.ts';
import type { Services } from '../../services.ts';
import type { Project } from '../../operations/context.ts';
import { html, type SafeHtml } from '../html.ts';
import { csrfField, page } from '../layout.ts';
import type { PageViewer } from '../requests.ts';

/** The viewer's projects and the one named by `uid` (default: the first); not_found when none. */
export async function pickProject(services: Services, viewer: Viewer, uid: string | undefined): Promise<{ projects: Project[]; project: Project }> {
  const projects = await listViewerProjects(services, viewer);
  if (uid) return { projects, project: await requireViewerProject(services, viewer, uid) };
  const first = projects[0];
  if (!first) throw new ApiError('not_found', 'This account has no project yet: create one with `posthorn project create` or the create_project API method.');
  return { projects, project: first };
}

/** Account-wide pages (domains, webhooks, mailboxes) are for account users, not project-scoped ones. */
export function requireAccountUser(viewer: Viewer): void {
  if (viewer.scopeProject) throw new ApiError('not_found', 'This page is not available to a project-scoped user.');
}

export function isSandbox(project: Pick<Project, 'settings'>): boolean {
  return readProjectSettings(project).sandbox;
}

/** A badge beside a sandbox project's name; nothing for a live one. */
export function sandboxBadge(project: Pick<Project, 'settings'>): SafeHtml | '' {
  return isSandbox(project) ? html` <span class="badge sandbox">sandbox</span>` : '';
}

/**
 * What a sandbox project's counts and messages mean, above them; nothing for a live one. The
 * setting decides for the messages accepted while it is on; each message keeps the mode it was
 * accepted with, so counts over time may hold both.
 */
export function sandboxNote(viewer: Viewer, project: Project): SafeHtml | '' {
  if (!isSandbox(project)) return '';
  const settings = viewer.scopeProject ? '' : html` <a href="/projects/${encodeURIComponent(project.uid)}/settings">Settings</a>`;
  return html`<p class="notice sandbox"><strong>Sandbox mode</strong>: nothing this project accepts now leaves this machine. Its copies are answered by the sandbox, not by the recipients' servers, so "delivered" means the sandbox accepted it. The mode is fixed per message when it is accepted: messages accepted while sandbox mode was off are real mail, are sent, and are counted with the others (docs/sandbox.md).${settings}</p>`;
}

/** A badge beside a message accepted in sandbox mode (its own mode, not the project's now); nothing for real mail. */
export function messageSandboxBadge(sandbox: boolean): SafeHtml | '' {
  return sandbox ? html` <span class="badge sandbox" title="accepted in sandbox mode: nothing was sent">sandbox</span>` : '';
}

/**
 * What one message's copies are, from the mode it was accepted with (docs/sandbox.md): a message
 * accepted in sandbox mode says so whatever the project's setting now; real mail of a project in
 * sandbox mode now says that it is real.
 */
export function messageSandboxNote(viewer: Viewer, project: Project, sandbox: boolean): SafeHtml | '' {
  const settings = viewer.scopeProject ? '' : html` <a href="/projects/${encodeURIComponent(project.uid)}/settings">Settings</a>`;
  if (sandbox) {
    return html`<p class="notice sandbox"><strong>Sandbox message</strong>: accepted in sandbox mode, so none of its copies leaves this machine, whatever the project's setting is now. They are answered by the sandbox, not by the recipients' servers, so "delivered" means the sandbox accepted it (docs/sandbox.md).</p>`;
  }
  if (!isSandbox(project)) return '';
  return html`<p class="notice warn"><strong>Real mail</strong>: accepted while sandbox mode was off, so its copies are sent to the recipients' servers even though the project is in sandbox mode now (docs/sandbox.md).${settings}</p>`;
}

/** What a confirmation page says and the form that does what it asks about. */
export interface Confirmation {
  title: string;
  /** the nav entry marked as current */
  section: string;
  /** what will be destroyed or stop working, and whether it can be undone */
  what: SafeHtml;
  /** the POST that does it */
  action: string;
  /** hidden fields the POST carries besides the tokens */
  fields?: Record<string, string>;
  /** the danger button's text */
  button: string;
  /** where Cancel goes: the page the action was offered on */
  back: string;
  /**
   * where the same submission sent again (a reload of its answer, Back) is answered: the page the
   * action was offered on, not this one, which may no longer exist once it is done
   */
  returnPath: string;
}

/**
 * The page a destructive action asks on first (docs/dashboard.md, "Confirmations"). Showing it
 * changes nothing; it says what will be destroyed, and its form, a plain POST carrying the CSRF
 * token and a one-time form token, does it: no script is needed, and the button and the Cancel link
 * are reached and used with the keyboard like any other.
 */
export function confirmationPage(viewer: PageViewer, c: Confirmation): string {
  const fields = Object.entries(c.fields ?? {}).map(([name, value]) => html`<input type="hidden" name="${name}" value="${value}">`);
  return page(
    c.title,
    { viewer, section: c.section },
    html`<section class="card confirm">${c.what}
<form method="post" action="${c.action}" class="actions">${csrfField(viewer, c.returnPath)}${fields}<button type="submit" class="danger">${c.button}</button> <a class="button secondary" href="${c.back}">Cancel</a></form></section>`,
  );
}

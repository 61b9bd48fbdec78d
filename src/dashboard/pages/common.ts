// What several pages share: choosing the project a page is about among those the viewer sees, and
// saying that a project is a sandbox wherever its counts or messages are shown (docs/sandbox.md).
import { ApiError } from '../../domain/errors.ts';
import { readProjectSettings } from '../../operations/projects.ts';
import { listViewerProjects, requireViewerProject, type Viewer } from '../../operations/users.ts';
import type { Services } from '../../services.ts';
import type { Project } from '../../operations/context.ts';
import { html, type SafeHtml } from '../html.ts';

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

/** What a sandbox project's counts and messages mean, above them; nothing for a live one. */
export function sandboxNote(viewer: Viewer, project: Project): SafeHtml | '' {
  if (!isSandbox(project)) return '';
  const settings = viewer.scopeProject ? '' : html` <a href="/projects/${encodeURIComponent(project.uid)}/settings">Settings</a>`;
  return html`<p class="notice sandbox"><strong>Sandbox mode</strong>: nothing this project sends leaves this machine. Its copies are answered by the sandbox, not by the recipients' servers, so "delivered" means the sandbox accepted it (docs/sandbox.md).${settings}</p>`;
}

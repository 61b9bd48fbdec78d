// What several pages share: choosing the project a page is about among those the viewer sees.
import { ApiError } from '../../domain/errors.ts';
import { listViewerProjects, requireViewerProject, type Viewer } from '../../operations/users.ts';
import type { Services } from '../../services.ts';
import type { Project } from '../../operations/context.ts';

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

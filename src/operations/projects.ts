// Creating a project: the project row, its key (shown once) and the sample templates, in one
// transaction. The other project operations live beside it.
import { randomUUID } from 'node:crypto';
import { ApiError } from '../domain/errors.ts';
import { generateApiKey, hashApiKey, keyPrefix } from '../domain/keys.ts';
import { sampleTemplates } from '../domain/sample-templates.ts';
import { insertApiKey } from '../storage/api-keys.ts';
import { insertProject } from '../storage/projects.ts';
import type { Account, Project } from '../storage/schema.ts';
import { insertTemplate } from '../storage/templates.ts';
import type { Services } from './context.ts';

export interface CreatedProject {
  project: Project;
  /** shown this once */
  apiKey: string;
}

export function projectUrl(services: Services, project: Pick<Project, 'uid'>): string {
  return `${services.config.publicUrl}/projects/${encodeURIComponent(project.uid)}`;
}

export async function createProject(services: Services, account: Account, input: { name: string; uid?: string }): Promise<CreatedProject> {
  const now = services.clock.now();
  const apiKey = generateApiKey();
  const uid = input.uid && input.uid !== '' ? input.uid : randomUUID();
  try {
    const project = await services.store.write(async (trx) => {
      const project = await insertProject(trx, { accountId: account.id, uid, name: input.name, now });
      await insertApiKey(trx, { accountId: account.id, projectId: project.id, keyHash: hashApiKey(apiKey), keyPrefix: keyPrefix(apiKey), now });
      for (const template of sampleTemplates(services.config.mailerHost)) await insertTemplate(trx, project.id, template, now);
      return project;
    });
    return { project, apiKey };
  } catch (error) {
    if (services.store.dialect.isUniqueViolation(error)) throw new ApiError('bad_request', `Uid ${uid} already exists.`);
    throw error;
  }
}

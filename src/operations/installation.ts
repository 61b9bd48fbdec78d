// A new installation (`posthorn init`): an account, its first project and its first dashboard
// user. Every input is checked before anything is written, so a refused name or email leaves no
// half-made account behind.
import { checkName } from '../domain/args.ts';
import type { Services } from '../services.ts';
import { MAX_ACCOUNT_NAME } from './account-settings.ts';
import { createAccount, type CreatedAccount } from './accounts.ts';
import { createProject, MAX_PROJECT_NAME, type CreatedProject } from './projects.ts';
import { checkUserEmail, createFirstUser, type CreatedUser } from './users.ts';

export interface InstallationInput {
  accountName: string;
  projectName: string;
  /** the first user's email; default admin@<mailer host> */
  email?: string;
}

export interface Installation {
  account: CreatedAccount;
  project: CreatedProject;
  user: CreatedUser;
}

export async function createInstallation(services: Services, input: InstallationInput): Promise<Installation> {
  checkName('name', input.accountName, MAX_ACCOUNT_NAME);
  checkName('project-name', input.projectName, MAX_PROJECT_NAME);
  if (input.email !== undefined) checkUserEmail(input.email);
  const account = await createAccount(services, { name: input.accountName });
  const project = await createProject(services, account.account, { name: input.projectName });
  const user = await createFirstUser(services, account.account, input.email);
  return { account, project, user };
}

// account and init: accounts, and the first account and project of a new installation.
import { createAccount, listAccounts, setAccountStatus } from '../operations/accounts.ts';
import { createProject, projectUrl } from '../operations/projects.ts';
import { flag, print, withServices } from './output.ts';
import { UsageError, type CliCommand, type CommandInput } from './types.ts';

type Command = (input: CommandInput) => Promise<number>;

const account: Command = async ({ config, args, flags }) => {
  const [sub, uid] = args;
  const json = flags.has('json');
  return withServices(config, async (services) => {
    switch (sub) {
      case 'create': {
        const name = flag(flags, 'name');
        if (!name) throw new UsageError('account create needs --name NAME');
        const { account, apiKey } = await createAccount(services, { name });
        print(json, { uid: account.uid, name: account.name, api_key: apiKey }, `account ${account.uid} "${account.name}"\naccount API key (shown once): ${apiKey}`);
        return 0;
      }
      case 'list': {
        const rows = await listAccounts(services);
        const out = rows.map((a) => ({ uid: a.uid, name: a.name, status: a.status, created_at: new Date(a.created_at).toISOString() }));
        print(json, out, out.map((a) => `${a.uid}  ${a.status.padEnd(8)}  ${a.name}`).join('\n') || '(no accounts)');
        return 0;
      }
      case 'disable':
      case 'enable': {
        if (!uid) throw new UsageError(`account ${sub} needs the account UID`);
        const updated = await setAccountStatus(services, uid, sub === 'disable' ? 'disabled' : 'active');
        if (!updated) {
          process.stderr.write(`posthorn: no account with uid ${uid}\n`);
          return 1;
        }
        print(json, { uid: updated.uid, status: updated.status }, `account ${updated.uid} is now ${updated.status}`);
        return 0;
      }
      default:
        throw new UsageError('usage: posthorn account create --name NAME | list | disable UID | enable UID');
    }
  });
};

const init: Command = async ({ config, flags }) => {
  const json = flags.has('json');
  return withServices(config, async (services) => {
    const created = await createAccount(services, { name: flag(flags, 'name') ?? 'My account' });
    const { project, apiKey } = await createProject(services, created.account, { name: flag(flags, 'project-name') ?? 'My project' });
    const out = {
      account: { uid: created.account.uid, name: created.account.name, api_key: created.apiKey },
      project: { uid: project.uid, name: project.name, url: projectUrl(services, project), api_key: apiKey },
    };
    print(
      json,
      out,
      [
        `account ${out.account.uid}: account API key (shown once) ${out.account.api_key}`,
        `project ${out.project.uid}: project API key (shown once) ${out.project.api_key}`,
      ].join('\n'),
    );
    return 0;
  });
};


export const accountCommands: CliCommand[] = [
  {
    name: 'init',
    usage: ['init [--name NAME] [--project-name NAME] [--json]   create an account and its first project; print both API keys'],
    flags: ['json', 'name', 'project-name'],
    run: init,
  },
  {
    name: 'account',
    usage: ['account create --name NAME [--json]', 'account list [--json]', 'account disable UID | account enable UID'],
    flags: ['json', 'name'],
    run: account,
  },
];

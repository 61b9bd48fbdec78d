// account and init: accounts, and the first account and project of a new installation.
// The operations are loaded when a command runs (src/cli/types.ts).
import { unhandled } from './command-args.ts';
import { print, withExistingServices, withServices } from './output.ts';
import { NAME, SWITCH, TEXT, type CliCommand, type CommandInput } from './types.ts';

type Command = (input: CommandInput) => Promise<number>;

const account: Command = async ({ config, args, flags }) => {
  const [sub, uid] = args;
  const json = flags.bool('json');
  const { createAccount, listAccounts, setAccountStatus } = await import('../operations/accounts.ts');
  if (sub === 'list') {
    // Read-only: without a database there is nothing to list, and none is created.
    const rows = await withExistingServices(config, (services) => listAccounts(services), () => []);
    const out = rows.map((a) => ({ uid: a.uid, name: a.name, status: a.status, created_at: new Date(a.created_at).toISOString() }));
    print(json, out, out.map((a) => `${a.uid}  ${a.status.padEnd(8)}  ${a.name}`).join('\n') || '(no accounts)');
    return 0;
  }
  return withServices(config, async (services) => {
    switch (sub) {
      case 'create': {
        const { account, apiKey } = await createAccount(services, { name: flags.needText('name') });
        print(json, { uid: account.uid, name: account.name, api_key: apiKey }, `account ${account.uid} "${account.name}"\naccount API key (shown once): ${apiKey}`);
        return 0;
      }
      case 'disable':
      case 'enable': {
        const updated = await setAccountStatus(services, uid, sub === 'disable' ? 'disabled' : 'active');
        if (!updated) {
          process.stderr.write(`posthorn: no account with uid ${uid}\n`);
          return 1;
        }
        print(json, { uid: updated.uid, status: updated.status }, `account ${updated.uid} is now ${updated.status}`);
        return 0;
      }
      default:
        return unhandled(sub);
    }
  }, { create: sub === 'create' });
};

const init: Command = async ({ config, flags }) => {
  const json = flags.bool('json');
  const { createInstallation } = await import('../operations/installation.ts');
  const { listAccounts } = await import('../operations/accounts.ts');
  const { projectUrl } = await import('../operations/projects.ts');
  return withServices(config, async (services) => {
    const before = (await listAccounts(services)).length;
    const { account, project, user } = await createInstallation(services, {
      accountName: flags.text('name') ?? 'My account',
      projectName: flags.text('project-name') ?? 'My project',
      email: flags.text('email'),
    });
    const out = {
      account: { uid: account.account.uid, name: account.account.name, api_key: account.apiKey },
      project: { uid: project.project.uid, name: project.project.name, url: projectUrl(services, project.project), api_key: project.apiKey },
      dashboard: { url: `${services.config.publicUrl}/`, email: user.user.email, password: user.password },
    };
    print(
      json,
      out,
      [
        `account ${out.account.uid}: account API key (shown once) ${out.account.api_key}`,
        `project ${out.project.uid}: project API key (shown once) ${out.project.api_key}`,
        `dashboard ${out.dashboard.url}: sign in as ${out.dashboard.email} with the password (shown once) ${out.dashboard.password}`,
      ].join('\n'),
    );
    // Not the first: say so, since commands that find "the" account now need --account (docs/cli.md).
    if (before > 0) {
      process.stderr.write(
        `posthorn: this installation already had ${before} account${before === 1 ? '' : 's'}; init added another (${out.account.uid}). Commands that act on the only account now need --account UID; a new key for an existing project: posthorn project rotate-key UID, a new dashboard password: posthorn user reset-password --email EMAIL\n`,
      );
    }
    return 0;
  }, { create: true });
};


export const accountCommands: CliCommand[] = [
  {
    name: 'init',
    usage: ['init [--name NAME] [--project-name NAME] [--email EMAIL] [--json]   create an account, its first project and dashboard user; print both API keys and how to sign in'],
    description: 'Creates the database if needed, then an account and its first project (with the two sample templates), and prints the account API key and the project API key, and creates the first dashboard user (--email, default admin@<mailer host>) and prints the dashboard URL and its generated password. Keys and the password are shown once: only their hashes are stored.',
    flags: { json: SWITCH, name: NAME, 'project-name': NAME, email: TEXT },
    run: init,
  },
  {
    name: 'account',
    usage: ['account create --name NAME [--json]', 'account list [--json]', 'account disable UID | account enable UID'],
    description: 'Creates an account (printing its API key once), lists accounts (never creating a database), or disables and re-enables one (a disabled account\'s keys are answered 423 locked).',
    flags: { json: SWITCH, name: NAME },
    subcommands: { create: { needs: ['name'] }, list: {}, disable: { args: ['UID'] }, enable: { args: ['UID'] } },
    run: account,
  },
];

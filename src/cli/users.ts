// user: dashboard users (docs/dashboard.md). create adds a user to an account (optionally scoped
// to one project) and prints its generated password once; reset-password sets a new one and ends
// the user's sessions. The operations are loaded when a command runs (src/cli/types.ts).
import { unhandled } from './command-args.ts';
import { print, withServices } from './output.ts';
import { SWITCH, TEXT, type CliCommand, type CommandInput } from './types.ts';

async function user({ config, args, flags }: CommandInput): Promise<number> {
  const [sub] = args;
  const json = flags.bool('json');
  if (sub === 'create') {
    const { createUser } = await import('../operations/users.ts');
    return withServices(config, async (services) => {
      const created = await createUser(services, { accountUid: flags.needText('account'), email: flags.needText('email'), projectUid: flags.text('project') ?? null });
      const out = {
        email: created.user.email,
        account_uid: created.account.uid,
        project_uid: created.project?.uid ?? null,
        password: created.password,
        url: `${services.config.publicUrl}/`,
      };
      print(json, out, `dashboard user ${out.email}${out.project_uid ? ` (project ${out.project_uid} only)` : ''}: sign in at ${out.url} with the password (shown once) ${out.password}`);
      return 0;
    });
  }
  if (sub === 'reset-password') {
    const { resetPassword } = await import('../operations/users.ts');
    return withServices(config, async (services) => {
      const { user: u, password } = await resetPassword(services, { email: flags.needText('email') });
      print(json, { email: u.email, password }, `dashboard user ${u.email}: new password (shown once) ${password}; every session of the user has ended`);
      return 0;
    });
  }
  return unhandled(sub);
}

export const userCommands: CliCommand[] = [
  {
    name: 'user',
    usage: [
      'user create --account UID --email EMAIL [--project UID] [--json]   add a dashboard user; print its password once',
      'user reset-password --email EMAIL [--json]   set a new password (printed once) and end its sessions',
    ],
    description: 'Dashboard users (docs/dashboard.md): create one for an account, optionally seeing only one project, or reset the password of one. Passwords are generated, printed once and stored as scrypt hashes.',
    flags: { json: SWITCH, account: TEXT, email: TEXT, project: TEXT },
    subcommands: { create: { needs: ['account', 'email'] }, 'reset-password': { needs: ['email'] } },
    run: user,
  },
];

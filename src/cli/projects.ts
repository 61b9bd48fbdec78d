// project: create, list, rotate a project's key, set its retention (docs/cli.md). Keys are printed
// once, when made. The operations are loaded when a command runs (src/cli/types.ts).
import { flag, print, withServices } from './output.ts';
import { isoTime, resolveAccount, table } from './scope.ts';
import { UsageError, type CliCommand, type CommandInput } from './types.ts';

async function project({ config, args, flags }: CommandInput): Promise<number> {
  const [sub, uid] = args;
  const json = flags.has('json');
  const ops = await import('../operations/projects.ts');
  return withServices(config, async (services) => {
    const account = await resolveAccount(services, flags);
    switch (sub) {
      case 'create': {
        const name = flag(flags, 'name');
        if (!name) throw new UsageError('project create needs --name NAME');
        const { project: p, apiKey } = await ops.createProject(services, account, { name, uid: flag(flags, 'uid') });
        const out = { uid: p.uid, name: p.name, account_uid: account.uid, url: ops.projectUrl(services, p), api_key: apiKey };
        print(json, out, `project ${out.uid} "${out.name}"\nproject API key (shown once): ${apiKey}`);
        return 0;
      }
      case 'list': {
        const views = await ops.listProjects(services, account);
        const out = views.map((v) => ({
          uid: v.project.uid,
          name: v.project.name,
          status: v.project.status,
          key_prefix: v.keyPrefix,
          retention_days: ops.readProjectSettings(v.project).retention_days ?? null,
          created_at: isoTime(v.project.created_at),
        }));
        print(
          json,
          out,
          table(['UID', 'STATUS', 'KEY', 'RETENTION', 'NAME'], out.map((p) => [p.uid, p.status, p.key_prefix ? `${p.key_prefix}...` : null, p.retention_days === null ? 'default' : `${p.retention_days} d`, p.name]), '(no projects)'),
        );
        return 0;
      }
      case 'rotate-key': {
        if (!uid) throw new UsageError('project rotate-key needs the project UID');
        const { project: p, apiKey } = await ops.rotateProjectKey(services, account, uid);
        print(json, { uid: p.uid, api_key: apiKey }, `project ${p.uid}: new API key (shown once) ${apiKey}; the old key no longer works`);
        return 0;
      }
      case 'set-retention': {
        const days = flag(flags, 'days');
        if (!uid || days === undefined || !/^\d+$/.test(days) || Number(days) > ops.MAX_RETENTION_DAYS) {
          throw new UsageError(`project set-retention needs the project UID and --days N (0 to ${ops.MAX_RETENTION_DAYS}; 0 keeps everything)`);
        }
        const view = await ops.updateProject(services, account, uid, { settings: { retention_days: Number(days) } });
        print(json, { uid: view.project.uid, retention_days: Number(days) }, `project ${view.project.uid}: messages are kept ${Number(days) === 0 ? 'forever' : `${days} days`}`);
        return 0;
      }
      default:
        throw new UsageError('usage: posthorn project create --name NAME | list | rotate-key UID | set-retention UID --days N  [--account UID]');
    }
  });
}

export const projectCommands: CliCommand[] = [
  {
    name: 'project',
    usage: [
      'project create --name NAME [--uid UID] [--account UID] [--json]',
      'project list [--account UID] [--json]',
      'project rotate-key UID [--account UID] [--json]',
      'project set-retention UID --days N [--account UID] [--json]',
    ],
    description: 'Projects of an account. --account may be left out when there is one account. Keys are shown once.',
    flags: ['json', 'name', 'uid', 'account', 'days'],
    run: project,
  },
];

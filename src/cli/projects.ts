// project: create, list, rotate a project's key, set its retention (docs/cli.md). Keys are printed
// once, when made. The operations are loaded when a command runs (src/cli/types.ts).
import { unhandled } from './command-args.ts';
import { print, withServices } from './output.ts';
import { isoTime, resolveAccount, table } from './scope.ts';
import { NAME, SWITCH, TEXT, type CliCommand, type CommandInput } from './types.ts';

async function project({ config, args, flags }: CommandInput): Promise<number> {
  const [sub, uid] = args;
  const json = flags.bool('json');
  const ops = await import('../operations/projects.ts');
  return withServices(config, async (services) => {
    const account = await resolveAccount(services, flags);
    switch (sub) {
      case 'create': {
        const { project: p, apiKey } = await ops.createProject(services, account, { name: flags.needText('name'), uid: flags.text('uid') });
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
        const { project: p, apiKey } = await ops.rotateProjectKey(services, account, uid);
        print(json, { uid: p.uid, api_key: apiKey }, `project ${p.uid}: new API key (shown once) ${apiKey}; the old key no longer works`);
        return 0;
      }
      case 'set-retention': {
        const days = flags.int('days', 0);
        const view = await ops.updateProject(services, account, uid, { settings: { retention_days: days } });
        print(json, { uid: view.project.uid, retention_days: days }, `project ${view.project.uid}: messages are kept ${days === 0 ? 'forever' : `${days} days`}`);
        return 0;
      }
      default:
        return unhandled(sub);
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
    flags: {
      json: SWITCH,
      name: NAME,
      uid: TEXT,
      account: TEXT,
      // As the API's retention_days: 0 (keeps everything) to MAX_RETENTION_DAYS.
      days: { kind: 'int', min: 0, max: async () => (await import('../operations/projects.ts')).MAX_RETENTION_DAYS },
    },
    subcommands: { create: { needs: ['name'] }, list: {}, 'rotate-key': { args: ['UID'] }, 'set-retention': { args: ['UID'], needs: ['days'] } },
    run: project,
  },
];

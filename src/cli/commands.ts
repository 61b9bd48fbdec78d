// The command line. Every command takes the service's options (--data, DATABASE_URL, ...), opens
// the same store and calls the same operations as the API.
import type { Config } from '../config.ts';
import { describeOptions } from '../config.ts';
import { migrateDatabase, openServices, startApp } from '../app.ts';
import { createAccount, listAccounts, setAccountStatus } from '../operations/accounts.ts';
import { createProject, projectUrl } from '../operations/projects.ts';
import type { Services } from '../operations/context.ts';
import { createLogger } from '../log.ts';

export class UsageError extends Error {}

export interface CommandInput {
  config: Readonly<Config>;
  args: string[];
  flags: Map<string, string[]>;
}

type Command = (input: CommandInput) => Promise<number>;

function flag(flags: Map<string, string[]>, name: string): string | undefined {
  const v = flags.get(name);
  return v?.[v.length - 1];
}

function print(json: boolean, value: unknown, text: string): void {
  process.stdout.write(json ? JSON.stringify(value) + '\n' : text + '\n');
}

async function withServices<T>(config: Readonly<Config>, fn: (s: Services) => Promise<T>): Promise<T> {
  const services = await openServices(config, { log: quietLogger(config) });
  try {
    return await fn(services);
  } finally {
    await services.store.close();
  }
}

/** CLI commands print their own output; the logger only speaks up for warnings. */
function quietLogger(config: Readonly<Config>) {
  return createLogger(config.logLevel === 'info' ? 'warn' : config.logLevel);
}

const serve: Command = async ({ config }) => {
  const app = await startApp(config);
  const log = app.services.log;
  log.info({ url: app.url, role: config.role, background: app.background.map((b) => b.name) }, 'posthorn is running');
  await new Promise<void>((resolve) => {
    // Signal handlers do not keep Node's event loop alive, and a worker process may hold nothing
    // else that does (unref'd poll timers, no HTTP server): this timer keeps it running until told.
    const keepAlive = setInterval(() => {}, 1 << 30);
    const stop = (signal: string) => {
      clearInterval(keepAlive);
      log.info({ signal }, 'shutting down');
      resolve();
    };
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once('SIGINT', () => stop('SIGINT'));
  });
  await app.close();
  return 0;
};

const migrate: Command = async ({ config }) => {
  const applied = await migrateDatabase(config, quietLogger(config));
  process.stdout.write(applied.length ? `applied: ${applied.join(', ')}\n` : 'database is up to date\n');
  return 0;
};

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

export const COMMANDS: Record<string, Command> = { serve, migrate, account, init };

export function printHelp(): void {
  process.stdout.write(`usage: posthorn <command> [options]

commands:
  serve                         run the service (HTTP API and delivery workers)
  migrate                       apply database migrations and exit
  init [--json]                 create an account and its first project; print both API keys
  account create --name NAME [--json]
  account list [--json]
  account disable UID | account enable UID

options (each also an environment variable):
${describeOptions()}
`);
}

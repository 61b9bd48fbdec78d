// The command table: every command file contributes its commands here.
import { accountCommands } from './accounts.ts';
import { serviceCommands } from './service.ts';
import { domainCommands } from './domains.ts';
import { maintenanceCommands } from './maintenance.ts';
import { messageCommands } from './messages.ts';
import { projectCommands } from './projects.ts';
import { sendCommands } from './send.ts';
import { templateCommands } from './templates.ts';
import { webhookCommands } from './webhooks.ts';
import type { CliCommand } from './types.ts';
import { userCommands } from './users.ts';

export const ALL_COMMANDS: readonly CliCommand[] = [
  ...serviceCommands,
  ...accountCommands,
  ...userCommands,
  ...projectCommands,
  ...templateCommands,
  ...domainCommands,
  ...webhookCommands,
  ...messageCommands,
  ...sendCommands,
  ...maintenanceCommands,
];

export const COMMANDS: ReadonlyMap<string, CliCommand> = new Map(ALL_COMMANDS.map((c) => [c.name, c]));

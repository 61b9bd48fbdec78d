// The command table: every command file contributes its commands here.
import { accountCommands } from './accounts.ts';
import { serviceCommands } from './service.ts';
import type { CliCommand } from './types.ts';
import { userCommands } from './users.ts';

export const ALL_COMMANDS: readonly CliCommand[] = [...serviceCommands, ...accountCommands, ...userCommands];

export const COMMANDS: ReadonlyMap<string, CliCommand> = new Map(ALL_COMMANDS.map((c) => [c.name, c]));

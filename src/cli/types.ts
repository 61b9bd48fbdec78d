// What a command of the command line is: its name, the lines of usage it adds to `posthorn help`,
// the flags of its own (beyond the service options of config.ts), and what it runs.
import type { Config } from '../config.ts';

export class UsageError extends Error {}

export interface CommandInput {
  config: Readonly<Config>;
  /** positional words after the command name */
  args: string[];
  flags: Map<string, string[]>;
}

export interface CliCommand {
  readonly name: string;
  /** help lines, without the leading "posthorn " */
  readonly usage: readonly string[];
  /** flags this command reads besides the service options (json, name, ...) */
  readonly flags?: readonly string[];
  run(input: CommandInput): Promise<number>;
}

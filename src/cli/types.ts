// What a command of the command line is: its name, the lines of usage it adds to `posthorn help`,
// the flags of its own (beyond the service options of config.ts), and what it runs.
//
// A command file keeps its module imports light and loads what it runs inside `run` (a dynamic
// import of the operations or of the app), so `posthorn help` and `--version` load only the table
// and answer at once (docs/architecture.md, "Command line").
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
  /** what `posthorn help <command>` prints under the usage lines */
  readonly description?: string;
  /** flags this command reads besides the service options (json, name, ...) */
  readonly flags?: readonly string[];
  run(input: CommandInput): Promise<number>;
}

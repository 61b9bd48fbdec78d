// What a command of the command line is: its name, the lines of usage it adds to `posthorn help`,
// the words and flags it takes beyond the service options of config.ts, and what it runs.
//
// A command file keeps its module imports light and loads what it runs inside `run` (a dynamic
// import of the operations or of the app), so `posthorn help` and `--version` load only the table
// and answer at once (docs/architecture.md, "Command line").
//
// The words and flags are declared, not read as `run` goes: cli/command-args.ts checks them all
// before `run` is called, so a mistyped command is refused (exit 2) before anything is opened or
// created (docs/cli.md, "Exit codes").
import type { Config } from '../config.ts';

export class UsageError extends Error {}

/**
 * The flags of a command, as its declaration converted them (cli/command-args.ts), read by their
 * kind. Reading a flag the command does not declare, or as another kind, is a defect of the command.
 */
export interface CommandFlags {
  /** a switch: true when given (and not --x false) */
  bool(name: string): boolean;
  text(name: string): string | undefined;
  /** a text flag the command `needs`: given, since that was checked before the command ran */
  needText(name: string): string;
  int(name: string, fallback: number): number;
  /** a list: every value given, split at commas; empty when not given */
  list(name: string): string[];
  object(name: string): Record<string, unknown> | undefined;
  /** a time flag, as milliseconds since the epoch */
  time(name: string): number | undefined;
}

export interface CommandInput {
  config: Readonly<Config>;
  /** positional words after the command name (the subcommand first, for a command that has them) */
  args: string[];
  /** the command's own flags, converted and checked as declared */
  flags: CommandFlags;
}

/**
 * A value given, or a function that loads the module that knows it (a dynamic import), so that the
 * table stays light: flags are checked when their command runs, never for `posthorn help`.
 */
export type Known<T> = T | (() => Promise<T>);

/** How a flag of a command's own is read and checked (cli/command-args.ts). */
export type FlagSpec =
  /** --json: on when given bare (or with a value of true/false, yes/no, 1/0) */
  | { readonly kind: 'switch' }
  /**
   * the last value given; `oneOf` the words accepted; `check` its problem as the end of
   * "--flag <problem>", or null when it is fine
   */
  | { readonly kind: 'text'; readonly oneOf?: Known<readonly string[]>; readonly check?: (value: string) => string | null }
  /** a whole number from min to max */
  | { readonly kind: 'int'; readonly min: number; readonly max: Known<number> }
  /** repeatable, each value comma-separated: the words in order, blanks dropped; `oneOf` the words accepted */
  | { readonly kind: 'list'; readonly oneOf?: Known<readonly string[]> }
  /** a JSON object */
  | { readonly kind: 'json-object' }
  /** a date or a date and time, as milliseconds since the epoch */
  | { readonly kind: 'time' };

/** What one command (or one subcommand) needs besides its flags' kinds. */
export interface CommandShape {
  /**
   * The positional words, named as the usage line names them: `UID` one word, `[UID]` an optional
   * one, `FILE...` one or more. No more words are taken than these name.
   */
  readonly args?: readonly string[];
  /** flags it cannot do without; a list of names means one of them */
  readonly needs?: ReadonlyArray<string | readonly string[]>;
}

export interface CliCommand extends CommandShape {
  readonly name: string;
  /** help lines, without the leading "posthorn " */
  readonly usage: readonly string[];
  /** what `posthorn help <command>` prints under the usage lines */
  readonly description?: string;
  /** flags this command reads besides the service options (json, name, ...), by name */
  readonly flags?: Readonly<Record<string, FlagSpec>>;
  /** a command of subcommands (`project create`, `project list`): each word with its own shape */
  readonly subcommands?: Readonly<Record<string, CommandShape>>;
  run(input: CommandInput): Promise<number>;
}

/** The flag kinds most commands declare. */
export const SWITCH: FlagSpec = { kind: 'switch' };
export const TEXT: FlagSpec = { kind: 'text' };
/** A name the command stores (--name): not blank, which the operation would refuse only once the database is open. */
export const NAME: FlagSpec = { kind: 'text', check: (value) => (value.trim() === '' ? 'must not be empty' : null) };

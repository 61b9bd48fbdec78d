// A command's own words and flags, checked before the command runs (docs/cli.md, "Exit codes"):
// the subcommand, the positional words its usage line names, the flags it cannot do without, and
// every flag given converted as its kind says and checked. A mistake is a UsageError (exit 2)
// naming it and quoting the usage line, raised before `run` opens (or creates) a database or acts
// in any other way; as config.ts checks the service options for every command before anything
// starts (docs/configuration.md, "Validation").
//
// Keep this module light: main.ts loads it with the command table.
import { UsageError, type CliCommand, type CommandFlags, type CommandShape, type FlagSpec, type Known } from './types.ts';

type FlagValue = boolean | string | number | string[] | Record<string, unknown>;

class DeclaredFlags implements CommandFlags {
  constructor(
    private readonly specs: Readonly<Record<string, FlagSpec>>,
    private readonly values: ReadonlyMap<string, FlagValue>,
  ) {}

  /** A declared flag's value, or undefined when not given. Reading one of another kind is a defect of the command. */
  private read(name: string, kind: FlagSpec['kind']): FlagValue | undefined {
    const spec = this.specs[name];
    if (spec?.kind !== kind) throw new Error(`the command reads --${name} as ${kind}, but declares it ${spec ? `as ${spec.kind}` : 'not at all'}`);
    return this.values.get(name);
  }

  bool(name: string): boolean {
    return this.read(name, 'switch') === true;
  }

  text(name: string): string | undefined {
    return this.read(name, 'text') as string | undefined;
  }

  needText(name: string): string {
    const value = this.text(name);
    if (value === undefined) throw new Error(`--${name} is read as needed, but the command does not declare that it needs it`);
    return value;
  }

  int(name: string, fallback: number): number {
    return (this.read(name, 'int') as number | undefined) ?? fallback;
  }

  list(name: string): string[] {
    return (this.read(name, 'list') as string[] | undefined) ?? [];
  }

  object(name: string): Record<string, unknown> | undefined {
    return this.read(name, 'json-object') as Record<string, unknown> | undefined;
  }

  time(name: string): number | undefined {
    return this.read(name, 'time') as number | undefined;
  }
}

/**
 * The usage of a command or of one of its subcommands, without its description: its line, or its
 * own part of a line that gives several (`account disable UID | account enable UID`).
 */
function usageOf(command: CliCommand, sub: string | undefined): string {
  const words = sub === undefined ? command.name : `${command.name} ${sub}`;
  const forms = command.usage.flatMap((line) => line.split(/\s{3,}/)[0].split(` | ${command.name} `).map((f, i) => (i === 0 ? f : `${command.name} ${f}`)));
  const form = forms.find((f) => f === words || f.startsWith(`${words} `)) ?? command.usage[0].split(/\s{3,}/)[0];
  return `posthorn ${form}`;
}

async function known<T>(value: Known<T>): Promise<T> {
  return typeof value === 'function' ? (value as () => Promise<T>)() : value;
}

async function convert(name: string, spec: FlagSpec, raw: readonly string[]): Promise<FlagValue> {
  const last = raw[raw.length - 1];
  const label = `--${name}`;
  switch (spec.kind) {
    case 'switch':
      if (/^(1|true|yes|on)$/i.test(last)) return true;
      if (/^(0|false|no|off)$/i.test(last)) return false;
      throw new UsageError(`${label} takes no value, got "${last}" (a word after ${label} is read as its value: put it before the flag)`);
    case 'text': {
      const oneOf = spec.oneOf && (await known(spec.oneOf));
      if (oneOf && !oneOf.includes(last)) throw new UsageError(`${label} must be one of ${oneOf.join(', ')}, got "${last}"`);
      const problem = spec.check?.(last);
      if (problem) throw new UsageError(`${label} ${problem}`);
      return last;
    }
    case 'int': {
      const max = await known(spec.max);
      const n = /^\d+$/.test(last.trim()) ? Number(last.trim()) : NaN;
      if (!(n >= spec.min && n <= max)) throw new UsageError(`${label} expects a whole number from ${spec.min} to ${max}, got "${last}"`);
      return n;
    }
    case 'list': {
      const values = raw.flatMap((r) => r.split(',')).map((s) => s.trim()).filter(Boolean);
      const oneOf = spec.oneOf && (await known(spec.oneOf));
      const unknown = oneOf && values.find((v) => !oneOf.includes(v));
      if (unknown !== undefined) throw new UsageError(`${label} takes ${oneOf!.join(', ')} (separated by commas), got "${unknown}"`);
      return values;
    }
    case 'json-object': {
      let value: unknown;
      try {
        value = JSON.parse(last);
      } catch {
        // reported below
      }
      if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new UsageError(`${label} expects a JSON object, like {"name":"Ada"}`);
      return value as Record<string, unknown>;
    }
    case 'time': {
      const ms = Date.parse(last);
      if (Number.isNaN(ms)) throw new UsageError(`${label} expects a date, like 2026-11-24 or 2026-11-24T10:00:00Z, got "${last}"`);
      return ms;
    }
  }
}

/** The words a shape names against the words given: missing ones and extra ones are usage errors. */
function checkWords(what: string, shape: CommandShape, words: readonly string[], usage: string): void {
  const names = shape.args ?? [];
  let taken = 0;
  for (const name of names) {
    const optional = name.startsWith('[');
    const many = name.endsWith('...') || name.endsWith('...]');
    if (!optional && taken >= words.length) throw new UsageError(`${what} needs ${name.replace(/\.\.\.$/, '')} (usage: ${usage})`);
    taken = many ? words.length : Math.min(words.length, taken + 1);
  }
  if (taken < words.length) {
    const takes = names.length === 0 ? '' : ` (it takes ${names.join(' ')})`;
    throw new UsageError(`${what} does not take "${words[taken]}"${takes}; a value with spaces goes in quotes (usage: ${usage})`);
  }
}

/** A needed flag given blank (--name "", --to ",") is not given. */
function isGiven(value: FlagValue | undefined): boolean {
  if (typeof value === 'string') return value.trim() !== '';
  if (Array.isArray(value)) return value.length > 0;
  return value !== undefined;
}

/**
 * Checks what a command was given against its declaration and converts its flags; throws
 * UsageError naming the first mistake. `words` are the positional words after the command name,
 * `raw` the flags as parsed from argv (the unknown ones are refused by config.ts parseConfig),
 * `bare` those given without a value (`--name` as the last word reads "true": not a name).
 */
export async function parseCommandArgs(command: CliCommand, words: readonly string[], raw: ReadonlyMap<string, string[]>, bare: ReadonlySet<string> = new Set()): Promise<CommandFlags> {
  const specs = command.flags ?? {};
  let shape: CommandShape = command;
  let what = command.name;
  let sub: string | undefined;
  if (command.subcommands) {
    sub = words[0];
    const names = Object.keys(command.subcommands);
    if (sub === undefined || !Object.hasOwn(command.subcommands, sub)) {
      const said = sub === undefined ? 'needs' : `has no subcommand "${sub}": it takes`;
      throw new UsageError(`${command.name} ${said} one of ${names.join(', ')} (posthorn help ${command.name})`);
    }
    shape = command.subcommands[sub];
    what = `${command.name} ${sub}`;
  }
  const usage = usageOf(command, sub);
  checkWords(what, shape, sub === undefined ? words : words.slice(1), usage);
  const values = new Map<string, FlagValue>();
  for (const [name, given] of raw) {
    const spec = Object.hasOwn(specs, name) ? specs[name] : undefined;
    if (!spec) continue;
    if (spec.kind !== 'switch' && bare.has(name)) throw new UsageError(`--${name} needs a value (usage: ${usage})`);
    values.set(name, await convert(name, spec, given));
  }
  for (const need of shape.needs ?? []) {
    const oneOf = typeof need === 'string' ? [need] : need;
    if (!oneOf.some((name) => isGiven(values.get(name)))) throw new UsageError(`${what} needs ${oneOf.map((n) => `--${n}`).join(' or ')} (usage: ${usage})`);
  }
  return new DeclaredFlags(specs, values);
}

/**
 * The end of a command's switch over its subcommands: parseCommandArgs lets no word through that
 * the command does not declare, so reaching this is a subcommand declared but not handled.
 */
export function unhandled(sub: string | undefined): never {
  throw new Error(`the subcommand "${sub}" is declared but not handled`);
}

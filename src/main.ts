// CLI entry: parses argv and hands over to a command of cli/. Returns the process exit code.
//
// Every failure is one line on stderr, `posthorn: <what and how to fix>` (src/cli/failures.ts),
// with the stack only at --log-level debug or trace: a usage or configuration mistake exits 2,
// anything that stops a command exits 1. Help and --version load only the command table.
import fs from 'node:fs';
import { ConfigError, describeOptions, parseArgv, parseConfig, type Config } from './config.ts';
import { parseCommandArgs } from './cli/command-args.ts';
import { describeFailure, wantsStack } from './cli/failures.ts';
import { ALL_COMMANDS, COMMANDS } from './cli/index.ts';
import { UsageError, type CliCommand } from './cli/types.ts';

export function printHelp(out: NodeJS.WritableStream = process.stdout): void {
  const usage = ALL_COMMANDS.flatMap((c) => c.usage).map((line) => `  ${line}`).join('\n');
  out.write(`usage: posthorn <command> [options]

commands:
${usage}
  help [COMMAND]                print this help, or a command's
  --version                     print the version

options (each also an environment variable):
${describeOptions()}
`);
}

function printCommandHelp(command: CliCommand): void {
  const usage = command.usage.map((line) => `  posthorn ${line}`).join('\n');
  const own = command.flags ? `\nflags of its own: ${Object.keys(command.flags).map((f) => `--${f}`).join(', ')}\n` : '';
  const description = command.description ? `\n${wrap(command.description, 100)}\n` : '';
  process.stdout.write(`usage:\n${usage}\n${description}${own}\nand the service options of: posthorn help\n`);
}

function wrap(text: string, width: number): string {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(/\s+/)) {
    if (line && line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else line = line ? `${line} ${word}` : word;
  }
  if (line) lines.push(line);
  return lines.join('\n');
}

export function version(): string {
  // package.json is one level above this module both in src/ and in the compiled dist/.
  const pkg = JSON.parse(fs.readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string };
  return pkg.version;
}

/**
 * -h and -V/-v as their long forms (not where they are the value of a preceding --flag), and
 * --help/--version as flags without a value, so `posthorn --help serve` asks about serve.
 */
function expandShortFlags(argv: readonly string[]): string[] {
  return argv.map((word, i) => {
    const previous = argv[i - 1];
    const isValue = previous !== undefined && previous.startsWith('--') && !previous.includes('=') && previous !== '--help' && previous !== '--version';
    if (isValue) return word;
    if (word === '-h' || word === '--help') return '--help=true';
    if (word === '-V' || word === '-v' || word === '--version') return '--version=true';
    return word;
  });
}

export async function main(argv: string[]): Promise<number> {
  const { positional, flags, bare } = parseArgv(expandShortFlags(argv));
  const [command, ...rest] = positional;
  if (flags.has('version') || command === 'version') {
    process.stdout.write(`posthorn ${version()}\n`);
    return 0;
  }
  if (command === 'help' || (flags.has('help') && command === undefined)) {
    const topic = command === 'help' ? rest[0] : undefined;
    if (topic === undefined) {
      printHelp();
      return 0;
    }
    const cli = COMMANDS.get(topic);
    if (!cli) {
      process.stderr.write(`posthorn: unknown command "${topic}" (the commands are listed by: posthorn help)\n`);
      return 2;
    }
    printCommandHelp(cli);
    return 0;
  }
  if (!command) {
    printHelp(process.stderr);
    return 1;
  }
  const cli = COMMANDS.get(command);
  if (!cli) {
    process.stderr.write(`posthorn: unknown command "${command}" (the commands are listed by: posthorn help)\n`);
    return 2;
  }
  if (flags.has('help')) {
    printCommandHelp(cli);
    return 0;
  }
  let config: Readonly<Config> | null = null;
  try {
    config = parseConfig(flags, process.env, new Set(Object.keys(cli.flags ?? {})), bare);
    // The command's own words and flags, checked before it runs: a usage error does nothing (docs/cli.md).
    const commandFlags = await parseCommandArgs(cli, rest, flags, bare);
    return await cli.run({ config, args: rest, flags: commandFlags });
  } catch (error) {
    if (error instanceof ConfigError || error instanceof UsageError) {
      process.stderr.write(`posthorn: ${error.message}\n`);
      return 2;
    }
    process.stderr.write(`posthorn: ${describeFailure(error, config)}\n`);
    if (wantsStack(config)) process.stderr.write(`${(error as Error)?.stack ?? String(error)}\n`);
    return 1;
  }
}

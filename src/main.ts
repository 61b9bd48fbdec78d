// CLI entry: parses argv and hands over to a command of cli/. Returns the process exit code.
import { ConfigError, describeOptions, parseArgv, parseConfig } from './config.ts';
import { ALL_COMMANDS, COMMANDS } from './cli/index.ts';
import { UsageError } from './cli/types.ts';

export function printHelp(): void {
  const usage = ALL_COMMANDS.flatMap((c) => c.usage).map((line) => `  ${line}`).join('\n');
  process.stdout.write(`usage: posthorn <command> [options]

commands:
${usage}

options (each also an environment variable):
${describeOptions()}
`);
}

export async function main(argv: string[]): Promise<number> {
  const { positional, flags } = parseArgv(argv);
  const [command, ...rest] = positional;
  if (!command || command === 'help' || flags.has('help')) {
    printHelp();
    return command || flags.has('help') ? 0 : 1;
  }
  const cli = COMMANDS.get(command);
  if (!cli) {
    process.stderr.write(`posthorn: unknown command "${command}"\n`);
    printHelp();
    return 2;
  }
  try {
    const config = parseConfig(flags, process.env, new Set([...(cli.flags ?? []), 'help']));
    return await cli.run({ config, args: rest, flags });
  } catch (error) {
    if (error instanceof ConfigError || error instanceof UsageError) {
      process.stderr.write(`posthorn: ${error.message}\n`);
      return 2;
    }
    throw error;
  }
}

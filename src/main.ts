// CLI entry: parses argv and hands over to a command in cli/. Returns the process exit code.
import { ConfigError, parseArgv, parseConfig } from './config.ts';
import { COMMANDS, printHelp, UsageError } from './cli/commands.ts';

export async function main(argv: string[]): Promise<number> {
  const { positional, flags } = parseArgv(argv);
  const [command, ...rest] = positional;
  if (!command || command === 'help' || flags.has('help')) {
    printHelp();
    return command || flags.has('help') ? 0 : 1;
  }
  const run = COMMANDS[command];
  if (!run) {
    process.stderr.write(`posthorn: unknown command "${command}"\n`);
    printHelp();
    return 2;
  }
  try {
    const config = parseConfig(flags);
    return await run({ config, args: rest, flags });
  } catch (error) {
    if (error instanceof ConfigError || error instanceof UsageError) {
      process.stderr.write(`posthorn: ${error.message}\n`);
      return 2;
    }
    throw error;
  }
}

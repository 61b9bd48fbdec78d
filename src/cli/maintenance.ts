// purge and backup (docs/operations.md): the retention purge run by hand, and a consistent online
// copy of the SQLite database. Both report progress on stderr (stdout keeps the result, JSON with
// --json), so a script can read the result while a person watches the progress.
import { print, withExistingServices, withServices } from './output.ts';
import { SWITCH, TEXT, UsageError, type CliCommand, type CommandInput } from './types.ts';

function progressLine(text: string): void {
  process.stderr.write(process.stderr.isTTY ? `\r${text}\u001b[K` : `${text}\n`);
}

async function purge({ config, flags }: CommandInput): Promise<number> {
  const json = flags.bool('json');
  const quiet = flags.bool('quiet');
  const batchSize = flags.int('batch', 200);
  const { purgeExpired } = await import('../operations/retention.ts');
  return withServices(config, async (services) => {
    let batches = 0;
    const totals = await purgeExpired(services, {
      batchSize,
      onProgress: (t) => {
        batches++;
        if (!quiet) progressLine(`purged ${t.messages} messages, ${t.transmissions} transmissions, ${t.attempts} attempts, ${t.events} events, ${t.outbound_requests} outbound requests`);
      },
    });
    if (!quiet && batches > 0 && process.stderr.isTTY) process.stderr.write('\n');
    print(
      json,
      totals,
      `purged: ${totals.messages} messages, ${totals.transmissions} transmissions, ${totals.attempts} attempts, ${totals.events} events, ${totals.outbound_requests} outbound requests (${totals.outbound_attempts} attempts)`,
    );
    return 0;
  });
}

async function backup({ config, args, flags }: CommandInput): Promise<number> {
  const json = flags.bool('json');
  const quiet = flags.bool('quiet');
  // FILE, or --file FILE: one of them, checked before anything is opened.
  const target = args[0] ?? flags.text('file');
  if (!target) throw new UsageError('backup needs the FILE to write (usage: posthorn backup FILE)');
  const { backupDatabase, BackupUnsupportedError } = await import('../operations/backup.ts');
  // Never creates a database only to copy it: a wrong --data is an error, not an empty backup.
  const absent = (): number => {
    process.stderr.write(`posthorn: no database at ${config.data} (set --data or DATABASE_URL as the service does)\n`);
    return 1;
  };
  return withExistingServices(config, async (services) => {
    let lastPercent = -1;
    try {
      const result = await backupDatabase(services, target, ({ totalPages, remainingPages }) => {
        const percent = totalPages === 0 ? 100 : Math.floor(((totalPages - remainingPages) / totalPages) * 100);
        if (percent !== lastPercent && !quiet) progressLine(`backup: ${percent}% (${totalPages - remainingPages}/${totalPages} pages)`);
        lastPercent = percent;
      });
      if (!quiet && process.stderr.isTTY) process.stderr.write('\n');
      print(json, { file: result.file, bytes: result.bytes, pages: result.pages, duration_ms: result.durationMs }, `backup written to ${result.file} (${result.bytes} bytes, ${result.durationMs} ms)`);
      return 0;
    } catch (error) {
      if (error instanceof BackupUnsupportedError) {
        process.stderr.write(`posthorn: ${error.message}\n`);
        return 2;
      }
      throw error;
    }
  }, absent);
}

export const maintenanceCommands: CliCommand[] = [
  {
    name: 'purge',
    usage: ['purge [--batch N] [--quiet] [--json]       delete what is past its retention now (the worker role does it hourly)'],
    description: 'Deletes messages, their transmissions, attempts, events and outbound requests older than their project\'s retention (--retention-days, or the project\'s retention_days), in small batches that never stall a running service.',
    flags: { json: SWITCH, batch: { kind: 'int', min: 1, max: 10_000 }, quiet: SWITCH },
    run: purge,
  },
  {
    name: 'backup',
    usage: ['backup FILE [--quiet] [--json]            consistent copy of the SQLite database, safe while serving'],
    description: 'Copies the SQLite database with SQLite\'s online backup API while the service runs; progress on stderr. Restore: stop the service, put FILE in place of <data>/posthorn.db (remove posthorn.db-wal and -shm), start it (docs/operations.md). PostgreSQL: pg_dump / pg_restore.',
    flags: { json: SWITCH, file: TEXT, quiet: SWITCH },
    args: ['[FILE]'],
    run: backup,
  },
];

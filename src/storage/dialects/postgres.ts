// PostgreSQL dialect: implemented in issue 4.
import type { StoreDialect } from '../dialect.ts';

export async function openPostgres(_url: string, _opts: { poolSize: number }): Promise<StoreDialect> {
  throw new Error('PostgreSQL support is not built yet (issue 4); use the SQLite default');
}

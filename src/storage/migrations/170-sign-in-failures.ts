// The dashboard's sign-in throttle in the database (docs/dashboard.md): failures counted per key
// (a client address or an email, each stored as an HMAC under a key derived from the secret key,
// never in clear) in a fixed window, so that every API process of a service, on one machine or
// many, counts the same failures and a restart forgets none. Rows older than a window are removed
// at each failure.
import type { Kysely } from 'kysely';
import type { StoreDialect } from '../dialect.ts';

export async function up(db: Kysely<any>, d: StoreDialect): Promise<void> {
  await db.schema
    .createTable('sign_in_failures')
    .addColumn('key', 'text', (c) => c.primaryKey())
    .addColumn('count', 'integer', (c) => c.notNull())
    .addColumn('since', d.bigintType, (c) => c.notNull())
    .execute();
  await db.schema.createIndex('sign_in_failures_since').on('sign_in_failures').column('since').execute();
}

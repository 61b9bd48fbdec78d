// The dashboard's one-time form tokens (docs/dashboard.md, "Forms"): each form a page renders
// carries a token of its own, signed by the service (nothing is written when a page is shown); the
// first submission that carries it records its nonce here, so the same submission sent again (a
// reload of the page a POST answered, Back/Forward, a double click) is recognised in every API
// process of the service. A row is kept as long as its token could be accepted (expires_at), and
// rows past that are removed at each submission.
import type { Kysely } from 'kysely';
import type { StoreDialect } from '../dialect.ts';

export async function up(db: Kysely<any>, d: StoreDialect): Promise<void> {
  await db.schema
    .createTable('dashboard_form_uses')
    .addColumn('nonce', 'text', (c) => c.primaryKey())
    .addColumn('expires_at', d.bigintType, (c) => c.notNull())
    .execute();
  await db.schema.createIndex('dashboard_form_uses_expires').on('dashboard_form_uses').column('expires_at').execute();
}

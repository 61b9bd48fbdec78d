// Soft-bounce counters (docs/domains-and-bounces.md): soft failures of an address are counted here until they reach
// the threshold that puts it on the suppression list as a `warning` (storage/suppressions.ts).
// Kept apart from `suppressions` so that the suppression list holds only real entries.
import type { Kysely } from 'kysely';
import type { StoreDialect } from '../dialect.ts';

export async function up(db: Kysely<any>, d: StoreDialect): Promise<void> {
  const big = d.bigintType;
  await d
    .addIdColumn(db.schema.createTable('soft_bounces'))
    .addColumn('project_id', big, (c) => c.notNull().references('projects.id'))
    .addColumn('address', 'text', (c) => c.notNull())
    .addColumn('failures', 'integer', (c) => c.notNull())
    .addColumn('first_failure_at', big, (c) => c.notNull())
    .addColumn('last_failure_at', big, (c) => c.notNull())
    .addColumn('last_transmission_id', big)
    .addUniqueConstraint('soft_bounces_project_address', ['project_id', 'address'])
    .execute();
}

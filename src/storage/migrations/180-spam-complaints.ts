// A recipient's spam complaint about a delivered transmission (the sandbox's complaint address,
// docs/sandbox.md): spammed_at is when it was reported, the timestamp get_metrics' `spammed`
// counts by, with a partial index as the other report timestamps have (070): a transmission
// without a complaint, nearly all of them, pays nothing for it.
import { sql, type Kysely } from 'kysely';
import type { StoreDialect } from '../dialect.ts';

export async function up(db: Kysely<any>, d: StoreDialect): Promise<void> {
  await db.schema.alterTable('transmissions').addColumn('spammed_at', d.bigintType).execute();
  await db.schema
    .createIndex('transmissions_project_spammed')
    .on('transmissions')
    .columns(['project_id', 'spammed_at'])
    .where(sql<boolean>`spammed_at is not null`)
    .execute();
}

// A dense per-project sequence over transmissions, so that messages_history page N is a seek
// (docs/decisions/0003-performance.md, "History paging"). history_seq numbers one project's
// transmissions 1, 2, 3... in the order they were numbered; a row is written with NULL and
// numbered by the first history request that sees it (storage/reports.ts numberNewTransmissions),
// so ingest pays nothing for it but one entry in a small partial index.
//
// Invariants: within a project the numbers are unique and gapless from the lowest kept row up
// (rows are only ever deleted oldest first, by retention); numbering is serialized per project.
import { sql, type Kysely } from 'kysely';
import type { StoreDialect } from '../dialect.ts';

export async function up(db: Kysely<any>, d: StoreDialect): Promise<void> {
  await db.schema.alterTable('transmissions').addColumn('history_seq', d.bigintType).execute();
  // Existing rows: numbered per project in id order (write order), as the service would have.
  await sql`UPDATE transmissions SET history_seq = n.seq
    FROM (SELECT id, row_number() OVER (PARTITION BY project_id ORDER BY id) AS seq FROM transmissions) AS n
    WHERE transmissions.id = n.id`.execute(db);
  // The listing: newest first is a descending walk from the project's highest number; page N
  // starts at (highest - offset). Covering for the ids and the date guard.
  await db.schema
    .createIndex('transmissions_project_history_seq')
    .on('transmissions')
    .columns(['project_id', 'history_seq', 'created_at'])
    .where(sql<boolean>`history_seq IS NOT NULL`)
    .execute();
  // The rows still to number: only those written since the last history request of their project.
  await db.schema
    .createIndex('transmissions_history_unnumbered')
    .on('transmissions')
    .columns(['project_id', 'id'])
    .where(sql<boolean>`history_seq IS NULL`)
    .execute();
}

// Indexes of the report methods (get_metrics): one per timestamp a metric counts by, each partial
// on the timestamp being set. A queued transmission is inserted with all four NULL, so ingest (the
// hot path) pays nothing for them; delivery adds one small entry when it completes or fails a row.
// Copies completed at acceptance (null.postageapp.com, deliver: false) pay one entry then.
// Without them a get_metrics call scans every transmission of the project.
import { sql, type Kysely } from 'kysely';
import type { StoreDialect } from '../dialect.ts';

export async function up(db: Kysely<any>, _d: StoreDialect): Promise<void> {
  await db.schema
    .createIndex('transmissions_project_completed')
    .on('transmissions')
    .columns(['project_id', 'completed_at'])
    .where(sql<boolean>`completed_at is not null`)
    .execute();
  // result_code rides along so "rejected" (failed as SUPPRESSED) is counted from the index alone.
  await db.schema
    .createIndex('transmissions_project_failed')
    .on('transmissions')
    .columns(['project_id', 'failed_at', 'result_code'])
    .where(sql<boolean>`failed_at is not null`)
    .execute();
  await db.schema
    .createIndex('transmissions_project_opened')
    .on('transmissions')
    .columns(['project_id', 'opened_at'])
    .where(sql<boolean>`opened_at is not null`)
    .execute();
  await db.schema
    .createIndex('transmissions_project_clicked')
    .on('transmissions')
    .columns(['project_id', 'clicked_at'])
    .where(sql<boolean>`clicked_at is not null`)
    .execute();
}

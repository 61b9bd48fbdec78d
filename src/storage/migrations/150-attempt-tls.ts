// Whether an attempt's SMTP session used TLS (implicit or STARTTLS), shown on the dashboard's
// message timeline (docs/dashboard.md): 1 yes, 0 no, null unknown (no session was set up: a local
// outcome such as a suppression, the sandbox, or a connection that failed; and rows written before).
import type { Kysely } from 'kysely';
import type { StoreDialect } from '../dialect.ts';

export async function up(db: Kysely<any>, _d: StoreDialect): Promise<void> {
  await db.schema.alterTable('attempts').addColumn('tls', 'integer').execute();
}

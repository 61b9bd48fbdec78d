// The dashboard's sign-in (docs/dashboard.md): users with a memory-hard password hash, belonging to
// an account and optionally scoped to one project; server-side sessions (only a hash of the cookie
// token is stored); and an index of the event outbox by project and time, which the overview
// charts (deferred, bounced) and a message's webhook deliveries read.
import type { Kysely } from 'kysely';
import type { StoreDialect } from '../dialect.ts';

export async function up(db: Kysely<any>, d: StoreDialect): Promise<void> {
  const big = d.bigintType;

  await d
    .addIdColumn(db.schema.createTable('dashboard_users'))
    .addColumn('account_id', big, (c) => c.notNull().references('accounts.id'))
    .addColumn('project_id', big, (c) => c.references('projects.id'))
    .addColumn('email', 'text', (c) => c.notNull().unique())
    .addColumn('password_hash', 'text', (c) => c.notNull())
    .addColumn('created_at', big, (c) => c.notNull())
    .addColumn('updated_at', big, (c) => c.notNull())
    .addColumn('signed_in_at', big)
    .execute();

  await d
    .addIdColumn(db.schema.createTable('dashboard_sessions'))
    .addColumn('user_id', big, (c) => c.notNull().references('dashboard_users.id'))
    .addColumn('token_hash', 'text', (c) => c.notNull().unique())
    .addColumn('csrf_token', 'text', (c) => c.notNull())
    .addColumn('created_at', big, (c) => c.notNull())
    .addColumn('expires_at', big, (c) => c.notNull())
    .execute();
  await db.schema.createIndex('dashboard_sessions_user').on('dashboard_sessions').columns(['user_id']).execute();

  await db.schema.createIndex('events_project_created').on('events').columns(['project_id', 'created_at']).execute();
}

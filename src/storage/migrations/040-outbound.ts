// Talking back to the application (docs/webhooks.md, docs/mailboxes.md): the outbound request queue shared by webhooks and
// mailbox postbacks, its attempts, webhook endpoints, inbound emails, and the per-event marker the
// webhook fan-out progresses by.
import { sql, type Kysely } from 'kysely';
import type { StoreDialect } from '../dialect.ts';

export async function up(db: Kysely<any>, d: StoreDialect): Promise<void> {
  const big = d.bigintType;

  await d
    .addIdColumn(db.schema.createTable('webhooks'))
    .addColumn('account_id', big, (c) => c.notNull().references('accounts.id'))
    .addColumn('project_id', big, (c) => c.references('projects.id'))
    .addColumn('uid', 'text', (c) => c.notNull())
    .addColumn('url', 'text', (c) => c.notNull())
    .addColumn('events', 'text', (c) => c.notNull())
    .addColumn('secret', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull().defaultTo('active'))
    .addColumn('created_at', big, (c) => c.notNull())
    .addColumn('updated_at', big, (c) => c.notNull())
    .addUniqueConstraint('webhooks_account_uid', ['account_id', 'uid'])
    .execute();

  await d
    .addIdColumn(db.schema.createTable('outbound_requests'))
    .addColumn('account_id', big, (c) => c.notNull())
    .addColumn('project_id', big)
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('webhook_id', big)
    .addColumn('event_id', big)
    .addColumn('event_type', 'text')
    .addColumn('url', 'text', (c) => c.notNull())
    .addColumn('headers', 'text', (c) => c.notNull())
    .addColumn('ref', 'text')
    .addColumn('state', 'text', (c) => c.notNull())
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('next_attempt_at', big, (c) => c.notNull())
    .addColumn('locked_by', 'text')
    .addColumn('locked_until', big)
    .addColumn('last_status_code', 'integer')
    .addColumn('last_error', 'text')
    .addColumn('created_at', big, (c) => c.notNull())
    .addColumn('updated_at', big, (c) => c.notNull())
    .addColumn('delivered_at', big)
    .addColumn('failed_at', big)
    // Kept last: listings never read it.
    .addColumn('body', 'text', (c) => c.notNull())
    .execute();
  // The dispatch queue: only pending rows are indexed, so it stays small however much history
  // accumulates. A claimed row's next_attempt_at is its lease expiry, so one range covers both.
  await db.schema
    .createIndex('outbound_requests_due')
    .on('outbound_requests')
    .columns(['next_attempt_at', 'id'])
    .where(sql<boolean>`state = 'pending'`)
    .execute();
  await db.schema.createIndex('outbound_requests_webhook').on('outbound_requests').columns(['webhook_id', 'state', 'id']).execute();
  await db.schema.createIndex('outbound_requests_account').on('outbound_requests').columns(['account_id', 'state', 'id']).execute();

  await d
    .addIdColumn(db.schema.createTable('outbound_attempts'))
    .addColumn('request_id', big, (c) => c.notNull())
    .addColumn('started_at', big, (c) => c.notNull())
    .addColumn('duration_ms', 'integer', (c) => c.notNull())
    .addColumn('status_code', 'integer')
    .addColumn('error', 'text')
    .addColumn('worker', 'text')
    .execute();
  await db.schema.createIndex('outbound_attempts_request').on('outbound_attempts').columns(['request_id']).execute();

  await d
    .addIdColumn(db.schema.createTable('inbound_emails'))
    .addColumn('mailbox_id', big, (c) => c.notNull())
    .addColumn('uid_validity', 'text', (c) => c.notNull())
    .addColumn('imap_uid', big, (c) => c.notNull())
    .addColumn('message_id', 'text')
    .addColumn('size', 'integer', (c) => c.notNull())
    .addColumn('outbound_id', big, (c) => c.notNull())
    .addColumn('state', 'text', (c) => c.notNull())
    .addColumn('created_at', big, (c) => c.notNull())
    .addColumn('updated_at', big, (c) => c.notNull())
    .addUniqueConstraint('inbound_emails_mailbox_uid', ['mailbox_id', 'uid_validity', 'imap_uid'])
    .execute();
  await db.schema
    .createIndex('inbound_emails_posting')
    .on('inbound_emails')
    .columns(['mailbox_id', 'id'])
    .where(sql<boolean>`state = 'posting'`)
    .execute();

  // The fan-out marker: delivery inserts events with dispatched_at null (its insert is unchanged);
  // the dispatcher stamps them as it turns them into outbound requests. A marker rather than an id
  // cursor because PostgreSQL sequences commit out of order: a cursor could skip a late commit.
  await db.schema.alterTable('events').addColumn('dispatched_at', big).execute();
  await db.schema
    .createIndex('events_undispatched')
    .on('events')
    .columns(['id'])
    .where(sql<boolean>`dispatched_at is null`)
    .execute();
}

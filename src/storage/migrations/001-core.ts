// The core schema: accounts, keys, projects, templates, messages, transmissions (the delivery
// queue), attempts, suppressions, domains, mailboxes and the event outbox.
import { sql, type Kysely } from 'kysely';
import type { StoreDialect } from '../dialect.ts';

export async function up(db: Kysely<any>, d: StoreDialect): Promise<void> {
  const big = d.bigintType;

  await d
    .addIdColumn(db.schema.createTable('accounts'))
    .addColumn('uid', 'text', (c) => c.notNull().unique())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull().defaultTo('active'))
    .addColumn('settings', 'text', (c) => c.notNull().defaultTo('{}'))
    .addColumn('created_at', big, (c) => c.notNull())
    .addColumn('updated_at', big, (c) => c.notNull())
    .execute();

  await d
    .addIdColumn(db.schema.createTable('projects'))
    .addColumn('account_id', big, (c) => c.notNull().references('accounts.id'))
    .addColumn('uid', 'text', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull().defaultTo('active'))
    .addColumn('settings', 'text', (c) => c.notNull().defaultTo('{}'))
    .addColumn('created_at', big, (c) => c.notNull())
    .addColumn('updated_at', big, (c) => c.notNull())
    .addUniqueConstraint('projects_account_uid', ['account_id', 'uid'])
    .execute();

  await d
    .addIdColumn(db.schema.createTable('api_keys'))
    .addColumn('account_id', big, (c) => c.notNull().references('accounts.id'))
    .addColumn('project_id', big, (c) => c.references('projects.id'))
    .addColumn('key_hash', 'text', (c) => c.notNull().unique())
    .addColumn('key_prefix', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull().defaultTo('active'))
    .addColumn('created_at', big, (c) => c.notNull())
    .addColumn('revoked_at', big)
    .execute();
  await db.schema.createIndex('api_keys_project').on('api_keys').columns(['project_id']).execute();

  await d
    .addIdColumn(db.schema.createTable('templates'))
    .addColumn('project_id', big, (c) => c.notNull().references('projects.id'))
    .addColumn('slug', 'text', (c) => c.notNull())
    .addColumn('name', 'text')
    .addColumn('subject', 'text')
    .addColumn('from_address', 'text')
    .addColumn('text_body', 'text')
    .addColumn('html_body', 'text')
    .addColumn('css', 'text')
    .addColumn('parent_slug', 'text')
    .addColumn('created_at', big, (c) => c.notNull())
    .addColumn('updated_at', big, (c) => c.notNull())
    .addUniqueConstraint('templates_project_slug', ['project_id', 'slug'])
    .execute();

  await d
    .addIdColumn(db.schema.createTable('messages'))
    .addColumn('project_id', big, (c) => c.notNull().references('projects.id'))
    .addColumn('uid', 'text', (c) => c.notNull())
    .addColumn('unique_id', 'text', (c) => c.notNull())
    .addColumn('template', 'text')
    .addColumn('subject', 'text')
    .addColumn('from_address', 'text')
    .addColumn('recipient_count', 'integer', (c) => c.notNull())
    .addColumn('deliver', 'integer', (c) => c.notNull().defaultTo(1))
    .addColumn('created_at', big, (c) => c.notNull())
    .addColumn('payload', 'text', (c) => c.notNull())
    .addUniqueConstraint('messages_project_uid', ['project_id', 'uid'])
    .execute();
  await db.schema.createIndex('messages_project_created').on('messages').columns(['project_id', 'created_at', 'id']).execute();

  await d
    .addIdColumn(db.schema.createTable('transmissions'))
    .addColumn('message_id', big, (c) => c.notNull().references('messages.id'))
    .addColumn('project_id', big, (c) => c.notNull())
    .addColumn('recipient', 'text', (c) => c.notNull())
    .addColumn('recipient_name', 'text')
    .addColumn('variables', 'text')
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('next_attempt_at', big, (c) => c.notNull())
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('locked_by', 'text')
    .addColumn('locked_until', big)
    .addColumn('created_at', big, (c) => c.notNull())
    .addColumn('updated_at', big, (c) => c.notNull())
    .addColumn('completed_at', big)
    .addColumn('failed_at', big)
    .addColumn('opened_at', big)
    .addColumn('clicked_at', big)
    .addColumn('result_code', 'text')
    .addColumn('result_message', 'text')
    .execute();
  await db.schema.createIndex('transmissions_message').on('transmissions').columns(['message_id']).execute();
  // History listings: one project's transmissions in time order, paged.
  await db.schema.createIndex('transmissions_project_created').on('transmissions').columns(['project_id', 'created_at', 'id']).execute();
  // The delivery queue: only due-able rows are indexed, so the index stays small however much
  // history accumulates.
  await db.schema
    .createIndex('transmissions_due')
    .on('transmissions')
    .columns(['next_attempt_at', 'id'])
    .where(sql<boolean>`status in ('queued', 'retry')`)
    .execute();

  await d
    .addIdColumn(db.schema.createTable('attempts'))
    .addColumn('transmission_id', big, (c) => c.notNull().references('transmissions.id'))
    .addColumn('started_at', big, (c) => c.notNull())
    .addColumn('duration_ms', 'integer', (c) => c.notNull())
    .addColumn('mx_host', 'text')
    .addColumn('outcome', 'text', (c) => c.notNull())
    .addColumn('result_code', 'text')
    .addColumn('result_message', 'text')
    .addColumn('worker', 'text')
    .execute();
  await db.schema.createIndex('attempts_transmission').on('attempts').columns(['transmission_id']).execute();

  await d
    .addIdColumn(db.schema.createTable('suppressions'))
    .addColumn('project_id', big, (c) => c.notNull().references('projects.id'))
    .addColumn('address', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('suppression_state', 'text', (c) => c.notNull())
    .addColumn('blocked_until', big)
    .addColumn('message', 'text')
    .addColumn('soft_failures', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('created_at', big, (c) => c.notNull())
    .addColumn('updated_at', big, (c) => c.notNull())
    .addUniqueConstraint('suppressions_project_address', ['project_id', 'address'])
    .execute();

  await d
    .addIdColumn(db.schema.createTable('domains'))
    .addColumn('account_id', big, (c) => c.notNull().references('accounts.id'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('dkim_selector', 'text', (c) => c.notNull())
    .addColumn('dkim_private_key', 'text', (c) => c.notNull())
    .addColumn('dkim_public_key', 'text', (c) => c.notNull())
    .addColumn('last_check', 'text')
    .addColumn('checked_at', big)
    .addColumn('created_at', big, (c) => c.notNull())
    .addUniqueConstraint('domains_account_name', ['account_id', 'name'])
    .execute();

  await d
    .addIdColumn(db.schema.createTable('mailboxes'))
    .addColumn('account_id', big, (c) => c.notNull().references('accounts.id'))
    .addColumn('uid', 'text', (c) => c.notNull())
    .addColumn('label', 'text')
    .addColumn('host', 'text', (c) => c.notNull())
    .addColumn('port', 'integer', (c) => c.notNull())
    .addColumn('username', 'text', (c) => c.notNull())
    .addColumn('password', 'text', (c) => c.notNull())
    .addColumn('tls', 'integer', (c) => c.notNull())
    .addColumn('postback_url', 'text', (c) => c.notNull())
    .addColumn('postback_secret', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull().defaultTo('active'))
    .addColumn('last_error', 'text')
    .addColumn('failures', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('next_check_at', big, (c) => c.notNull())
    .addColumn('checked_at', big)
    .addColumn('locked_by', 'text')
    .addColumn('locked_until', big)
    .addColumn('uid_validity', 'text')
    .addColumn('last_seen_uid', big)
    .addColumn('created_at', big, (c) => c.notNull())
    .addColumn('updated_at', big, (c) => c.notNull())
    .addUniqueConstraint('mailboxes_account_uid', ['account_id', 'uid'])
    .execute();

  await d
    .addIdColumn(db.schema.createTable('events'))
    .addColumn('account_id', big, (c) => c.notNull())
    .addColumn('project_id', big)
    .addColumn('type', 'text', (c) => c.notNull())
    .addColumn('payload', 'text', (c) => c.notNull())
    .addColumn('created_at', big, (c) => c.notNull())
    .execute();
}

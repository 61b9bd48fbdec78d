// One example request per method, shown in the OpenAPI document (the request body's `example`,
// which /docs's "Try it out" starts from) after replacing the key. Each is valid against its
// method's argument schema (test/http/openapi.test.ts); the records they name are the ones the
// examples before them create (the project "newsletter", the template "welcome", the message
// "order-7781"), and sent in that order to a real server each is answered ok
// (test/docs/api-examples.test.ts).
import type { JsonObject } from '../../../domain/args.ts';

const PROJECT_KEY = 'YOUR_PROJECT_API_KEY';
const ACCOUNT_KEY = 'YOUR_ACCOUNT_API_KEY';

const project = (args: JsonObject = {}, uid?: string): JsonObject => ({ api_key: PROJECT_KEY, ...(uid ? { uid } : {}), arguments: args });
const account = (args: JsonObject = {}): JsonObject => ({ api_key: ACCOUNT_KEY, arguments: args });

export const REQUEST_EXAMPLES: Readonly<Record<string, JsonObject>> = {
  send_message: project(
    {
      recipients: { 'ann@example.com': { name: 'Ann' } },
      headers: { from: 'Shop <shop@example.com>', subject: 'Your order, {{name}}' },
      content: { 'text/plain': 'Hello {{name}}, your order has shipped.', 'text/html': '<p>Hello {{name}}, your order has shipped.</p>' },
      attachments: { 'note.txt': { content_type: 'text/plain', content: 'VGhhbmsgeW91IQo=' } },
    },
    'order-7781',
  ),
  cancel_message: project({ uid: 'order-7781' }),
  preview_template: project({ content: { 'text/plain': 'Hello {{name}}' }, subject: 'Hi {{name}}', variables: { name: 'Ann' } }),
  get_message_receipt: project({ uid: 'order-7781' }),
  get_message_transmissions: project({ uid: 'order-7781' }),
  messages_history: project({ from: '2026-03-01', to: '2026-03-31', page: 1, per_page: 100 }),
  messages_history_detailed: project({ from: '2026-03-01', to: '2026-03-31', page: 1, per_page: 100 }),
  get_messages: project({ page: 1, per_page: 50 }),
  get_metrics: project(),
  get_suppression_list: project({ page: 1, per_page: 100 }),
  get_project_info: project(),
  get_account_info: project(),
  message_status: project({ uid: 'order-7781' }),
  message_delivery_status: project({ uid: 'order-7781' }),
  get_recipients_list: project({ uid: 'order-7781' }),
  get_message_content: project({ uid: 'order-7781', recipient: 'ann@example.com' }),
  get_message_source: project({ uid: 'order-7781', recipient: 'ann@example.com' }),
  add_to_suppression_list: project({ addresses: ['gone@example.com'], message: 'asked to stop' }),
  remove_from_suppression_list: project({ address: 'gone@example.com' }),
  update_account: account({ name: 'Acme', settings: { team: 'mail' } }),
  create_project: account({ name: 'Newsletter', uid: 'newsletter' }),
  list_projects: account(),
  get_project: account({ uid: 'newsletter' }),
  update_project: account({ uid: 'newsletter', settings: { tracking: false } }),
  disable_project: account({ uid: 'newsletter' }),
  enable_project: account({ uid: 'newsletter' }),
  rotate_project_key: account({ uid: 'newsletter' }),
  create_mailbox: account({ host: 'imap.example.com', username: 'replies@example.com', password: 'secret', postback_url: 'https://app.example.com/replies', uid: 'replies' }),
  list_mailboxes: account(),
  get_mailbox: account({ uid: 'replies' }),
  update_mailbox: account({ uid: 'replies', label: 'Replies' }),
  rotate_mailbox_secret: account({ uid: 'replies' }),
  delete_mailbox: account({ uid: 'replies' }),
  create_template: account({ project_uid: 'newsletter', slug: 'welcome', subject: 'Welcome, {{name}}', text: 'Hello {{name}}', html: '<p>Hello {{name}}</p>' }),
  update_template: account({ project_uid: 'newsletter', slug: 'welcome', subject: 'Welcome aboard, {{name}}' }),
  get_template: account({ project_uid: 'newsletter', slug: 'welcome' }),
  list_templates: account({ project_uid: 'newsletter' }),
  delete_template: account({ project_uid: 'newsletter', slug: 'welcome' }),
  create_domain: account({ name: 'mail.example.com' }),
  list_domains: account(),
  get_domain: account({ name: 'mail.example.com' }),
  check_domain: account({ name: 'mail.example.com' }),
  delete_domain: account({ name: 'mail.example.com' }),
  create_webhook: account({ url: 'https://app.example.com/posthorn-events', events: ['delivered', 'failed', 'bounced'], uid: 'app-events' }),
  list_webhooks: account(),
  update_webhook: account({ uid: 'app-events', events: ['failed', 'bounced'] }),
  delete_webhook: account({ uid: 'app-events' }),
  rotate_webhook_secret: account({ uid: 'app-events' }),
  list_webhook_deliveries: account({ webhook_uid: 'app-events', status: 'failed', per_page: 20 }),
  retry_webhook_deliveries: account({ ids: [1842] }),
  get_method_list: project(),
  test_error: project(),
};

// Account-key methods (account settings, projects, mailboxes) and the template methods, which a
// project key may call for its own project. Handlers read arguments, call operations and present
// rows: keys, hashes, mailbox passwords and postback secrets never appear in a presentation except
// the one reply that creates (or rotates) them.
import { checkName, type Args } from '../../../domain/args.ts';
import { ApiError } from '../../../domain/errors.ts';
import { keyPrefix } from '../../../domain/keys.ts';
import { formatIsoTime } from '../../../domain/time.ts';
import { MAX_ACCOUNT_NAME, readAccountSettings, updateAccount } from '../../../operations/account-settings.ts';
import type { Services } from '../../../services.ts';
import {
  createMailbox,
  deleteMailbox,
  getMailbox,
  listMailboxes,
  rotateMailboxSecret,
  updateMailbox,
  type MailboxChanges,
} from '../../../operations/mailboxes.ts';
import {
  MAX_PROJECT_NAME,
  MAX_RETENTION_DAYS,
  PROJECT_SETTING_KEYS,
  createProject,
  getProject,
  listProjects,
  projectUrl,
  readProjectSettings,
  rotateProjectKey,
  setProjectStatus,
  updateProject,
  type ProjectSettings,
  type ProjectView,
} from '../../../operations/projects.ts';
import {
  createTemplate,
  deleteTemplate,
  getTemplate,
  listTemplates,
  updateTemplate,
  type TemplateInput,
  type TemplateTarget,
} from '../../../operations/templates.ts';
import type { Account, Mailbox, Project, Template } from '../../../operations/context.ts';
import { defineMethods, type MethodCall } from './types.ts';
import { Type } from '@sinclair/typebox';
import {
  AccountData,
  MailboxData,
  MailboxWithSecretData,
  ProjectData,
  ProjectWithKeyData,
  TemplateData,
  TemplateSummaryData,
} from '../data-schemas.ts';
import { any, bool, int, map, NO_ARGUMENTS, obj, optional, required, str } from '../schema.ts';

// ---- presenting ----

function presentAccount(account: Account) {
  return {
    uid: account.uid,
    name: account.name,
    status: account.status,
    settings: readAccountSettings(account),
    created_at: formatIsoTime(account.created_at),
    updated_at: formatIsoTime(account.updated_at),
  };
}

function presentProject(services: Services, view: ProjectView) {
  const { project } = view;
  return {
    uid: project.uid,
    name: project.name,
    url: projectUrl(services, project),
    status: project.status,
    settings: readProjectSettings(project),
    key_prefix: view.keyPrefix,
    created_at: formatIsoTime(project.created_at),
    updated_at: formatIsoTime(project.updated_at),
  };
}

function presentMailbox(mailbox: Mailbox) {
  return {
    uid: mailbox.uid,
    label: mailbox.label,
    host: mailbox.host,
    port: mailbox.port,
    username: mailbox.username,
    tls: mailbox.tls === 1,
    postback_url: mailbox.postback_url,
    status: mailbox.status,
    last_error: mailbox.last_error,
    failures: mailbox.failures,
    checked_at: formatIsoTime(mailbox.checked_at),
    next_check_at: formatIsoTime(mailbox.next_check_at),
    created_at: formatIsoTime(mailbox.created_at),
    updated_at: formatIsoTime(mailbox.updated_at),
  };
}

function presentTemplateSummary(project: Project, t: Template) {
  return {
    project_uid: project.uid,
    slug: t.slug,
    name: t.name,
    subject: t.subject,
    from: t.from_address,
    parent: t.parent_slug,
    created_at: formatIsoTime(t.created_at),
    updated_at: formatIsoTime(t.updated_at),
  };
}

function presentTemplate(project: Project, t: Template) {
  return { ...presentTemplateSummary(project, t), text: t.text_body, html: t.html_body, css: t.css };
}

// ---- reading arguments ----

/** An optional string that, when given, must not be blank and fits maxChars. */
function readName(args: Args, field: string, maxChars: number, required: boolean): string | undefined {
  const value = required ? args.string(field, { required: true }) : args.string(field);
  // The operation checks the same rule (domain/args.ts checkName); checked here first so that a
  // bad name is reported before the other arguments are read.
  return value === undefined ? undefined : checkName(field, value, maxChars);
}

function readProjectSettingsArg(args: Args): Partial<ProjectSettings> | undefined {
  const settings = args.object('settings');
  if (!settings) return undefined;
  const out: Partial<ProjectSettings> = {};
  for (const key of Object.keys(settings.raw)) {
    if (!(PROJECT_SETTING_KEYS as string[]).includes(key)) {
      throw settings.invalid(key, `is not a project setting (known: ${PROJECT_SETTING_KEYS.join(', ')})`);
    }
  }
  if (settings.has('tracking')) out.tracking = settings.bool('tracking', false);
  if (settings.has('sandbox')) out.sandbox = settings.bool('sandbox', false);
  // One address, or "" to clear it: checked by the operation (operations/projects.ts updateProject).
  if (settings.has('default_from')) out.default_from = settings.string('default_from') ?? '';
  if (settings.has('retention_days')) out.retention_days = settings.int('retention_days', { min: 0, max: MAX_RETENTION_DAYS, required: true });
  return out;
}

function readMailboxChanges(args: Args): MailboxChanges {
  const changes: MailboxChanges = {};
  const strings = ['label', 'host', 'username', 'password', 'postback_url'] as const;
  for (const field of strings) {
    const value = args.string(field);
    if (value !== undefined) changes[field] = value;
  }
  for (const field of ['host', 'username', 'password', 'postback_url'] as const) {
    if (changes[field] !== undefined && changes[field]!.trim() === '') throw args.invalid(field, 'must not be empty');
  }
  const port = args.int('port', { min: 1, max: 65535 });
  if (port !== undefined) changes.port = port;
  if (args.has('tls')) changes.tls = args.bool('tls', true);
  return changes;
}

function readTemplateInput(args: Args): TemplateInput {
  const input: TemplateInput = {};
  for (const field of ['name', 'subject', 'from', 'text', 'html', 'css', 'parent'] as const) {
    const value = args.string(field);
    if (value !== undefined) input[field] = value;
  }
  return input;
}

/**
 * The project a template call is about (project_uid: required with an account key) and the slug
 * it names (required unless listing). Only the presence checks (400) happen here; the operation
 * validates, then looks the project up.
 */
function readTemplateTarget({ caller, args }: MethodCall): TemplateTarget {
  const projectUid = args.string('project_uid');
  if (caller.keyKind === 'account' && (projectUid === undefined || projectUid.trim() === '')) {
    throw new ApiError('bad_request', 'Missing required argument "project_uid": an account key must name the project.');
  }
  return { caller, projectUid: projectUid === '' ? undefined : projectUid };
}

// ---- the methods ----

export const accountMethods = defineMethods([
  {
    name: 'update_account',
    key: 'account',
    summary: 'Changes the account name and merges keys into its settings object (null removes a key).',
    args: obj({ name: optional(str({ maxLength: 200 })), settings: optional(map(any(), { description: 'keys merged into the settings; null removes a key' })) }),
    data: Type.Object({ account: AccountData }),
    async run({ services, caller, args }) {
      const name = readName(args, 'name', MAX_ACCOUNT_NAME, false);
      const settings = args.object('settings');
      const account = await updateAccount(services, caller.account, { name, settings: settings?.raw });
      return { data: { account: presentAccount(account) } };
    },
  },

  // -- projects --
  {
    name: 'create_project',
    key: 'account',
    summary: "Creates a project with its API key (returned this once) and the two sample templates.",
    args: obj({ name: required(str({ maxLength: 200 })), uid: optional(str({ description: 'default: generated' })), }),
    data: Type.Object({ project: ProjectWithKeyData }),
    async run({ services, caller, args }) {
      const name = readName(args, 'name', MAX_PROJECT_NAME, true)!;
      const uid = args.string('uid');
      const { project, apiKey } = await createProject(services, caller.account, { name, uid });
      const view = { project, keyPrefix: keyPrefix(apiKey) };
      return { data: { project: { ...presentProject(services, view), api_key: apiKey } } };
    },
  },
  {
    name: 'list_projects',
    key: 'account',
    summary: "The account's projects, oldest first (keys are shown by prefix only).",
    args: NO_ARGUMENTS,
    data: Type.Object({ projects: Type.Array(ProjectData) }),
    async run({ services, caller }) {
      const views = await listProjects(services, caller.account);
      return { data: { projects: views.map((v) => presentProject(services, v)) } };
    },
  },
  {
    name: 'get_project',
    key: 'account',
    summary: 'One project of the account, by uid.',
    args: obj({ uid: required(str({ description: 'the uid' })) }),
    data: Type.Object({ project: ProjectData }),
    async run({ services, caller, args }) {
      const view = await getProject(services, caller.account, args.storedUid());
      return { data: { project: presentProject(services, view) } };
    },
  },
  {
    name: 'update_project',
    key: 'account',
    summary: 'Changes a project name and merges its settings (tracking: opt-in open and click tracking).',
    args: obj({ uid: required(str()), name: optional(str({ maxLength: 200 })), settings: optional(obj({ tracking: optional(bool()), sandbox: optional(bool({ description: 'nothing leaves the machine; simulator addresses (docs/sandbox.md)' })), default_from: optional(str({ description: 'the From of a message that names none ("" clears it)' })), retention_days: optional(int({ minimum: 0, maximum: 3650, description: 'days messages are kept (0: forever); absent: the server default' })) }, { description: 'known keys only: tracking, sandbox, default_from, retention_days' })) }),
    data: Type.Object({ project: ProjectData }),
    async run({ services, caller, args }) {
      const uid = args.storedUid();
      const name = readName(args, 'name', MAX_PROJECT_NAME, false);
      const settings = readProjectSettingsArg(args);
      const view = await updateProject(services, caller.account, uid, { name, settings });
      return { data: { project: presentProject(services, view) } };
    },
  },
  {
    name: 'disable_project',
    key: 'account',
    summary: "Disables a project: its key answers 423 locked until enable_project.",
    args: obj({ uid: required(str({ description: 'the uid' })) }),
    data: Type.Object({ project: ProjectData }),
    async run({ services, caller, args }) {
      const view = await setProjectStatus(services, caller.account, args.storedUid(), 'disabled');
      return { data: { project: presentProject(services, view) } };
    },
  },
  {
    name: 'enable_project',
    key: 'account',
    summary: 'Enables a disabled project again.',
    args: obj({ uid: required(str({ description: 'the uid' })) }),
    data: Type.Object({ project: ProjectData }),
    async run({ services, caller, args }) {
      const view = await setProjectStatus(services, caller.account, args.storedUid(), 'active');
      return { data: { project: presentProject(services, view) } };
    },
  },
  {
    name: 'rotate_project_key',
    key: 'account',
    summary: "Replaces a project's API key: the new key is returned this once, the old one answers 401 at once.",
    args: obj({ uid: required(str({ description: 'the uid' })) }),
    data: Type.Object({ project: ProjectWithKeyData }),
    async run({ services, caller, args }) {
      const { project, apiKey } = await rotateProjectKey(services, caller.account, args.storedUid());
      const view = { project, keyPrefix: keyPrefix(apiKey) };
      return { data: { project: { ...presentProject(services, view), api_key: apiKey } } };
    },
  },

  // -- mailboxes --
  {
    name: 'create_mailbox',
    key: 'account',
    summary: 'Adds an inbound IMAP mailbox whose new mail is posted to postback_url; returns the postback secret this once.',
    args: obj({ host: required(str()), username: required(str()), password: required(str()), postback_url: required(str({ description: 'an http(s) URL' })), uid: optional(str()), label: optional(str()), port: optional(int({ minimum: 1, maximum: 65535, description: 'default 993' })), tls: optional(bool({ description: 'default true' })) }),
    data: Type.Object({ mailbox: MailboxWithSecretData }),
    async run({ services, caller, args }) {
      // Missing required arguments (400) are reported before malformed ones (406).
      const host = args.string('host', { required: true });
      const username = args.string('username', { required: true });
      const password = args.string('password', { required: true });
      const postbackUrl = args.string('postback_url', { required: true });
      const changes = readMailboxChanges(args);
      const { mailbox, postbackSecret } = await createMailbox(services, caller.account, {
        uid: args.string('uid'),
        label: changes.label,
        host,
        port: changes.port ?? 993,
        username,
        password,
        tls: changes.tls ?? true,
        postback_url: postbackUrl,
      });
      return { data: { mailbox: { ...presentMailbox(mailbox), postback_secret: postbackSecret } } };
    },
  },
  {
    name: 'list_mailboxes',
    key: 'account',
    summary: "The account's mailboxes with their polling state (status, last_error, checked_at).",
    args: NO_ARGUMENTS,
    data: Type.Object({ mailboxes: Type.Array(MailboxData) }),
    async run({ services, caller }) {
      const mailboxes = await listMailboxes(services, caller.account);
      return { data: { mailboxes: mailboxes.map(presentMailbox) } };
    },
  },
  {
    name: 'get_mailbox',
    key: 'account',
    summary: 'One mailbox of the account, by uid.',
    args: obj({ uid: required(str({ description: 'the uid' })) }),
    data: Type.Object({ mailbox: MailboxData }),
    async run({ services, caller, args }) {
      const mailbox = await getMailbox(services, caller.account, args.storedUid());
      return { data: { mailbox: presentMailbox(mailbox) } };
    },
  },
  {
    name: 'update_mailbox',
    key: 'account',
    summary: "Changes a mailbox's settings; a new connection setting clears its error state and checks it at once.",
    args: obj({ uid: required(str()), host: optional(str()), username: optional(str()), password: optional(str()), postback_url: optional(str()), label: optional(str()), port: optional(int({ minimum: 1, maximum: 65535, description: 'default 993' })), tls: optional(bool({ description: 'default true' })) }),
    data: Type.Object({ mailbox: MailboxData }),
    async run({ services, caller, args }) {
      const uid = args.storedUid();
      const mailbox = await updateMailbox(services, caller.account, uid, readMailboxChanges(args));
      return { data: { mailbox: presentMailbox(mailbox) } };
    },
  },
  {
    name: 'rotate_mailbox_secret',
    key: 'account',
    summary: "Replaces a mailbox's postback secret; the new secret is returned this once.",
    args: obj({ uid: required(str({ description: 'the uid' })) }),
    data: Type.Object({ mailbox: MailboxWithSecretData }),
    async run({ services, caller, args }) {
      const { mailbox, postbackSecret } = await rotateMailboxSecret(services, caller.account, args.storedUid());
      return { data: { mailbox: { ...presentMailbox(mailbox), postback_secret: postbackSecret } } };
    },
  },
  {
    name: 'delete_mailbox',
    key: 'account',
    summary: 'Deletes a mailbox; it is not polled any more.',
    args: obj({ uid: required(str({ description: 'the uid' })) }),
    data: Type.Object({ mailbox: Type.Object({ uid: Type.String(), deleted: Type.Literal(true) }) }),
    async run({ services, caller, args }) {
      const mailbox = await deleteMailbox(services, caller.account, args.storedUid());
      return { data: { mailbox: { uid: mailbox.uid, deleted: true } } };
    },
  },

  // -- templates (either key kind) --
  {
    name: 'create_template',
    key: 'any',
    summary: 'Creates a template of a project (an account key names project_uid).',
    args: obj({ project_uid: optional(str({ description: 'required with an account key: the project the template belongs to' })), slug: required(str()), name: optional(str()), subject: optional(str()), from: optional(str()), text: optional(str()), html: optional(str()), css: optional(str()), parent: optional(str({ description: 'slug of the layout template it is rendered into' })) }),
    data: Type.Object({ template: TemplateData }),
    async run(call) {
      const target = readTemplateTarget(call);
      const slug = call.args.string('slug', { required: true });
      const { project, template } = await createTemplate(call.services, target, slug, readTemplateInput(call.args));
      return { data: { template: presentTemplate(project, template) } };
    },
  },
  {
    name: 'update_template',
    key: 'any',
    summary: 'Changes the given fields of a template ("" clears a field); queued mail is not affected.',
    args: obj({ project_uid: optional(str({ description: 'required with an account key: the project the template belongs to' })), slug: required(str()), name: optional(str()), subject: optional(str()), from: optional(str()), text: optional(str()), html: optional(str()), css: optional(str()), parent: optional(str({ description: 'slug of the layout template it is rendered into' })) }),
    data: Type.Object({ template: TemplateData }),
    async run(call) {
      const target = readTemplateTarget(call);
      const slug = call.args.string('slug', { required: true });
      const { project, template } = await updateTemplate(call.services, target, slug, readTemplateInput(call.args));
      return { data: { template: presentTemplate(project, template) } };
    },
  },
  {
    name: 'get_template',
    key: 'any',
    summary: 'One template with its text, HTML and CSS.',
    args: obj({ project_uid: optional(str({ description: 'required with an account key: the project the template belongs to' })), slug: required(str()) }),
    data: Type.Object({ template: TemplateData }),
    async run(call) {
      const target = readTemplateTarget(call);
      const { project, template } = await getTemplate(call.services, target, call.args.string('slug', { required: true }));
      return { data: { template: presentTemplate(project, template) } };
    },
  },
  {
    name: 'list_templates',
    key: 'any',
    summary: "A project's templates by slug, without their bodies.",
    args: obj({ project_uid: optional(str({ description: 'required with an account key: the project the template belongs to' })) }),
    data: Type.Object({ templates: Type.Array(TemplateSummaryData) }),
    async run(call) {
      const { project, templates } = await listTemplates(call.services, readTemplateTarget(call));
      return { data: { templates: templates.map((t) => presentTemplateSummary(project, t)) } };
    },
  },
  {
    name: 'delete_template',
    key: 'any',
    summary: 'Deletes a template; refused (412) while another template uses it as its parent layout.',
    args: obj({ project_uid: optional(str({ description: 'required with an account key: the project the template belongs to' })), slug: required(str()) }),
    data: Type.Object({ template: Type.Object({ project_uid: Type.String(), slug: Type.String(), deleted: Type.Literal(true) }) }),
    async run(call) {
      const target = readTemplateTarget(call);
      const { project, template } = await deleteTemplate(call.services, target, call.args.string('slug', { required: true }));
      return { data: { template: { project_uid: project.uid, slug: template.slug, deleted: true } } };
    },
  },
]);

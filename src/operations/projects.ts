// Projects of an account: create (the project row, its key shown once and the sample templates, in
// one transaction), list, get, update, disable/enable and key rotation. A project's API key is
// returned only by createProject and rotateProjectKey; everything else shows its key_prefix.
import { randomUUID } from 'node:crypto';
import { ApiError, duplicateUid, limitReached } from '../domain/errors.ts';
import { generateApiKey, hashApiKey, keyPrefix } from '../domain/keys.ts';
import { sampleTemplates } from '../domain/sample-templates.ts';
import { activeKeyPrefix, activeProjectKeyPrefixes, insertApiKey, revokeProjectKeys } from '../storage/api-keys.ts';
import { countProjects, findProjectByUid, insertProject, listProjects as listProjectRows, updateProject as updateProjectRow } from '../storage/projects.ts';
import { isDuplicate } from '../storage/duplicates.ts';
import type { Account, Project } from '../storage/schema.ts';
import type { Tx } from '../storage/store.ts';
import { insertTemplate } from '../storage/templates.ts';
import type { Services } from '../services.ts';
import { checkChosenUid, checkName, invalidArgument } from '../domain/args.ts';
import { checkHeaderValue } from '../domain/headers.ts';
import { parseMailbox, splitAddressList } from '../domain/recipients.ts';

/** Most projects one account may hold: list_projects is unpaged, so it stays bounded. */
export const MAX_PROJECTS_PER_ACCOUNT = 1000;
/** Longest project name and uid, in characters. */
export const MAX_PROJECT_NAME = 200;
export const MAX_PROJECT_UID = 200;

/**
 * Per-project settings, stored as JSON in projects.settings. Every key is declared here so a typo
 * in update_project is refused instead of silently stored.
 */
export interface ProjectSettings {
  /** opt-in open and click tracking of HTML parts (delivery/tracking.ts) */
  tracking: boolean;
  /** nothing leaves the machine: delivery completes through the sandbox adapter (docs/sandbox.md) */
  sandbox: boolean;
  /**
   * the From of a message that names none in its headers or template; null: noreply@<--mailer-host>
   * (defaultFromOf, docs/api/send-message.md "From")
   */
  default_from: string | null;
  /**
   * days this project's messages and their history are kept (operations/retention.ts); absent:
   * the server's --retention-days. 0 keeps them forever.
   */
  retention_days?: number;
}

export const DEFAULT_PROJECT_SETTINGS: Readonly<ProjectSettings> = Object.freeze({ tracking: false, sandbox: false, default_from: null });
/** Longest retention a project may set, in days (ten years). */
export const MAX_RETENTION_DAYS = 3650;
export const PROJECT_SETTING_KEYS = [...Object.keys(DEFAULT_PROJECT_SETTINGS), 'retention_days'] as (keyof ProjectSettings)[];

/** The project's settings, defaults filled in. A row written before a setting existed reads its default. */
export function readProjectSettings(project: Pick<Project, 'settings'>): ProjectSettings {
  let stored: unknown = {};
  try {
    stored = JSON.parse(project.settings);
  } catch {
    stored = {};
  }
  const out: ProjectSettings = { ...DEFAULT_PROJECT_SETTINGS };
  if (typeof stored === 'object' && stored !== null) {
    const s = stored as Record<string, unknown>;
    if (typeof s.tracking === 'boolean') out.tracking = s.tracking;
    if (Number.isInteger(s.retention_days) && (s.retention_days as number) >= 0) out.retention_days = s.retention_days as number;
    if (typeof s.sandbox === 'boolean') out.sandbox = s.sandbox;
    if (typeof s.default_from === 'string' && s.default_from !== '') out.default_from = s.default_from;
  }
  return out;
}

/**
 * Whether a message this project accepts now is accepted in sandbox mode (docs/sandbox.md): fixed
 * per message at acceptance (messages.sandbox). Settings that never name the key are not parsed:
 * acceptance is the hot path.
 */
export function acceptsInSandbox(project: Pick<Project, 'settings'>): boolean {
  return project.settings.includes('sandbox') && readProjectSettings(project).sandbox;
}

/**
 * The From of a message of this project that names none in its headers or template: the project's
 * default_from, else noreply@ the --mailer-host of the process that accepts the message. Resolved at
 * acceptance, as the Message-ID is, so the host configured for sending decides (a project made
 * before --mailer-host was set, by `posthorn init` on a machine named otherwise, follows it), and
 * the Message-ID and the From of one message name the same host.
 */
export function defaultFromOf(services: Pick<Services, 'config'>, project: Pick<Project, 'settings'>): string {
  return readProjectSettings(project).default_from ?? `noreply@${services.config.mailerHost}`;
}

export interface CreatedProject {
  project: Project;
  /** shown this once */
  apiKey: string;
}

/** A project as listings show it: the row and the prefix of its active key (never the key). */
export interface ProjectView {
  project: Project;
  keyPrefix: string | null;
}

export function projectUrl(services: Services, project: Pick<Project, 'uid'>): string {
  return `${services.config.publicUrl}/projects/${encodeURIComponent(project.uid)}`;
}

export async function createProject(services: Services, account: Account, input: { name: string; uid?: string }): Promise<CreatedProject> {
  checkName('name', input.name, MAX_PROJECT_NAME);
  const uid = checkChosenUid('uid', input.uid, MAX_PROJECT_UID) ?? randomUUID();
  const now = services.clock.now();
  const apiKey = generateApiKey();
  const project = await services.store.write(async (trx) => {
    if (await findProjectByUid(trx, account.id, uid)) throw duplicateUid(uid);
    if ((await countProjects(trx, account.id)) >= MAX_PROJECTS_PER_ACCOUNT) {
      throw limitReached('account', MAX_PROJECTS_PER_ACCOUNT, 'projects');
    }
    // No default From is stored: until the project sets one, its messages go from
    // noreply@<--mailer-host> as configured when they are sent (defaultFromOf).
    const project = await insertProject(trx, { accountId: account.id, uid, name: input.name, now });
    // A concurrent create with the same uid loses at the unique constraint.
    if (isDuplicate(project)) throw duplicateUid(uid);
    await insertApiKey(trx, { accountId: account.id, projectId: project.id, keyHash: hashApiKey(apiKey), keyPrefix: keyPrefix(apiKey), now });
    for (const template of sampleTemplates()) await insertTemplate(trx, project.id, template, now);
    return project;
  });
  return { project, apiKey };
}

export async function listProjects(services: Services, account: Account): Promise<ProjectView[]> {
  const db = services.store.db;
  const [projects, prefixes] = await Promise.all([listProjectRows(db, account.id), activeProjectKeyPrefixes(db, account.id)]);
  return projects.map((project) => ({ project, keyPrefix: prefixes.get(project.id) ?? null }));
}

async function requireProject(db: Tx, account: Account, uid: string): Promise<Project> {
  const project = await findProjectByUid(db, account.id, uid);
  if (!project) throw new ApiError('not_found', `Project ${uid} not found.`);
  return project;
}

/** The account's project with this uid, or 404 not_found. */
export async function findAccountProject(services: Services, account: Account, uid: string): Promise<Project> {
  return requireProject(services.store.db, account, uid);
}

export async function getProject(services: Services, account: Account, uid: string): Promise<ProjectView> {
  const project = await requireProject(services.store.db, account, uid);
  return { project, keyPrefix: await activeKeyPrefix(services.store.db, { accountId: account.id, projectId: project.id }) };
}

export interface ProjectChanges {
  name?: string;
  /**
   * merged into the stored settings: keys not named keep their value. default_from "" or null
   * clears it; retention_days null goes back to the server's --retention-days.
   */
  settings?: Partial<Omit<ProjectSettings, 'retention_days'>> & { retention_days?: number | null };
}

/**
 * The settings changes checked and normalised, for every edge alike (the API's update_project, the
 * dashboard's settings form): each refusal is a 406 naming the setting ("settings.default_from").
 */
function checkSettingChanges(settings: NonNullable<ProjectChanges['settings']>): NonNullable<ProjectChanges['settings']> {
  const out = { ...settings };
  if (settings.default_from !== undefined) {
    // One address, as a From header takes it; "" clears it (docs/api/send-message.md).
    const from = (settings.default_from ?? '').trim();
    if (from !== '') {
      checkHeaderValue('setting "default_from"', from);
      const items = splitAddressList(from);
      const parsed = items.length === 1 ? parseMailbox(items[0]) : null;
      if (!parsed?.ok) throw invalidArgument('settings.default_from', `must be one address like "Shop <shop@example.com>"${parsed && !parsed.ok ? `: ${parsed.reason}` : ''}`);
    }
    out.default_from = from === '' ? null : from;
  }
  const days = settings.retention_days;
  if (days !== undefined && days !== null && (!Number.isSafeInteger(days) || days < 0 || days > MAX_RETENTION_DAYS)) {
    throw invalidArgument('settings.retention_days', `must be between 0 and ${MAX_RETENTION_DAYS}, got ${days}`);
  }
  return out;
}

/** The fields of a project's settings a refusal may name (the dashboard's settings form). */
export type ProjectSettingsField = 'name' | 'default_from' | 'retention_days';

/** The settings as a form writes them: text, and ticked boxes. */
export interface ProjectSettingsText {
  name: string;
  sandbox: boolean;
  tracking: boolean;
  default_from: string;
  /** days as typed; '' for the server's --retention-days */
  retention_days: string;
}

/**
 * A settings form's text read as update_project's changes, with the refusal of every field at once
 * (in the API's words), not the first one only: a form shows each beside its field
 * (docs/dashboard.md, "Project settings"). Nothing is saved here; updateProject saves.
 */
export function readProjectSettingsText(text: ProjectSettingsText): { changes: ProjectChanges; errors: Partial<Record<ProjectSettingsField, string>> } {
  const errors: Partial<Record<ProjectSettingsField, string>> = {};
  const check = (field: ProjectSettingsField, run: () => void) => {
    try {
      run();
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
      errors[field] = error.message;
    }
  };
  const days = text.retention_days.trim();
  let retention: number | null = null;
  check('retention_days', () => {
    if (days === '') return;
    // "1.5" or "ten" is not a count of days, whatever type the form posted it as.
    if (!/^-?\d+$/.test(days)) throw invalidArgument('settings.retention_days', `must be a whole number of days from 0 to ${MAX_RETENTION_DAYS}, got ${JSON.stringify(days.slice(0, 40))}`);
    retention = Number(days);
    checkSettingChanges({ retention_days: retention });
  });
  check('name', () => checkName('name', text.name, MAX_PROJECT_NAME));
  check('default_from', () => checkSettingChanges({ default_from: text.default_from }));
  const changes: ProjectChanges = {
    name: text.name,
    settings: { sandbox: text.sandbox, tracking: text.tracking, default_from: text.default_from, retention_days: retention },
  };
  return { changes, errors };
}

export async function updateProject(services: Services, account: Account, uid: string, changes: ProjectChanges): Promise<ProjectView> {
  if (changes.name !== undefined) checkName('name', changes.name, MAX_PROJECT_NAME);
  const settings = changes.settings === undefined ? undefined : checkSettingChanges(changes.settings);
  const now = services.clock.now();
  return services.store.write(async (trx) => {
    const project = await requireProject(trx, account, uid);
    const patch: { name?: string; settings?: string; updated_at: number } = { updated_at: now };
    if (changes.name !== undefined) patch.name = changes.name;
    if (settings !== undefined) {
      const merged: Record<string, unknown> = { ...readProjectSettings(project), ...settings };
      if (merged.retention_days === null) delete merged.retention_days;
      patch.settings = JSON.stringify(merged);
    }
    const updated = (await updateProjectRow(trx, project.id, patch))!;
    return { project: updated, keyPrefix: await activeKeyPrefix(trx, { accountId: account.id, projectId: project.id }) };
  });
}

/** Disables (its key answers 423 locked from the next request on) or re-enables a project. */
export async function setProjectStatus(services: Services, account: Account, uid: string, status: 'active' | 'disabled'): Promise<ProjectView> {
  const now = services.clock.now();
  return services.store.write(async (trx) => {
    const project = await requireProject(trx, account, uid);
    const updated = project.status === status ? project : (await updateProjectRow(trx, project.id, { status, updated_at: now }))!;
    return { project: updated, keyPrefix: await activeKeyPrefix(trx, { accountId: account.id, projectId: project.id }) };
  });
}

/**
 * Replaces the project's key: in one transaction every active key of the project becomes inactive
 * (401 from the next request on: authentication reads the key row each time, nothing is cached)
 * and a new one is stored. The new key is returned this once.
 */
export async function rotateProjectKey(services: Services, account: Account, uid: string): Promise<CreatedProject> {
  const now = services.clock.now();
  const apiKey = generateApiKey();
  const project = await services.store.write(async (trx) => {
    const project = await requireProject(trx, account, uid);
    await revokeProjectKeys(trx, project.id, now);
    await insertApiKey(trx, { accountId: account.id, projectId: project.id, keyHash: hashApiKey(apiKey), keyPrefix: keyPrefix(apiKey), now });
    return project;
  });
  return { project, apiKey };
}

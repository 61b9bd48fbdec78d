// A project's templates: create, update, list, get, delete. A project key manages its own
// project's templates; an account key names the project (project_uid).
//
// Invariants kept on every write, inside the transaction: a template's parent is a template of the
// same project; no chain of parents loops; a chain (the template and its layouts) is at most
// MAX_TEMPLATE_CHAIN long; a template that is another's parent cannot be deleted. So a template
// that exists can always be resolved by send_message.
import { invalidArgument, longerThan } from '../domain/args.ts';
import { ApiError, limitReached } from '../domain/errors.ts';
import { checkHeaderValue } from '../domain/headers.ts';
import { MAX_LAYOUT_CHAIN } from '../domain/templates.ts';
import { findTemplateSyntaxError } from '../domain/variables.ts';
import { isDuplicate } from '../storage/duplicates.ts';
import type { Project, Template } from '../storage/schema.ts';
import type { Tx } from '../storage/store.ts';
import {
  countTemplates,
  deleteTemplate as deleteTemplateRow,
  findTemplate,
  insertTemplate,
  listChildSlugs,
  listTemplateParents,
  listTemplates as listTemplateRows,
  updateTemplate as updateTemplateRow,
  type TemplateFields,
} from '../storage/templates.ts';
import type { Caller } from './context.ts';
import type { Services } from '../services.ts';
import { findAccountProject } from './projects.ts';

/**
 * Longest chain of a template and its parent layouts (the sample templates make a chain of 2): the
 * bound send_message resolves (domain/templates.ts), so every stored chain can be sent.
 */
export const MAX_TEMPLATE_CHAIN = MAX_LAYOUT_CHAIN;

export const TEMPLATE_LIMITS = Object.freeze({
  templatesPerProject: 1000,
  slugChars: 100,
  nameChars: 200,
  /** subject and from become header lines */
  headerChars: 998,
  /** text, html and css, each */
  bodyChars: 1024 * 1024,
});

export const SLUG_PATTERN = /^[A-Za-z0-9_.-]+$/;

/**
 * The fields of a template as the API names them. For create, absent and "" both mean none; for
 * update, absent means unchanged and "" clears the field (parent "" removes the layout).
 */
export interface TemplateInput {
  name?: string;
  subject?: string;
  from?: string;
  text?: string;
  html?: string;
  css?: string;
  parent?: string;
}

export function checkSlug(field: string, slug: string): void {
  if (longerThan(slug, TEMPLATE_LIMITS.slugChars)) throw invalidArgument(field, `must be at most ${TEMPLATE_LIMITS.slugChars} characters long`);
  if (!SLUG_PATTERN.test(slug)) throw invalidArgument(field, 'may hold only letters, digits, "_", "-" and "."');
}

function text(field: string, value: string | undefined, max: number, oneLine = false): string | null | undefined {
  if (value === undefined) return undefined;
  if (longerThan(value, max)) throw invalidArgument(field, `must be at most ${max} characters long`);
  // subject and from are header values: a line break would inject headers.
  if (oneLine) checkHeaderValue(`argument "${field}"`, value);
  // The template language (docs/templates.md): a part that cannot be rendered is refused now,
  // not found at delivery. css is not rendered.
  const syntaxError = field === 'name' || field === 'css' ? null : findTemplateSyntaxError(value);
  if (syntaxError !== null) throw invalidArgument(field, `is not a valid template: ${syntaxError}`);
  return value === '' ? null : value;
}

/** Validates the given fields and maps them to columns; absent fields are left out. */
function templateColumns(input: TemplateInput): Partial<TemplateFields> {
  const columns: Partial<TemplateFields> = {};
  const set = <K extends keyof TemplateFields>(key: K, value: TemplateFields[K] | undefined) => {
    if (value !== undefined) columns[key] = value;
  };
  set('name', text('name', input.name, TEMPLATE_LIMITS.nameChars, true));
  set('subject', text('subject', input.subject, TEMPLATE_LIMITS.headerChars, true));
  set('from_address', text('from', input.from, TEMPLATE_LIMITS.headerChars, true));
  set('text_body', text('text', input.text, TEMPLATE_LIMITS.bodyChars));
  set('html_body', text('html', input.html, TEMPLATE_LIMITS.bodyChars));
  set('css', text('css', input.css, TEMPLATE_LIMITS.bodyChars));
  if (input.parent !== undefined) {
    if (input.parent !== '') checkSlug('parent', input.parent);
    columns.parent_slug = input.parent === '' ? null : input.parent;
  }
  return columns;
}

/**
 * The project whose templates the caller manages: a project key's own project (project_uid, if
 * given, must name it), or for an account key the project named by project_uid.
 */
export async function resolveTemplateProject(services: Services, caller: Caller, projectUid: string | undefined): Promise<Project> {
  if (caller.project) {
    if (projectUid !== undefined && projectUid !== caller.project.uid) {
      throw new ApiError('not_found', `Project ${projectUid} not found: a project key manages only its own project's templates.`);
    }
    return caller.project;
  }
  if (projectUid === undefined) throw new ApiError('bad_request', 'Missing required argument "project_uid": an account key must name the project.');
  return findAccountProject(services, caller.account, projectUid);
}

/**
 * Checks the parent links of the project's templates as they will be after this write: the
 * template's parent exists, and its chain neither loops nor exceeds MAX_TEMPLATE_CHAIN (counting
 * the templates below it, whose chains run through it). One query: a project holds at most
 * TEMPLATE_LIMITS.templatesPerProject templates.
 */
async function checkParentChain(trx: Tx, projectId: number, slug: string, parent: string | null): Promise<void> {
  if (parent === null) return;
  if (parent === slug) throw new ApiError('precondition_failed', `Template ${slug} cannot be its own parent.`);
  const parentOf = await listTemplateParents(trx, projectId);
  if (!parentOf.has(parent)) throw new ApiError('precondition_failed', `Parent template ${parent} does not exist in this project.`);
  parentOf.set(slug, parent);

  // Upwards from the template: a loop comes back to it.
  let above = 0;
  for (let p: string | null | undefined = parent; p; p = parentOf.get(p)) {
    if (p === slug) throw new ApiError('precondition_failed', `Parent ${parent} would make a loop: ${slug} is already a layout of ${parent}.`);
    above += 1;
    if (above >= MAX_TEMPLATE_CHAIN) break;
  }
  // Downwards: the longest chain of templates that have this one as an ancestor.
  const children = new Map<string, string[]>();
  for (const [s, p] of parentOf) if (p) children.set(p, [...(children.get(p) ?? []), s]);
  const depthBelow = (s: string, seen: number): number =>
    seen > MAX_TEMPLATE_CHAIN ? seen : Math.max(0, ...(children.get(s) ?? []).map((c) => 1 + depthBelow(c, seen + 1)));
  if (above + 1 + depthBelow(slug, 0) > MAX_TEMPLATE_CHAIN) {
    throw new ApiError('precondition_failed', `Parent ${parent} would make a chain of layouts longer than ${MAX_TEMPLATE_CHAIN} templates.`);
  }
}

export interface TemplateTarget {
  caller: Caller;
  /** required with an account key; optional (must be its own) with a project key */
  projectUid: string | undefined;
}

export interface ProjectTemplate {
  project: Project;
  template: Template;
}

/**
 * Every call checks in the API's order: the arguments (slug and fields, 406) before the project
 * lookup (404), before the parent rules (412), before the duplicate slug (400).
 */
export async function createTemplate(services: Services, target: TemplateTarget, slug: string, input: TemplateInput): Promise<ProjectTemplate> {
  checkSlug('slug', slug);
  const columns = templateColumns(input);
  const project = await resolveTemplateProject(services, target.caller, target.projectUid);
  const now = services.clock.now();
  const duplicate = () => new ApiError('bad_request', `Template ${slug} already exists.`);
  const template = await services.store.write(async (trx) => {
    await checkParentChain(trx, project.id, slug, columns.parent_slug ?? null);
    if (await findTemplate(trx, project.id, slug)) throw duplicate();
    if ((await countTemplates(trx, project.id)) >= TEMPLATE_LIMITS.templatesPerProject) {
      throw limitReached('project', TEMPLATE_LIMITS.templatesPerProject, 'templates');
    }
    const inserted = await insertTemplate(
      trx,
      project.id,
      { name: null, subject: null, from_address: null, text_body: null, html_body: null, css: null, parent_slug: null, ...columns, slug },
      now,
    );
    // A concurrent create of the same slug loses at the unique constraint.
    if (isDuplicate(inserted)) throw duplicate();
    return inserted;
  });
  return { project, template };
}

async function requireTemplate(db: Tx, project: Project, slug: string): Promise<Template> {
  const template = await findTemplate(db, project.id, slug);
  if (!template) throw new ApiError('not_found', `Template ${slug} not found.`);
  return template;
}

/** Changes the given fields; messages already accepted keep the content they were accepted with. */
export async function updateTemplate(services: Services, target: TemplateTarget, slug: string, input: TemplateInput): Promise<ProjectTemplate> {
  const columns = templateColumns(input);
  const project = await resolveTemplateProject(services, target.caller, target.projectUid);
  const now = services.clock.now();
  const template = await services.store.write(async (trx) => {
    const current = await requireTemplate(trx, project, slug);
    if (columns.parent_slug !== undefined && columns.parent_slug !== current.parent_slug) {
      await checkParentChain(trx, project.id, slug, columns.parent_slug);
    }
    return (await updateTemplateRow(trx, current.id, columns, now))!;
  });
  return { project, template };
}

export async function getTemplate(services: Services, target: TemplateTarget, slug: string): Promise<ProjectTemplate> {
  const project = await resolveTemplateProject(services, target.caller, target.projectUid);
  return { project, template: await requireTemplate(services.store.db, project, slug) };
}

export async function listTemplates(services: Services, target: TemplateTarget): Promise<{ project: Project; templates: Template[] }> {
  const project = await resolveTemplateProject(services, target.caller, target.projectUid);
  return { project, templates: await listTemplateRows(services.store.db, project.id) };
}

/** Deletes a template that no other template uses as its parent layout (else 412). */
export async function deleteTemplate(services: Services, target: TemplateTarget, slug: string): Promise<ProjectTemplate> {
  const project = await resolveTemplateProject(services, target.caller, target.projectUid);
  const template = await services.store.write(async (trx) => {
    const template = await requireTemplate(trx, project, slug);
    const children = await listChildSlugs(trx, project.id, slug);
    if (children.length > 0) {
      throw new ApiError('precondition_failed', `Template ${slug} is the parent layout of ${children.join(', ')}: change or delete those first.`);
    }
    await deleteTemplateRow(trx, template.id);
    return template;
  });
  return { project, template };
}

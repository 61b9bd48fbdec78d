// A template as it would be sent: the API's preview_template and the dashboard's template editor
// both call previewTemplate. The levels are merged by the real merge (domain/templates.ts
// mergeLevels) and rendered by the real renderer (domain/variables.ts) with sample variables, so
// what is shown is what delivery would compose (before tracking), and the preview says which
// {{variables}} had no value.
//
// Levels, innermost first: `content` (a message's own content, as send_message takes it), then
// `template` (unsaved fields from an editor, whose `parent` names its layout), then the stored
// chain of `slug` or of `template.parent`.
import { longerThan } from '../domain/args.ts';
import { ApiError } from '../domain/errors.ts';
import { MAX_LAYOUT_CHAIN, MergedPartTooLargeError, checkLayoutChain, mergeLevels, type ContentLevel } from '../domain/templates.ts';
import { TemplateRenderError, findPartSizeProblem, findTemplateSyntaxError, missingPathsIn, renderVariables, type PartKind, type Variables, type VariableValue } from '../domain/variables.ts';
import type { Services } from '../services.ts';
import type { Project } from '../storage/schema.ts';
import { findTemplateChain } from '../storage/template-layouts.ts';
import type { Caller } from './context.ts';
import { defaultFromOf } from './projects.ts';
import { TEMPLATE_LIMITS, resolveTemplateProject, type TemplateInput } from './templates.ts';

export interface TemplatePreview {
  subject: string | null;
  from: string | null;
  text: string | null;
  /** attacker-controlled markup: show only in a sandboxed frame */
  html: string | null;
  /** per field, what keeps the template from being sent as it is; empty when none */
  errors: Record<string, string>;
  /** names of {{variables}} substituted without a value (rendered empty), each once, in order */
  missing: string[];
}

export interface PreviewInput {
  /** a stored template of the project: it and its layouts */
  slug?: string | null;
  /** unsaved template fields (the editor); `parent` names the layout above them */
  template?: TemplateInput | null;
  /** a message's own content, innermost */
  content?: Partial<Omit<ContentLevel, 'css'>> & { css?: string | null };
  /** sample variables, as send_message's arguments.variables */
  variables?: Record<string, unknown>;
}

/** Most sample variables one preview renders. */
const MAX_SAMPLE_VARIABLES = 200;

/** preview_template: the caller's project (an account key names project_uid), then previewTemplate. */
export async function previewTemplateFor(services: Services, caller: Caller, projectUid: string | undefined, input: PreviewInput): Promise<TemplatePreview> {
  const project = await resolveTemplateProject(services, caller, projectUid);
  if (input.slug) {
    const rows = await findTemplateChain(services.store.db, project.id, input.slug, MAX_LAYOUT_CHAIN);
    if (rows.length === 0 || rows[0].slug !== input.slug) throw new ApiError('not_found', `Template ${input.slug} not found.`);
  }
  return previewTemplate(services, project, input);
}

export async function previewTemplate(services: Services, project: Project, input: PreviewInput): Promise<TemplatePreview> {
  const errors: Record<string, string> = {};
  const variables: Record<string, VariableValue> = {};
  for (const [name, value] of Object.entries(input.variables ?? {}).slice(0, MAX_SAMPLE_VARIABLES)) {
    if (value !== null && value !== undefined) variables[name.trim()] = value as VariableValue;
  }
  const levels: ContentLevel[] = [];
  const c = input.content;
  if (c) levels.push({ subject: c.subject || null, from: c.from || null, text: c.text || null, html: c.html || null, css: c.css || null });

  const t = input.template;
  if (t) {
    const oneLine = (field: string, value: string | undefined) => {
      if (value !== undefined && /[\r\n]/.test(value)) errors[field] = 'must not contain a line break';
    };
    oneLine('subject', t.subject);
    oneLine('from', t.from);
    for (const field of ['text', 'html', 'css'] as const) {
      if (longerThan(t[field] ?? '', TEMPLATE_LIMITS.bodyChars)) errors[field] = `must be at most ${TEMPLATE_LIMITS.bodyChars} characters long`;
    }
    levels.push({ subject: t.subject || null, from: t.from || null, text: t.text || null, html: t.html || null, css: t.css || null });
  }

  const chainOf = input.slug || t?.parent || null;
  if (chainOf) {
    try {
      levels.push(...checkLayoutChain(chainOf, await findTemplateChain(services.store.db, project.id, chainOf, MAX_LAYOUT_CHAIN)));
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
      if (input.slug) errors.template = error.message;
      else errors.parent = `no layout "${chainOf}" in this project`;
    }
  }
  const empty = { subject: null, from: null, text: null, html: null, missing: [] };
  if (Object.keys(errors).length > 0) return { ...empty, errors };

  let merged;
  try {
    merged = mergeLevels(levels);
  } catch (error) {
    // A part the layouts would make too large is that part's problem; the others are the chain's.
    if (error instanceof MergedPartTooLargeError) return { ...empty, errors: { [error.part]: error.message } };
    if (!(error instanceof ApiError)) throw error;
    return { ...empty, errors: { template: error.message } };
  }
  for (const [field, text] of Object.entries(merged)) {
    const problem = findPartSizeProblem(text) ?? findTemplateSyntaxError(text);
    if (problem !== null) errors[field] = problem;
  }
  if (Object.keys(errors).length > 0) return { ...empty, errors };

  // Rendered as delivery renders, within the same limits (docs/templates.md, "Limits"): what
  // stops a render is that part's error, as it would fail the copy at delivery.
  const missing = new Set<string>();
  const render = (field: string, s: string | null, kind: PartKind) => {
    if (s === null) return null;
    try {
      const rendered = renderVariables(s, variables as Variables, { kind, syntax: 'handlebars', onMissing: (name) => missing.add(name) });
      for (const path of missingPathsIn(s, variables as Variables)) missing.add(path);
      return rendered;
    } catch (error) {
      if (!(error instanceof TemplateRenderError)) throw error;
      errors[field] = `cannot be rendered with these variables: ${error.message}`;
      return null;
    }
  };
  const rendered = {
    subject: render('subject', merged.subject, 'header'),
    // The From a send would get: the template's, else the project's default (send_message's rule).
    from: render('from', merged.from ?? defaultFromOf(services, project), 'header'),
    text: render('text', merged.text, 'text'),
    html: render('html', merged.html, 'html'),
  };
  if (Object.keys(errors).length > 0) return { ...empty, errors };
  return { ...rendered, errors, missing: [...missing] };
}

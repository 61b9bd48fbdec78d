// Merging a message's content with its template and the template's layouts, once, at acceptance.
//
// The levels, innermost first: the call's own content (when given), the template, its parent
// layout, the parent's parent... For the text and the HTML part, each independently, walking
// outwards:
//   - a level without the part leaves it as it is;
//   - a level whose part holds {{*}} wraps what is inside: every {{*}} becomes the inner part
//     (the empty string when no inner level had that part);
//   - a level whose part has no {{*}} gives the part only when no inner level did (inner content
//     wins; nothing given by the caller is dropped).
// Subject and From: the innermost level that has one. CSS: every level's, outermost first (so
// inner rules win the cascade), inlined into the HTML as one <style> element.
// {{variables}} are left in place: they are rendered per recipient at delivery (domain/variables.ts).
// Bounded: a layout with many {{*}} under another such layout multiplies what it wraps, so the
// size a wrap will make is computed before it is made, and over RENDER_LIMITS.partChars the merge
// is refused (412, docs/templates.md "Limits").
import { ApiError } from './errors.ts';
import { checkHeaderValue } from './headers.ts';
import { partTooLargeMessage, RENDER_LIMITS } from './variables.ts';

export interface ContentLevel {
  subject: string | null;
  from: string | null;
  text: string | null;
  html: string | null;
  css: string | null;
}

/** A template row as the chain lookup returns it. */
export interface TemplateLevel extends ContentLevel {
  slug: string;
  parentSlug: string | null;
}

export type MergedContent = Omit<ContentLevel, 'css'>;

/** Longest chain of a template and its layouts that is resolved (operations/templates.ts keeps
 * stored chains within this same bound, as MAX_TEMPLATE_CHAIN; here it guards against rows
 * written around it). */
export const MAX_LAYOUT_CHAIN = 8;

const SLOT = /\{\{\s*\*\s*\}\}/;
const SLOT_ALL = /\{\{\s*\*\s*\}\}/g;

/** The merge would make a part larger than RENDER_LIMITS.partChars: 412 naming the part and the layout. */
export class MergedPartTooLargeError extends ApiError {
  readonly part: 'text' | 'html';
  constructor(part: 'text' | 'html', level: ContentLevel, chars: number) {
    const where = 'slug' in level ? ` into template ${JSON.stringify((level as TemplateLevel).slug)}` : '';
    super('precondition_failed', `The ${part === 'html' ? 'HTML' : 'text'} part cannot be merged${where}: ${partTooLargeMessage(chars, true)}.`);
    this.name = 'MergedPartTooLargeError';
    this.part = part;
  }
}

function wrapPart(part: 'text' | 'html', level: ContentLevel, inner: string | null): string | null {
  const outer = level[part];
  if (outer === null) return inner;
  if (!SLOT.test(outer)) return inner ?? outer;
  const filling = inner ?? '';
  // The size first: the wrap is made only when it stays within the bound.
  let size = outer.length;
  for (const slot of outer.matchAll(SLOT_ALL)) size += filling.length - slot[0].length;
  if (size > RENDER_LIMITS.partChars) throw new MergedPartTooLargeError(part, level, size);
  // A function replacement: the inner text is inserted literally ($& and the like stay as they are).
  return outer.replace(SLOT_ALL, () => filling);
}

/** Inserts CSS as a <style> element: before </head> when the HTML has one, else at the start. */
export function inlineCss(html: string, css: string): string {
  if (css.trim() === '' || html.includes(css)) return html;
  const style = `<style type="text/css">\n${css}\n</style>`;
  const headEnd = html.search(/<\/head\s*>/i);
  if (headEnd !== -1) return html.slice(0, headEnd) + style + html.slice(headEnd);
  return style + html;
}

/**
 * A level's Subject and From are header values: checked when read as well as when saved
 * (operations/templates.ts), so a row written before the check, or around it, cannot put a
 * control character on the wire (domain/headers.ts).
 */
function checkLevelHeaders(level: ContentLevel): void {
  const where = 'slug' in level ? `of template ${JSON.stringify((level as TemplateLevel).slug)}` : 'of the content';
  if (level.subject !== null) checkHeaderValue(`the subject ${where}`, level.subject);
  if (level.from !== null) checkHeaderValue(`the from ${where}`, level.from);
}

/** Merges levels given innermost first. */
export function mergeLevels(levels: readonly ContentLevel[]): MergedContent {
  let subject: string | null = null;
  let from: string | null = null;
  let text: string | null = null;
  let html: string | null = null;
  const css: string[] = [];
  for (const level of levels) {
    checkLevelHeaders(level);
    subject ??= level.subject;
    from ??= level.from;
    text = wrapPart('text', level, text);
    html = wrapPart('html', level, html);
    if (level.css !== null && level.css.trim() !== '') css.unshift(level.css);
  }
  if (html !== null) for (const rule of css) html = inlineCss(html, rule);
  return { subject, from, text, html };
}

/**
 * Checks that rows (ordered from the template outwards, as the chain query returns them) form
 * one chain: each names the next as its parent, no slug repeats, the last has no parent.
 * Returns the chain, or a 412 naming the problem.
 */
export function checkLayoutChain(slug: string, rows: readonly TemplateLevel[]): TemplateLevel[] {
  if (rows.length === 0 || rows[0].slug !== slug) throw new ApiError('precondition_failed', `Template ${slug} does not exist in this project.`);
  const seen = new Set<string>();
  const chain: TemplateLevel[] = [];
  for (let i = 0; i < rows.length; i++) {
    const row = rows[i];
    if (seen.has(row.slug)) throw new ApiError('precondition_failed', `Template ${slug} cannot be used: its layouts form a loop at ${row.slug}.`);
    seen.add(row.slug);
    chain.push(row);
    if (row.parentSlug === null) return chain;
    const next = rows[i + 1];
    if (next === undefined || next.slug !== row.parentSlug) break;
  }
  const last = chain[chain.length - 1];
  if (chain.length >= MAX_LAYOUT_CHAIN) {
    throw new ApiError('precondition_failed', `Template ${slug} cannot be used: its chain of layouts is longer than ${MAX_LAYOUT_CHAIN} templates (or loops).`);
  }
  throw new ApiError('precondition_failed', `Template ${slug} cannot be used: its layout ${last.parentSlug} (parent of ${last.slug}) does not exist.`);
}

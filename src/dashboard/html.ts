// The dashboard's only way to build HTML: a tagged template in which every interpolated value is
// escaped, unless it is a SafeHtml made by this module (html`...` itself, or raw() for markup
// written in this repository). Message content, subjects, headers, filenames and recipient names
// are attacker-controlled (docs/dashboard.md): they reach a page only through escapeHtml.
//
// Text placed between tags is also isolated (docs/dashboard.md, "Hostile text"): each string is
// wrapped in <bdi>, so bidirectional controls and right-to-left characters in it (a filename
// "invoice\u202Efdp.exe") reorder nothing outside it, and the stylesheet lets it wrap anywhere.
// A value inside a tag (an attribute), or inside <textarea> (what a form posts back), is escaped
// only; inside <title>, where markup is not read, it is isolated by FSI ... PDI (U+2068, U+2069).

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;', '`': '&#96;' };

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"'`]/g, (c) => ESCAPES[c]);
}

export class SafeHtml {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value;
  }
}

export type HtmlValue = SafeHtml | string | number | boolean | null | undefined | readonly HtmlValue[];

/** Where a value lands: between tags, inside a tag, or inside an element whose content is not markup. */
type Place = 'text' | 'attribute' | 'textarea' | 'title';

/**
 * The place of a value appended to `out`, the markup before it in its template. Escaped values
 * hold no `<`, `>` or `"`, so the last `<` and `>` of `out` are markup of this repository. A
 * fragment with no tag before the value (html` aria-describedby="err-${f}"`) is inside an
 * attribute when a quote is open.
 */
function placeOf(out: string): Place {
  const open = out.lastIndexOf('<');
  const close = out.lastIndexOf('>');
  if (open === -1 && close === -1) return (out.split('"').length - 1) % 2 === 1 ? 'attribute' : 'text';
  if (open > close) return 'attribute';
  const tag = /^<(textarea|title)\b/i.exec(out.slice(open, close));
  return tag ? (tag[1].toLowerCase() as Place) : 'text';
}

function render(value: HtmlValue, place: Place): string {
  if (value === null || value === undefined || value === false) return '';
  if (value instanceof SafeHtml) return value.value;
  if (Array.isArray(value)) return value.map((v) => render(v, place)).join('');
  const escaped = escapeHtml(String(value));
  if (typeof value !== 'string' || value === '') return escaped;
  if (place === 'text') return `<bdi>${escaped}</bdi>`;
  if (place === 'title') return `\u2068${escaped}\u2069`;
  return escaped;
}

/** html`<p>${text}</p>`: every value escaped unless it is SafeHtml (strings between tags isolated in <bdi>); arrays are joined. */
export function html(strings: TemplateStringsArray, ...values: HtmlValue[]): SafeHtml {
  let out = strings[0];
  for (let i = 0; i < values.length; i++) out += render(values[i], placeOf(out)) + strings[i + 1];
  return new SafeHtml(out);
}

/** Markup written in this repository, never anything read from a request or the database. */
export function raw(markup: string): SafeHtml {
  return new SafeHtml(markup);
}

/** Bidirectional formatting characters (Unicode's UAX #9): marks, embeddings, overrides, isolates. */
const BIDI_CONTROLS = /[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

/**
 * A name whose letters must be read in the order they are stored (an attachment's filename): each
 * bidirectional control shown as its code point, "invoice[U+202E]fdp.exe" rather than
 * "invoiceexe.pdf".
 */
export function showBidiControls(text: string): string {
  return text.replace(BIDI_CONTROLS, (c) => `[U+${c.charCodeAt(0).toString(16).toUpperCase().padStart(4, '0')}]`);
}

/** A query string from parameters, empty values left out (already URL-encoded; escape when placed in HTML). */
export function queryString(params: Record<string, string | number | null | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== null && v !== undefined && v !== '') q.set(k, String(v));
  const s = q.toString();
  return s ? `?${s}` : '';
}

export function formatTime(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return '';
  // Every time the dashboard shows is UTC, and says so (docs/dashboard.md, "Times").
  return new Date(Number(ms)).toISOString().replace('T', ' ').replace(/\.\d{3}Z$/, ' UTC');
}

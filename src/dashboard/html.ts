// The dashboard's only way to build HTML: a tagged template in which every interpolated value is
// escaped, unless it is a SafeHtml made by this module (html`...` itself, or raw() for markup
// written in this repository). Message content, subjects, headers, filenames and recipient names
// are attacker-controlled (docs/dashboard.md): they reach a page only through escapeHtml.

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

function render(value: HtmlValue): string {
  if (value === null || value === undefined || value === false) return '';
  if (value instanceof SafeHtml) return value.value;
  if (Array.isArray(value)) return value.map(render).join('');
  return escapeHtml(String(value));
}

/** html`<p>${text}</p>`: every value escaped unless it is SafeHtml; arrays are joined. */
export function html(strings: TemplateStringsArray, ...values: HtmlValue[]): SafeHtml {
  let out = strings[0];
  for (let i = 0; i < values.length; i++) out += render(values[i]) + strings[i + 1];
  return new SafeHtml(out);
}

/** Markup written in this repository, never anything read from a request or the database. */
export function raw(markup: string): SafeHtml {
  return new SafeHtml(markup);
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
  return new Date(Number(ms)).toISOString().replace('T', ' ').replace(/\.\d{3}Z$/, 'Z');
}

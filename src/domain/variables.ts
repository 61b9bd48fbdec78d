// Rendering a message's {{variables}}: the template language (docs/templates.md, and why
// Handlebars in docs/decisions/0009-template-language.md).
//
// The syntax is Handlebars' logic-light subset: {{name}} and {{a.b}} substitution, {{{name}}} for
// trusted HTML, {{#if}}/{{else}}/{{/if}}, {{#unless}}, {{#each list}} (with {{this}}, {{@index}},
// {{@first}}, {{@last}}), {{#with}}, {{lookup}}, comments, and \{{ for a literal "{{". No
// partials, decorators or helpers of our own: a text is data from the API caller, and everything
// it can do is listed here.
//
// Where a value goes decides its escaping:
//   html    values are HTML-escaped (& < > " ' ` =); {{{name}}} inserts the value as given;
//   text    the text/plain part: values as given;
//   header  Subject, From and every other header: values as given; the rendered value then goes
//           through the header-value check (domain/headers.ts) where it is composed.
//
// Compatibility with the plain substitution of earlier versions, for existing templates:
//   - {{*}} is a layout's slot (domain/templates.ts). After a merge none is left; one that is
//     rendered anyway stays in the text as it is, as before.
//   - A name that is not a Handlebars path ({{first name}}, {{e@mail}}, {{true}}) is looked up as
//     the literal name it always was (rewritten to Handlebars' [literal] segment before compiling).
//   - A flat variable whose name holds dots ({"user.name": "Ann"}) is found by {{user.name}}, as
//     before, unless a variable `user` exists.
//   - A missing or null variable renders as the empty string.
//   - Messages accepted before this syntax existed carry no `syntax` in their payload and are
//     rendered with the plain substitution they were accepted under (renderLegacyVariables).
//
// Compiled once per distinct (part kind, text): the cache below is shared by every message and
// recipient, so a message's parts compile once and each recipient only runs the compiled function.
//
// Bounded (docs/templates.md, "Limits"): loops within loops, or a large value substituted many
// times, can make a small text render to gigabytes. Every render counts what it appends and how
// many steps it takes as it goes, and stops at RENDER_LIMITS with a RenderLimitError: the
// compiled code passes each chunk it appends to the output through `budget` (a check per chunk,
// nothing per character), and {{#each}} counts its turns.
import Handlebars from 'handlebars';
import { withFields } from './objects.ts';

/** A variable's value: JSON as given (null counts as absent). */
export type VariableValue = string | number | boolean | null | readonly VariableValue[] | { readonly [name: string]: VariableValue };

export type Variables = Readonly<Record<string, VariableValue>>;

/** Where a text goes: it decides escaping (see above). */
export type PartKind = 'html' | 'text' | 'header';

/** 'handlebars' for messages accepted with this language; 'legacy' for the plain {{name}} of before. */
export type TemplateSyntax = 'handlebars' | 'legacy';

/** The helpers a template may call. Handlebars' `log` is left out: a template must not write logs. */
const KNOWN_HELPERS = new Set(['if', 'unless', 'each', 'with', 'lookup']);
const HELPER_ARITY = new Map<string, number>([['if', 1], ['unless', 1], ['each', 1], ['with', 1], ['lookup', 2]]);
/** Of KNOWN_HELPERS, those that take a block ({{#if a}}...{{/if}}): lookup is the one that does not. */
const BLOCK_HELPERS = new Set(['if', 'unless', 'each', 'with']);
/** What Handlebars registers for its own use: a bare {{name}} would call it, not read a variable. */
const INTERNAL_HELPERS = new Set(['helperMissing', 'blockHelperMissing']);

const engine = Handlebars.create();
engine.unregisterHelper('log');
// Handlebars writes to the console when a template reads an inherited property ({{toString}}):
// the read renders nothing, as any missing variable does, and a template is the API caller's data,
// which must not write to the service's output (its log is JSON lines: docs/operations.md).
// The logger is Handlebars' one shared object; 4 is above its highest level, 'error' (3).
Handlebars.logger.level = 4;

export class TemplateSyntaxError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TemplateSyntaxError';
  }
}

/**
 * Thrown by renderVariables when a valid text cannot be rendered with the values given (an object
 * value whose `toString` is not a function cannot be printed): only other values can change that,
 * so at delivery that copy fails instead of being retried (docs/delivery.md). The message is the
 * engine's, on one line, without a stack.
 */
export class TemplateRenderError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TemplateRenderError';
  }
}

/**
 * What rendering one text (a part, a header) may produce and do (docs/templates.md, "Limits").
 * partChars: far above what transactional mail holds (a receipt or a notice is tens of KB; Gmail
 * shows only the first 102 KB of an HTML part), a quarter of the default request body
 * (--max-body-bytes, 20 MiB), and small enough that a delivery process composing many copies at
 * once stays within its memory. steps: each chunk appended to the output (a run of text, a value,
 * a block's result) and each turn of a loop; a text that reaches partChars in chunks of five
 * characters or more fits, and a render stops at a million steps in 0.15 to 0.5 s (measured).
 */
export const RENDER_LIMITS = Object.freeze({
  /** characters of one rendered part; also what merging layouts may make of a part (domain/templates.ts) */
  partChars: 5 * 1024 * 1024,
  steps: 1_000_000,
});

/** A render stopped at RENDER_LIMITS: like any TemplateRenderError, at delivery that copy fails (RENDER_FAILED). */
export class RenderLimitError extends TemplateRenderError {
  constructor(message: string) {
    super(message);
    this.name = 'RenderLimitError';
  }
}

/** 1234567 as "1,234,567". */
const count = (n: number) => String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ',');

/**
 * Why a part is over RENDER_LIMITS.partChars, for a 412 at acceptance or a copy's RENDER_FAILED:
 * `chars` it is as given (null: it renders to more), or would be once `merged` into its layouts.
 */
export function partTooLargeMessage(chars: number | null, merged = false): string {
  const limit = `${count(RENDER_LIMITS.partChars)} characters (${RENDER_LIMITS.partChars / (1024 * 1024)} MiB) one part may be (docs/templates.md, "Limits")`;
  if (chars === null) return `it renders to more than the ${limit}`;
  return `it ${merged ? 'would be' : 'is'} ${count(chars)} characters, more than the ${limit}`;
}

/** An engine error's message on one line (it may show the place over several). */
function oneLine(error: unknown): string {
  return String((error as Error)?.message ?? error).replace(/\s+/g, ' ').trim();
}

// ---------------------------------------------------------------------------------------------
// Compatibility rewrite: legacy names become [literal] segments; {{*}} stays literal.

/** One {{ }} or {{{ }}} with its content. Mustaches do not nest, so this finds each one. */
const MUSTACHE = /(\\?)\{\{(\{?)([^{}]*)\}\}(\}?)/g;
const SLOT_CONTENT = /^\s*\*\s*$/;
/** A Handlebars path segment (its ID token) */
const ID_SEGMENT = /^[^\s!"#%-,./;->@[-^`{-~]+$/;
const LITERAL_WORDS = new Set(['true', 'false', 'null', 'undefined', 'else', 'this']);

function isHandlebarsPath(token: string): boolean {
  if (token === 'this' || token === '.') return true;
  const segments = token.replace(/^(\.\.\/)+/, '').replace(/^this[./]/, '').split(/[./]/);
  return segments.every((s) => ID_SEGMENT.test(s) && !/^-?\d+(\.\d+)?$/.test(s)) && !LITERAL_WORDS.has(token);
}

/**
 * The name a legacy {{...}} means, when its content is not Handlebars syntax: a single word that is
 * no Handlebars path, or several words that do not start with a helper. Null: leave it to Handlebars.
 */
function legacyName(content: string): string | null {
  const c = content.trim();
  if (c === '' || /^[#/^!>&{~@"'([]/.test(c) || c.startsWith('else')) return null;
  if (c.includes(']')) return null;
  const words = c.split(/\s+/);
  if (words.length === 1) return isHandlebarsPath(c) ? null : c;
  if (KNOWN_HELPERS.has(words[0]) || /[="()]/.test(c)) return null;
  return c;
}

function rewriteLegacy(text: string): string {
  if (!text.includes('{{')) return text;
  return text.replace(MUSTACHE, (whole, escaped: string, open: string, content: string, close: string) => {
    if (escaped) return whole;
    if (SLOT_CONTENT.test(content) && open === '' && close === '') return '\\{{*}}';
    const name = legacyName(content);
    if (name === null) return whole;
    return `{{${open}[${name}]${close}}}`;
  });
}

// ---------------------------------------------------------------------------------------------
// Checking: parse errors, partials, decorators and unknown helpers are refused before anything is
// stored, so delivery never meets a text it cannot render.

type Node = { type: string; [key: string]: unknown };

function checkNode(node: unknown): void {
  if (!node || typeof node !== 'object') return;
  if (Array.isArray(node)) {
    for (const n of node) checkNode(n);
    return;
  }
  const n = node as Node;
  switch (n.type) {
    case 'PartialStatement':
    case 'PartialBlockStatement':
      throw new TemplateSyntaxError('partials ({{> name}}) are not supported');
    case 'Decorator':
    case 'DecoratorBlock':
      throw new TemplateSyntaxError('decorators ({{* name}}) are not supported');
    case 'MustacheStatement':
    case 'BlockStatement':
    case 'SubExpression': {
      const path = n.path as Node & { original?: unknown; parts?: unknown[]; data?: unknown };
      const params = (n.params as unknown[] | undefined) ?? [];
      const hash = n.hash as { pairs?: unknown[] } | undefined;
      const callsHelper = params.length > 0 || (hash?.pairs?.length ?? 0) > 0 || n.type === 'SubExpression';
      const name = path.type === 'PathExpression' ? String(path.original) : '';
      const block = n.type === 'BlockStatement';
      // A raw block ({{{{name}}}}...{{{{/name}}}}) passes its content to a helper of that name;
      // there is none, so the content would vanish without a word.
      if (block && typeof (n.openStrip as { open?: unknown } | undefined)?.open !== 'boolean') {
        throw new TemplateSyntaxError(`raw blocks ({{{{${name}}}}}) are not supported: to write {{ as text, put a backslash before it (\\{{)`);
      }
      if (callsHelper && path.type === 'PathExpression' && !KNOWN_HELPERS.has(name)) {
        throw new TemplateSyntaxError(`unknown helper "${name}" (the helpers are ${[...KNOWN_HELPERS].join(', ')})`);
      }
      // A bare name that Handlebars resolves to a helper before any variable: its own internal
      // ones are not for templates, and a helper is called the way it is made to be called.
      const bare = path.type === 'PathExpression' && path.data === false && Array.isArray(path.parts) && path.parts.length === 1 && path.parts[0] === name;
      if (bare && INTERNAL_HELPERS.has(name)) {
        throw new TemplateSyntaxError(`"${name}" is the name of Handlebars' own machinery, not a helper or a variable (for a variable of that name write {{this.${name}}})`);
      }
      if (bare && BLOCK_HELPERS.has(name) && !block) {
        throw new TemplateSyntaxError(`{{${name}}} is a block: write {{#${name} value}}...{{/${name}}} (for a variable of that name write {{this.${name}}})`);
      }
      if (bare && KNOWN_HELPERS.has(name) && !BLOCK_HELPERS.has(name) && block) {
        throw new TemplateSyntaxError(`{{#${name}}} is not a block: write {{${name} ...}}`);
      }
      // The helpers' own arity, checked here so that rendering never throws on it.
      const arity = HELPER_ARITY.get(name);
      if (arity !== undefined && (callsHelper || block || bare) && params.length !== arity) {
        throw new TemplateSyntaxError(`{{${block ? '#' : ''}${name}}} takes ${arity === 1 ? 'one argument' : `${arity} arguments`}, got ${params.length}`);
      }
      break;
    }
  }
  for (const [key, value] of Object.entries(n)) if (key !== 'loc' && value && typeof value === 'object') checkNode(value);
}

function parse(text: string): hbs.AST.Program {
  try {
    const ast = Handlebars.parse(rewriteLegacy(text));
    checkNode(ast);
    return ast;
  } catch (error) {
    if (error instanceof TemplateSyntaxError) throw error;
    // Handlebars' message names the line and shows the place; keep it, without a stack.
    throw new TemplateSyntaxError(oneLine(error));
  }
}

/** Null when the text is a valid template, else what is wrong (for a 406/412 message). */
export function findTemplateSyntaxError(text: string | null | undefined): string | null {
  if (typeof text !== 'string' || !text.includes('{{')) return null;
  try {
    compiled(text, 'text');
    return null;
  } catch (error) {
    if (error instanceof TemplateSyntaxError) return error.message;
    throw error;
  }
}

// ---------------------------------------------------------------------------------------------
// The bound on one render (RENDER_LIMITS), counted as it goes. Rendering is synchronous, so one
// budget serves every render in turn: renderVariables fills it before each.

let stepsLeft = 0;
let charsLeft = 0;

function stepsExceeded(): never {
  throw new RenderLimitError(`it takes more than ${count(RENDER_LIMITS.steps)} steps to render (loops within loops?), the most one part may take (docs/templates.md, "Limits")`);
}

/**
 * What the compiled code calls (BoundedJavaScriptCompiler below): `out` with every chunk it
 * appends to the output (a run of text, a value, escaped or not), `block` with a block's result
 * (its chunks were counted inside it, so it counts as a step only), `turn` at each turn of a loop.
 */
const budget = {
  out(chunk: unknown): string {
    // The string the engine's own `buffer += chunk` would make (a value that cannot be printed throws here, as there).
    const s = typeof chunk === 'string' ? chunk : '' + (chunk as string);
    if ((charsLeft -= s.length) < 0) throw new RenderLimitError(partTooLargeMessage(null));
    if (--stepsLeft < 0) stepsExceeded();
    return s;
  },
  block(result: unknown): unknown {
    if (--stepsLeft < 0) stepsExceeded();
    return result;
  },
  turn(): void {
    if (--stepsLeft < 0) stepsExceeded();
  },
};

// Handlebars compiles a text in two passes: Compiler turns the syntax tree into opcodes, and
// JavaScriptCompiler turns those into code, whose every append to the output goes through
// appendToBuffer (the method Handlebars names as the one to override for other buffering). Both
// are subclassed on this engine only: a block's append gets an opcode of its own, and every
// append is wrapped in a call to `budget`. The compiled code is Handlebars' precompiled source,
// made into functions here with `budget` in their scope. test/domain/templates.test.ts checks
// every chunk is counted, so an upgrade that changes these internals fails there.

interface Opcode {
  opcode: string;
}
/** Each pass makes the compilers of nested blocks with `new this.compiler()`: a subclass sets it to itself. */
interface HandlebarsCompiler {
  compiler: unknown;
  opcodes: Opcode[];
  BlockStatement(block: unknown): void;
}
interface HandlebarsJavaScriptCompiler {
  compiler: unknown;
  appendToBuffer(source: unknown, location: unknown, explicit?: boolean): unknown;
  append(): void;
  pushSource(source: unknown): void;
}
type CompilerClass<T> = new () => T;
const internals = engine as unknown as { Compiler: CompilerClass<HandlebarsCompiler>; JavaScriptCompiler: CompilerClass<HandlebarsJavaScriptCompiler> };

class BoundedCompiler extends internals.Compiler {
  override BlockStatement(block: unknown): void {
    super.BlockStatement(block);
    const last = this.opcodes[this.opcodes.length - 1];
    if (last?.opcode !== 'append') throw new Error('handlebars no longer ends a block with its append opcode: see domain/variables.ts');
    last.opcode = 'appendBlock';
  }
}
BoundedCompiler.prototype.compiler = BoundedCompiler;

class BoundedJavaScriptCompiler extends internals.JavaScriptCompiler {
  declare appendingBlock: boolean | undefined;
  override appendToBuffer(source: unknown, location: unknown, explicit?: boolean): unknown {
    return super.appendToBuffer([this.appendingBlock ? 'budget.block(' : 'budget.out(', source, ')'], location, explicit);
  }
  appendBlock(): void {
    // Text before the block is a chunk of its own: written out first (as `append` would), counted.
    this.pushSource('');
    this.appendingBlock = true;
    try {
      this.append();
    } finally {
      this.appendingBlock = false;
    }
  }
}
BoundedJavaScriptCompiler.prototype.compiler = BoundedJavaScriptCompiler;
internals.Compiler = BoundedCompiler;
internals.JavaScriptCompiler = BoundedJavaScriptCompiler;

// {{#each}} (and a {{#list}} section, which Handlebars runs through it) counts each turn: a loop
// whose body appends nothing still costs time.
const builtInEach = engine.helpers.each as (this: unknown, context: unknown, options: Handlebars.HelperOptions) => unknown;
engine.registerHelper('each', function (this: unknown, context: unknown, options: Handlebars.HelperOptions) {
  const body = options.fn;
  // Called without a block ({{each list}}): as the engine's own, which has nothing to loop.
  if (typeof body !== 'function') return builtInEach.call(this, context, options);
  // options is the engine's own object for this call: its fn is replaced, nothing else is touched.
  options.fn = function (this: unknown, ...args: Parameters<typeof body>) {
    budget.turn();
    return body.apply(this, args);
  } as typeof body;
  return builtInEach.call(this, context, options);
});

// ---------------------------------------------------------------------------------------------
// Compiling, cached by text.

type Compiled = (context: unknown, options?: Handlebars.RuntimeOptions) => string;

const MAX_CACHED = 2_000;
const MAX_CACHED_CHARS = 32 * 1024 * 1024;
/**
 * One map per escaping, keyed by the text itself: delivery passes the same string instance (the
 * payload's part) for every recipient, and V8 keeps a string's hash on it, so a hit costs no pass
 * over the text.
 */
const caches = { html: new Map<string, Compiled>(), text: new Map<string, Compiled>() };
let cachedCount = 0;
let cachedChars = 0;

function compiled(text: string, kind: PartKind): Compiled {
  const cache = kind === 'html' ? caches.html : caches.text;
  const hit = cache.get(text);
  if (hit) {
    // Least recently used out first: a hit moves to the end.
    cache.delete(text);
    cache.set(text, hit);
    return hit;
  }
  const ast = parse(text);
  let fn: Compiled;
  try {
    // As Handlebars' own compile makes its functions (from the same source), with `budget` in scope.
    const source = engine.precompile(ast, { noEscape: kind !== 'html', strict: false }) as unknown as string;
    const spec = new Function('budget', `return ${source};`)(budget) as Parameters<typeof engine.template>[0];
    fn = engine.template(spec) as Compiled;
  } catch (error) {
    throw new TemplateSyntaxError(String((error as Error).message ?? error));
  }
  // Rendered once without values: what fails even so ({{each list}} without a block) is the text's
  // fault, found at parsing, not at delivery. Passing a limit is not (the real render reports it).
  stepsLeft = RENDER_LIMITS.steps;
  charsLeft = RENDER_LIMITS.partChars;
  try {
    fn({});
  } catch (error) {
    if (!(error instanceof RenderLimitError)) throw new TemplateSyntaxError(String((error as Error).message ?? error));
  }
  cache.set(text, fn);
  cachedCount += 1;
  cachedChars += text.length;
  while (cachedCount > MAX_CACHED || (cachedChars > MAX_CACHED_CHARS && cachedCount > 1)) {
    const from = caches.html.size >= caches.text.size ? caches.html : caches.text;
    const oldest = from.keys().next().value as string;
    from.delete(oldest);
    cachedCount -= 1;
    cachedChars -= oldest.length;
  }
  return fn;
}

/**
 * Flat names with dots ({"user.name": ...}) also reachable as paths, unless the head is taken.
 * Only own keys are read and written: a name such as "a.__proto__.x" or "a.constructor.x" must
 * never reach an object's prototype (it would change every object of the process).
 */
function contextOf(variables: Variables): Variables {
  let out: Record<string, VariableValue> | null = null;
  for (const name of Object.keys(variables)) {
    if (!name.includes('.')) continue;
    const parts = name.split('.');
    if (parts.some((p) => p === '' || p === '__proto__') || Object.hasOwn(variables, parts[0])) continue;
    out ??= { ...variables };
    let node = out;
    for (let i = 0; i < parts.length - 1; i++) {
      const next = Object.hasOwn(node, parts[i]) ? node[parts[i]] : undefined;
      if (next === undefined || next === null) node[parts[i]] = {};
      else if (typeof next !== 'object' || Array.isArray(next)) break;
      node = node[parts[i]] as Record<string, VariableValue>;
      if (i === parts.length - 2 && !Object.hasOwn(node, parts[i + 1])) node[parts[i + 1]] = variables[name];
    }
  }
  return out ?? variables;
}

export interface RenderOptions {
  kind?: PartKind;
  syntax?: TemplateSyntax;
  /** told every simple {{name}} that rendered nothing because it has no value */
  onMissing?: (name: string) => void;
}

/**
 * Renders a text with variables. Throws TemplateSyntaxError for a text that is not valid syntax
 * (acceptance refuses those first, with findTemplateSyntaxError), TemplateRenderError for values
 * it cannot be rendered with, RenderLimitError (one of those) as soon as the render passes
 * RENDER_LIMITS. A text without {{ is not rendered: it is returned as it is, whatever its length.
 */
export function renderVariables(text: string, variables: Variables, options: RenderOptions = {}): string {
  const kind = options.kind ?? 'text';
  if (options.syntax === 'legacy') return renderLegacyVariables(text, variables);
  if (!text.includes('{{')) return text;
  const fn = compiled(text, kind);
  stepsLeft = RENDER_LIMITS.steps;
  charsLeft = RENDER_LIMITS.partChars;
  const onMissing = options.onMissing;
  const helpers = onMissing
    ? {
        helperMissing(...args: unknown[]) {
          const opts = args[args.length - 1] as { name: string; fn?: unknown };
          // A simple {{name}} without a value; sections ({{#name}}) are conditions, not substitutions.
          if (args.length === 1 && !opts.fn) onMissing(opts.name);
          return undefined;
        },
      }
    : undefined;
  try {
    return fn(contextOf(variables), helpers ? { helpers } : undefined);
  } catch (error) {
    if (error instanceof RenderLimitError) throw error;
    throw new TemplateRenderError(oneLine(error));
  }
}

/**
 * Null when a part may go on to be rendered, else why not (for a 412): a part that holds {{ and is
 * longer than RENDER_LIMITS.partChars as given would render past it (docs/templates.md, "Limits").
 */
export function findPartSizeProblem(text: string | null | undefined): string | null {
  if (typeof text !== 'string' || text.length <= RENDER_LIMITS.partChars || !text.includes('{{')) return null;
  return partTooLargeMessage(text.length);
}

// ---------------------------------------------------------------------------------------------
// The plain substitution of earlier versions, for messages accepted under it.

const LEGACY_VARIABLE = /\{\{\s*([^{}*][^{}]*?)\s*\}\}/g;

/**
 * {{name}} replaced by the value (as given, no escaping), missing names by ''. Bounded like the
 * language (RENDER_LIMITS.partChars): the size is counted at each substitution.
 */
export function renderLegacyVariables(text: string, variables: Variables): string {
  let size = text.length;
  return text.replace(LEGACY_VARIABLE, (m: string, name: string) => {
    const value = Object.hasOwn(variables, name) ? variables[name] : undefined;
    const s = value === undefined || value === null ? '' : typeof value === 'object' ? JSON.stringify(value) : String(value);
    size += s.length - m.length;
    if (size > RENDER_LIMITS.partChars) throw new RenderLimitError(partTooLargeMessage(null));
    return s;
  });
}

/** Global variables overridden by the recipient's own. */
export function mergeVariables(global: Variables, recipient: Variables | null | undefined): Variables {
  return recipient ? withFields(global, recipient) : global;
}

// ---------------------------------------------------------------------------------------------
// What a text uses.

/**
 * The head name of every path a text's expressions use, in order ({{ name }} -> name, {{user.a}}
 * -> user, {{#each items}} -> items), not counting @data, `this` or names inside a block's own
 * context. Used to check the values that go into headers.
 */
export function variableNamesIn(text: string | null | undefined): string[] {
  const names: string[] = [];
  walkRootPaths(text, (path) => names.push(path.parts[0]));
  return names;
}

/** The blocks that render what they hold once at most ({{#if}}, {{#unless}}, {{#with}}). */
const ONCE_BLOCKS = new Set(['if', 'unless', 'with']);

/**
 * Whether the text has a block that may repeat: {{#each}} (also as {{^each}}) or a section over a
 * variable ({{#items}}, which Handlebars repeats for each item of a list). What makes the cost of
 * rendering a text depend on its values rather than on its length, as a list of many items iterated
 * inside another does. A text that does not parse has none.
 */
export function hasLoop(text: string): boolean {
  if (!/\{\{~?\s*[#^]/.test(text)) return false;
  let ast: hbs.AST.Program;
  try {
    ast = parse(text);
  } catch {
    return false;
  }
  const visit = (node: unknown): boolean => {
    if (!node || typeof node !== 'object') return false;
    if (Array.isArray(node)) return node.some(visit);
    const n = node as Node;
    if (n.type === 'BlockStatement' && !ONCE_BLOCKS.has(String((n.path as { original?: unknown }).original))) return true;
    for (const [key, value] of Object.entries(n)) if (key !== 'loc' && value && typeof value === 'object' && visit(value)) return true;
    return false;
  };
  return visit(ast);
}

/**
 * The dotted paths ({{user.name}}) substituted at the top level of a text that have no value in
 * `variables`: what the preview adds to the simple names renderVariables reports as missing.
 */
export function missingPathsIn(text: string | null | undefined, variables: Variables): string[] {
  const missing: string[] = [];
  const context = contextOf(variables);
  walkRootPaths(text, (path, substituted) => {
    if (!substituted || path.parts.length < 2) return;
    let value: unknown = context;
    for (const part of path.parts) {
      value = value !== null && typeof value === 'object' && Object.prototype.hasOwnProperty.call(value, part) ? (value as Record<string, unknown>)[part] : undefined;
    }
    if (value === undefined || value === null) missing.push(path.original);
  });
  return missing;
}

/**
 * Calls `visit` for every path of the text's top-level context (outside {{#each}}, {{#with}} and
 * sections, whose names are their items'), with whether it is substituted ({{path}} itself rather
 * than a helper's argument or a block's condition). A text that does not parse has none.
 */
function walkRootPaths(text: string | null | undefined, onPath: (path: hbs.AST.PathExpression, substituted: boolean) => void): void {
  if (typeof text !== 'string' || !text.includes('{{')) return;
  let ast: hbs.AST.Program;
  try {
    ast = parse(text);
  } catch {
    return;
  }
  const visit = (node: unknown, inScope: boolean, substituted = false): void => {
    if (!node || typeof node !== 'object') return;
    if (Array.isArray(node)) {
      for (const n of node) visit(n, inScope);
      return;
    }
    const n = node as Node;
    if (n.type === 'PathExpression') {
      const p = n as unknown as hbs.AST.PathExpression;
      if (!p.data && p.depth === 0 && p.parts.length > 0 && !inScope && !(n.original === 'this' || String(n.original).startsWith('this'))) {
        if (!KNOWN_HELPERS.has(p.parts[0]) || p.original !== p.parts[0]) onPath(p, substituted);
      }
      return;
    }
    if (n.type === 'BlockStatement') {
      const b = n as unknown as hbs.AST.BlockStatement;
      visit(b.path.type === 'PathExpression' && KNOWN_HELPERS.has((b.path as hbs.AST.PathExpression).original) ? null : b.path, inScope);
      visit(b.params, inScope);
      visit(b.hash, inScope);
      // each and with change the context: names inside are the items' own.
      const helper = b.path.type === 'PathExpression' ? (b.path as hbs.AST.PathExpression).original : '';
      const scoped = inScope || helper === 'each' || helper === 'with' || !KNOWN_HELPERS.has(helper);
      visit(b.program, scoped);
      visit(b.inverse, inScope);
      return;
    }
    if (n.type === 'MustacheStatement' || n.type === 'SubExpression') {
      const m = n as unknown as hbs.AST.MustacheStatement;
      const hasArgs = m.params.length > 0 || (m.hash?.pairs.length ?? 0) > 0;
      const isHelper = m.path.type === 'PathExpression' && KNOWN_HELPERS.has((m.path as hbs.AST.PathExpression).original) && hasArgs;
      if (!isHelper) visit(m.path, inScope, n.type === 'MustacheStatement' && !hasArgs);
      visit(m.params, inScope);
      visit(m.hash, inScope);
      return;
    }
    for (const [key, value] of Object.entries(n)) if (key !== 'loc' && value && typeof value === 'object') visit(value, inScope);
  };
  visit(ast, false);
}

/** True when a value (or anything inside it) holds a line break or NUL: not for a header. */
export function valueHasLineBreak(value: VariableValue | undefined): boolean {
  if (value === undefined || value === null) return false;
  if (typeof value === 'string') return /[\r\n\0]/.test(value);
  if (typeof value !== 'object') return false;
  return (Array.isArray(value) ? value : Object.values(value)).some((v) => valueHasLineBreak(v as VariableValue));
}

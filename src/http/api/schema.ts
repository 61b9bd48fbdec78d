// The vocabulary of the method table's argument schemas (TypeBox: JSON Schema values that the
// OpenAPI document shows as they are), and how a request is checked against them.
//
// The leaves keep the leniency real clients need (docs/api/README.md, compatibility.md): a string
// argument also takes a number or boolean (read as its spelling), a whole number also takes its
// decimal spelling, a boolean also takes 0/1 and "true"/"false"/"1"/"0"/"yes"/"no"/"on"/"off";
// null means absent; keys a method does not know are ignored. The method's run converts what the
// schema admitted into the operation's typed input (domain/args.ts).
//
// Schemas are compiled once, when the method table is built (TypeCompiler, docs/decisions/0007-api-schemas.md);
// a request costs one compiled check, and the error path is walked only for a refused request.
import { Type, type TSchema, type TObject, type TProperties } from '@sinclair/typebox';
import { TypeCompiler, type TypeCheck } from '@sinclair/typebox/compiler';
import { ValueErrorType, type ValueError } from '@sinclair/typebox/errors';
import { wrongType, type Json } from '../../domain/args.ts';
import { ApiError, callError } from '../../domain/errors.ts';

/**
 * What a refused value should have been, the phrase of Args' messages ("a string"), kept on the
 * schema under a symbol: TypeBox copies symbol keys when it clones a schema (Optional does), and
 * JSON (the OpenAPI document) leaves them out.
 */
const EXPECTED_KEY = Symbol.for('posthorn.expected');

type Marked = { [EXPECTED_KEY]?: string };

function expect<T extends TSchema>(schema: T, phrase: string): T {
  (schema as unknown as Marked)[EXPECTED_KEY] = phrase;
  return schema;
}

function expectedOf(schema: TSchema): string | undefined {
  const own = (schema as unknown as Marked)[EXPECTED_KEY];
  if (own !== undefined) return own;
  // A nullable union names what its non-null member expects.
  for (const m of (schema as { anyOf?: TSchema[] }).anyOf ?? []) {
    const phrase = (m as unknown as Marked)[EXPECTED_KEY];
    if (m.type !== 'null' && phrase !== undefined) return phrase;
  }
  return undefined;
}
const EXPECTED = { get: (schema: TSchema | undefined) => (schema === undefined ? undefined : expectedOf(schema)) };

type Doc = { description?: string };

/**
 * A string; a number or boolean is read as its spelling. maxLength is documentation: the method
 * or operation checks it, with a message that names the limit.
 */
export function str(doc: Doc & { maxLength?: number } = {}) {
  const { maxLength, description } = doc;
  const text = [description, maxLength !== undefined ? `(at most ${maxLength} characters)` : ''].filter(Boolean).join(' ');
  return expect(Type.Union([Type.String(), Type.Number(), Type.Boolean()], text ? { description: text } : {}), 'a string');
}

/** A string-only value (no leniency): ids the API itself made. */
export function text(doc: Doc = {}) {
  return expect(Type.String(doc), 'a string');
}

/** A range as people say it: "1 to 65,535", "at least 1", "at most 10"; '' for none. */
function rangeWords(min: number | undefined, max: number | undefined): string {
  const n = (v: number) => v.toLocaleString('en-US');
  if (min !== undefined && max !== undefined) return `${n(min)} to ${n(max)}`;
  if (min !== undefined) return `at least ${n(min)}`;
  if (max !== undefined) return `at most ${n(max)}`;
  return '';
}

/**
 * A whole number, or its decimal spelling ("" counts as absent). The range is shown in the
 * description; the method checks it, naming its bounds.
 */
export function int(doc: Doc & { minimum?: number; maximum?: number } = {}) {
  const { minimum, maximum, description } = doc;
  const range = rangeWords(minimum, maximum);
  const text = [description, range && `(${range})`].filter(Boolean).join(' ');
  return expect(Type.Union([Type.Integer(), Type.String({ pattern: '^\\s*(-?\\d+)?\\s*$' })], text ? { description: text } : {}), 'a whole number');
}


const BOOL_WORDS = '^\\s*([Tt][Rr][Uu][Ee]|[Ff][Aa][Ll][Ss][Ee]|1|0|[Yy][Ee][Ss]|[Nn][Oo]|[Oo][Nn]|[Oo][Ff][Ff])\\s*$';

/** true/false, 0/1, or one of the words "true", "false", "1", "0", "yes", "no", "on", "off". */
export function bool(doc: Doc = {}) {
  return expect(Type.Union([Type.Boolean(), Type.Literal(0), Type.Literal(1), Type.String({ pattern: BOOL_WORDS })], doc), 'true or false');
}

/** One of a set of words. */
export function oneOf<const T extends readonly string[]>(words: T, doc: Doc = {}) {
  return expect(Type.Union(words.map((w) => Type.Literal(w)), doc), `one of ${words.join(', ')}`);
}

/** An object whose known keys are described; other keys are ignored. */
export function obj<T extends TProperties>(properties: T, doc: Doc = {}): TObject<T> {
  return expect(Type.Object(properties, doc), 'an object');
}

/** An object of free-form keys (settings, variables). */
export function map(values: TSchema = Type.Unknown(), doc: Doc = {}) {
  return expect(Type.Record(Type.String(), values, doc), 'an object');
}

export function arr(items: TSchema, doc: Doc = {}) {
  return expect(Type.Array(items, doc), 'an array');
}

/** One of several forms, named together in errors ("a string or an object"). */
export function anyOf(schemas: TSchema[], phrase: string, doc: Doc = {}) {
  return expect(Type.Union(schemas, doc), phrase);
}

/** Any JSON value: the method reads it itself (its forms are in the description). */
export function any(doc: Doc = {}) {
  return Type.Unknown(doc);
}

/** A required argument: absent, null and "" are 400 (null is let through to the method, which says so). */
export function required<T extends TSchema>(schema: T) {
  return expect(Type.Union([schema, Type.Null()]), EXPECTED.get(schema) ?? 'valid');
}

/** An optional argument: null means absent. */
export function optional<T extends TSchema>(schema: T) {
  return Type.Optional(expect(Type.Union([schema, Type.Null()]), EXPECTED.get(schema) ?? 'valid'));
}

/** The request's top-level uid (beside api_key) as a method reads it; `description`: for what. */
export function topLevelUid(description: string) {
  return Type.Optional(Type.Union([Type.String(), Type.Number(), Type.Null()], { description }));
}

/** The `arguments` of a method that takes none: anything given is ignored. */
export const NO_ARGUMENTS = obj({});

/** A compiled arguments schema with the check every request goes through. */
export interface ArgsChecker {
  readonly schema: TObject;
  /** Throws the method's 400 or 406 for `args` (the request's `arguments`, {} when absent). */
  check(args: Json): void;
}

export function compileArgs(schema: TObject): ArgsChecker {
  const compiled = TypeCompiler.Compile(schema);
  return {
    schema,
    check(args) {
      if (!compiled.Check(args)) throw firstError(compiled, args);
    },
  };
}

/** "/settings/tracking" -> "settings.tracking"; "/addresses/0" -> "addresses[0]"; "" -> "arguments". */
export function argumentPath(pointer: string): string {
  if (pointer === '') return 'arguments';
  let out = '';
  for (const raw of pointer.slice(1).split('/')) {
    const part = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    out += /^\d+$/.test(part) ? `[${part}]` : out === '' ? part : `.${part}`;
  }
  return out;
}

/** The error the client sees: a missing required argument first (400), else the first wrong value (406). */
function firstError(compiled: TypeCheck<TSchema>, value: Json): ApiError {
  let first: ApiError | null = null;
  let seen = 0;
  for (const error of compiled.Errors(value)) {
    if (++seen > 64) break;
    const found = describe(error);
    if (found.status === 'bad_request') return found;
    first ??= found;
  }
  return first ?? callError('the arguments are not valid');
}

/** JSON Schema's name of a value's type, to find the member of a union the value was meant for. */
function jsonTypeOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  if (typeof value === 'number') return Number.isInteger(value) ? 'integer' : 'number';
  return typeof value;
}

function memberAccepts(member: TSchema, type: string): boolean {
  const nested = (member as { anyOf?: TSchema[] }).anyOf;
  if (nested) return nested.some((m) => memberAccepts(m, type));
  const t = member.type;
  return t === type || (t === 'number' && type === 'integer');
}

function describe(error: ValueError, depth = 0): ApiError {
  if (error.type === ValueErrorType.ObjectRequiredProperty) {
    return new ApiError('bad_request', `Missing required argument "${argumentPath(error.path)}".`);
  }
  // A union refused as a whole: when exactly one member is of the value's JSON type (an object
  // given where "a string or an object" is expected), the useful error is inside that member.
  if (error.type === ValueErrorType.Union && depth < 8) {
    const type = jsonTypeOf(error.value);
    if (type === 'object' || type === 'array') {
      const members = (error.schema as { anyOf?: TSchema[] }).anyOf ?? [];
      const matching = members.flatMap((m, i) => (memberAccepts(m, type) ? [i] : []));
      const inner = matching.length === 1 ? error.errors[matching[0]]?.First() : undefined;
      if (inner) return describe(inner, depth + 1);
    }
  }
  const expected = EXPECTED.get(error.schema);
  if (expected !== undefined) return wrongType(argumentPath(error.path), expected, error.value);
  return callError(`argument "${argumentPath(error.path)}" is not valid: ${error.message}`);
}

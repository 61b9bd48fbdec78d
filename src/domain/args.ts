// Reading an operation's `arguments` object: each accessor names the field it reads, so a value of
// the wrong type is answered 406 call_error naming the field. `null` counts as absent everywhere
// (clients send nulls freely). Where a number or boolean is expected, a string that spells one is
// accepted (the Ruby gem's CLI sends every argument as a string); a string where an object or array
// is expected, or the reverse, stays a call_error.
import { ApiError, callError } from './errors.ts';

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

/**
 * How some numbers of a request body were written, where JSON.parse's value does not say it
 * (docs/api/README.md, "Numbers"): a whole number beyond 2^53 written in digits (the body keeps
 * it as its digit string, so free-form data such as variables keeps every digit), or a whole
 * number written with a fraction or an exponent (1e3, 1.0). Keyed by the object or array that
 * holds the value and the key or index there; the body reader (http/api/body.ts) notes them, and
 * Args.int refuses both forms, naming the field. A WeakMap: nothing to free, no extra key in the
 * values themselves.
 */
const NUMBER_SPELLINGS = new WeakMap<object, Map<string, string>>();

/** Notes that `container[key]` was written as `text` in the request body. */
export function noteNumberSpelling(container: object, key: string | number, text: string): void {
  let spellings = NUMBER_SPELLINGS.get(container);
  if (!spellings) NUMBER_SPELLINGS.set(container, (spellings = new Map()));
  spellings.set(String(key), text);
}

/** The text `container[key]` was written as, when it is one of the forms noted above; else undefined. */
export function numberSpellingOf(container: object, key: string | number): string | undefined {
  return NUMBER_SPELLINGS.get(container)?.get(String(key));
}

/** The whole numbers a number argument may hold: up to 2^53 - 1 either way (beyond, doubles round them). */
const SAFE_WORDS = `between ${-Number.MAX_SAFE_INTEGER} and ${Number.MAX_SAFE_INTEGER}`;

/**
 * Why a whole-number argument written as `text` is refused, or null: beyond 2^53 it cannot be
 * held without rounding; a fraction or exponent (1e3, 1.0) is not how a whole number is written.
 */
export function wholeNumberSpellingProblem(text: string): string | null {
  if (/^-?\d+$/.test(text)) return Number.isSafeInteger(Number(text)) ? null : `must be a whole number ${SAFE_WORDS}, got ${cutText(text, 40)}`;
  return `must be a whole number written in digits, got ${cutText(text, 40)}`;
}

/** Characters (Unicode code points, as the error messages count them), not UTF-16 units or bytes. */
export function codePointLength(text: string): number {
  let n = text.length;
  for (let i = 0; i < text.length - 1; i++) {
    const c = text.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) {
      const d = text.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        n--;
        i++;
      }
    }
  }
  return n;
}

/** Whether `text` has more than `max` characters (code points); a short text is not counted. */
export function longerThan(text: string, max: number): boolean {
  return text.length > max && codePointLength(text) > max;
}

/**
 * A text a client gave, for an error message: its first `max` characters, with how long it was
 * when it was cut, so a refusal never echoes a whole hostile value back.
 */
export function cutText(text: string, max = 64): string {
  if (!longerThan(text, max)) return text;
  return `${Array.from(text.slice(0, max * 2)).slice(0, max).join('')}... (${codePointLength(text)} characters)`;
}

/** How a wrong value is named in an error: "an array", "null", "an object", a number or boolean as itself, else "a <typeof>". */
export function describeJsonType(value: unknown): string {
  if (Array.isArray(value)) return 'an array';
  if (value === null) return 'null';
  if (typeof value === 'object') return 'an object';
  // A number or boolean says itself (a fraction where a whole number was wanted); a string's text is not echoed.
  if (typeof value === 'number' || typeof value === 'boolean') return JSON.stringify(value);
  return `a ${typeof value}`;
}

/** 406 call_error naming the argument: `why` completes the sentence ("must be at most 200 characters long"). */
export function invalidArgument(field: string, why: string): ApiError {
  return callError(`argument "${field}" ${why}`);
}

/** 406 call_error: the argument holds a value of the wrong JSON type. */
export function wrongType(field: string, expected: string, value: unknown): ApiError {
  return invalidArgument(field, `must be ${expected}, got ${describeJsonType(value)}`);
}

/**
 * The rule for a name an operation stores (account, project): not blank, at most maxChars
 * characters, no NUL (docs/api/README.md). Operations call it on their typed input, so every edge
 * (API, CLI, dashboard) gets the same 406 naming the field.
 */
export function checkName(field: string, value: string, maxChars: number): string {
  if (value.trim() === '') throw invalidArgument(field, 'must not be empty');
  if (longerThan(value, maxChars)) throw invalidArgument(field, `must be at most ${maxChars} characters long`);
  if (value.includes('\0')) throw invalidArgument(field, 'must not contain the NUL character (U+0000)');
  return value;
}

/**
 * The uid a caller may choose when creating a project, webhook or mailbox: absent or "" gives
 * undefined (the operation generates one); otherwise not blank, at most maxChars characters, no
 * NUL, and kept exactly as given (never trimmed), as every method that looks a uid up reads it
 * (docs/api/README.md, "Uids"). A blank uid could never be named again: lookups answer a blank
 * uid as missing.
 */
export function checkChosenUid(field: string, value: string | undefined, maxChars: number): string | undefined {
  if (value === undefined || value === '') return undefined;
  if (value.trim() === '') throw invalidArgument(field, 'must not be blank (leave it out to have one generated)');
  if (longerThan(value, maxChars)) throw invalidArgument(field, `must be at most ${maxChars} characters long`);
  if (value.includes('\0')) throw invalidArgument(field, 'must not contain the NUL character (U+0000)');
  return value;
}

function missing(field: string): ApiError {
  return new ApiError('bad_request', `Missing required argument "${field}".`);
}

export function isPlainObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export class Args {
  /** @param prefix how nested fields are named in errors ("arguments.headers"). */
  constructor(
    readonly raw: JsonObject,
    private readonly prefix = '',
  ) {}

  static from(value: unknown, name = 'arguments'): Args {
    if (value === undefined || value === null) return new Args({});
    if (!isPlainObject(value)) throw wrongType(name, 'an object', value);
    return new Args(value);
  }

  private name(field: string): string {
    return this.prefix ? `${this.prefix}.${field}` : field;
  }

  has(field: string): boolean {
    const v = this.raw[field];
    return v !== undefined && v !== null;
  }

  /** The raw value, null/undefined folded to undefined. */
  value(field: string): Json | undefined {
    const v = this.raw[field];
    return v === null ? undefined : v;
  }

  string(field: string): string | undefined;
  string(field: string, opts: { required: true }): string;
  string(field: string, opts?: { required?: boolean }): string | undefined {
    const v = this.value(field);
    if (v === undefined) {
      if (opts?.required) throw missing(this.name(field));
      return undefined;
    }
    if (typeof v === 'number' || typeof v === 'boolean') return String(v);
    if (typeof v !== 'string') throw wrongType(this.name(field), 'a string', v);
    if (opts?.required && v.trim() === '') throw missing(this.name(field));
    return v;
  }

  /**
   * The uid naming a stored row (get_, update_, delete_, rotate_...), looked up exactly as given.
   * Only absent, null and "" are missing: a uid of only spaces is refused at creation
   * (checkChosenUid) but rows stored with one before that rule still answer to it, so they can be
   * read, changed and removed (docs/api/README.md, "Uids").
   */
  storedUid(field = 'uid'): string {
    const v = this.string(field);
    if (v === undefined || v === '') throw missing(this.name(field));
    return v;
  }

  int(field: string, opts: { min?: number; max?: number; default: number }): number;
  int(field: string, opts?: { min?: number; max?: number; required?: boolean }): number | undefined;
  int(field: string, opts: { min?: number; max?: number; default?: number; required?: boolean } = {}): number | undefined {
    const v = this.value(field);
    if (v === undefined || v === '') {
      if (opts.required) throw missing(this.name(field));
      return opts.default;
    }
    const spelled = numberSpellingOf(this.raw, field);
    if (spelled !== undefined) throw invalidArgument(this.name(field), wholeNumberSpellingProblem(spelled) ?? 'must be a whole number');
    let n: number;
    if (typeof v === 'number') n = v;
    else if (typeof v === 'string' && /^-?\d+$/.test(v.trim())) n = Number(v.trim());
    else throw wrongType(this.name(field), 'a whole number', v);
    if (typeof v === 'string' && Number.isInteger(n) && !Number.isSafeInteger(n)) throw invalidArgument(this.name(field), wholeNumberSpellingProblem(v.trim())!);
    if (!Number.isSafeInteger(n)) throw wrongType(this.name(field), 'a whole number', v);
    if ((opts.min !== undefined && n < opts.min) || (opts.max !== undefined && n > opts.max)) {
      const range = opts.max === undefined ? `at least ${opts.min}` : opts.min === undefined ? `at most ${opts.max}` : `between ${opts.min} and ${opts.max}`;
      throw invalidArgument(this.name(field), `must be ${range}, got ${n}`);
    }
    return n;
  }

  bool(field: string, fallback: boolean): boolean {
    const v = this.value(field);
    if (v === undefined) return fallback;
    if (typeof v === 'boolean') return v;
    if (typeof v === 'number' && (v === 0 || v === 1)) return v === 1;
    if (typeof v === 'string') {
      if (/^(true|1|yes|on)$/i.test(v.trim())) return true;
      if (/^(false|0|no|off)$/i.test(v.trim())) return false;
    }
    throw wrongType(this.name(field), 'true or false', v);
  }

  object(field: string): Args | undefined {
    const v = this.value(field);
    if (v === undefined) return undefined;
    if (!isPlainObject(v)) throw wrongType(this.name(field), 'an object', v);
    return new Args(v, this.name(field));
  }

  array(field: string): Json[] | undefined;
  array(field: string, opts: { required: true }): Json[];
  array(field: string, opts?: { required?: boolean }): Json[] | undefined {
    const v = this.value(field);
    if (v === undefined) {
      if (opts?.required) throw missing(this.name(field));
      return undefined;
    }
    if (!Array.isArray(v)) throw wrongType(this.name(field), 'an array', v);
    return v;
  }

  /** A string field constrained to a set of words. */
  oneOf<T extends string>(field: string, allowed: readonly T[]): T | undefined {
    const v = this.string(field);
    if (v === undefined) return undefined;
    if (!(allowed as readonly string[]).includes(v)) {
      throw invalidArgument(this.name(field), `must be one of ${allowed.join(', ')}`);
    }
    return v as T;
  }

  /** Throws call_error for the named field: for validations the accessors above cannot express. */
  invalid(field: string, why: string): ApiError {
    return invalidArgument(this.name(field), why);
  }
}

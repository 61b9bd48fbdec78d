// Reading variables from a request (arguments.variables, and each recipient's own). Rendering is
// domain/variables.ts; this only checks the JSON it renders from.
//
// Values: JSON as given. Strings, numbers and booleans are substituted as their text (3 -> "3",
// true -> "true"); lists and objects are for {{#each}} and {{a.b}} (docs/templates.md); null
// counts as absent (so a recipient's null does not hide a global value). Names are trimmed,
// because {{ name }} is looked up trimmed.
import type { Json } from './args.ts';
import { isPlainObject, wrongType } from './args.ts';
import { callError } from './errors.ts';
import type { VariableValue } from './variables.ts';

export { variableNamesIn } from './variables.ts';

export type VariableValues = Record<string, VariableValue>;

/** Deepest nesting of lists and objects inside one variable. */
export const MAX_VARIABLE_DEPTH = 16;

function checkDepth(value: Json, name: string, field: string, depth: number): void {
  if (value === null || typeof value !== 'object') return;
  if (depth > MAX_VARIABLE_DEPTH) throw callError(`variable ${JSON.stringify(name)} in "${field}" is nested deeper than ${MAX_VARIABLE_DEPTH} levels`);
  for (const v of Array.isArray(value) ? value : Object.values(value)) checkDepth(v as Json, name, field, depth + 1);
}

export function parseVariableValues(value: Json | undefined, field: string): VariableValues {
  const out: VariableValues = {};
  if (value === undefined || value === null) return out;
  if (!isPlainObject(value)) {
    throw wrongType(field, 'an object of variables', value);
  }
  for (const [rawName, v] of Object.entries(value)) {
    if (v === null || v === undefined) continue;
    // Written into an object, "__proto__" would set its prototype instead (docs/api/README.md).
    if (rawName.trim() === '__proto__') throw callError(`variable ${JSON.stringify(rawName)} in "${field}" is not accepted: "__proto__" cannot be a variable name`);
    checkDepth(v, rawName, field, 1);
    out[rawName.trim()] = v as VariableValue;
  }
  return out;
}

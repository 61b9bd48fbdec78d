// Reading variables from a request (arguments.variables, and each recipient's own). Rendering is
// domain/variables.ts; this only turns JSON into the string map it renders from.
//
// Values: strings as given; numbers and booleans as their JSON text (3 -> "3", true -> "true");
// null counts as absent (so a recipient's null does not hide a global value). An object or array
// cannot be substituted into text: 406 call_error naming the variable. Names are trimmed, because
// {{ name }} is looked up trimmed.
import type { Json } from './args.ts';
import { isPlainObject, wrongType } from './args.ts';
import { callError } from './errors.ts';
import { renderVariables, type Variables } from './variables.ts';

export type VariableValues = Record<string, string>;

export function parseVariableValues(value: Json | undefined, field: string): VariableValues {
  const out: VariableValues = {};
  if (value === undefined || value === null) return out;
  if (!isPlainObject(value)) {
    throw wrongType(field, 'an object of variables', value);
  }
  for (const [rawName, v] of Object.entries(value)) {
    if (v === null) continue;
    const name = rawName.trim();
    if (typeof v === 'string') out[name] = v;
    else if (typeof v === 'number' || typeof v === 'boolean') out[name] = String(v);
    else {
      throw callError(`variable ${JSON.stringify(rawName)} in "${field}" must be a string, number or boolean, got ${Array.isArray(v) ? 'an array' : 'an object'}`);
    }
  }
  return out;
}

/**
 * Names of the {{variables}} a text uses. renderVariables itself reports them (it looks each name
 * up in the map it is given), so the syntax is defined in one place only.
 */
export function variableNamesIn(text: string | null): string[] {
  if (text === null || !text.includes('{{')) return [];
  const names: string[] = [];
  const recorder = new Proxy({} as Variables, {
    get: (_target, name) => {
      if (typeof name === 'string') names.push(name);
      return undefined;
    },
  });
  renderVariables(text, recorder);
  return names;
}

// {{name}} substitution. Names are trimmed; a variable without a value renders as the empty string.
// {{*}} is not a variable: it is where a layout takes its child's content (domain/templates).
// Values are inserted as given (no HTML escaping): the API caller owns the content.

const VARIABLE = /\{\{\s*([^{}*][^{}]*?)\s*\}\}/g;

export type Variables = Readonly<Record<string, string>>;

export function renderVariables(text: string, variables: Variables): string {
  return text.replace(VARIABLE, (_m, name: string) => {
    const value = variables[name];
    return value === undefined ? '' : value;
  });
}

/** Global variables overridden by the recipient's own. */
export function mergeVariables(global: Variables, recipient: Variables | null | undefined): Variables {
  return recipient ? { ...global, ...recipient } : global;
}

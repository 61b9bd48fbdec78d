// Every ok answer a test receives from an API method is checked against that method's data schema
// (src/http/api/methods: the schema the OpenAPI document publishes), so the whole suite proves
// that the published shapes are the real ones. Used by startTestApp's post().
import { TypeCompiler, type TypeCheck } from '@sinclair/typebox/compiler';
import type { TSchema } from '@sinclair/typebox';
import { METHODS } from '../../src/http/api/methods/index.ts';

const API_PATH = /^\/v\.(1\.0|1\.1)\/([^/?]+?)(\.json)?(?:\?.*)?$/;
const compiled = new Map<string, TypeCheck<TSchema>>();

/** Throws naming the method and the first mismatch when `body` is an ok envelope whose data does not match. */
export function checkMethodData(pathname: string, status: number, body: unknown): void {
  const match = API_PATH.exec(pathname);
  if (!match || status !== 200) return;
  const envelope = body as { response?: { status?: string }; data?: unknown };
  if (envelope?.response?.status !== 'ok') return;
  const method = METHODS.get(match[2]);
  if (!method) return;
  let check = compiled.get(method.name);
  if (!check) {
    check = TypeCompiler.Compile(method.data);
    compiled.set(method.name, check);
  }
  if (!check.Check(envelope.data)) {
    const errors = [...check.Errors(envelope.data)].slice(0, 3).map((e) => `${e.path || '/'}: ${e.message} (got ${JSON.stringify(e.value)?.slice(0, 80)})`);
    throw new Error(`${method.name} answered data that does not match its data schema: ${errors.join('; ')}`);
  }
}

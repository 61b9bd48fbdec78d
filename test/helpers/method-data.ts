// Every ok answer a test receives from an API method is checked against that method's data schema
// (src/http/api/methods: the schema the OpenAPI document publishes), so the whole suite proves
// that the published shapes are the real ones. Used by startTestApp's post().
import { TypeCompiler, type TypeCheck } from '@sinclair/typebox/compiler';
import type { TSchema } from '@sinclair/typebox';
import { METHODS } from '../../src/http/api/methods/index.ts';

const API_PATH = /^\/v\.(1\.0|1\.1)\/([^/?]+?)(\.json)?(?:\?.*)?$/;
const compiled = new Map<string, TypeCheck<TSchema>>();
const compiledResponses = new Map<string, TypeCheck<TSchema>>();

/** Throws naming the method and the first mismatch when `body` is an ok envelope whose data (or response fields) do not match. */
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
  // The envelope's response: status and uid, and exactly the method's own fields, as declared.
  const { status: _status, uid: _uid, ...extra } = envelope.response as Record<string, unknown>;
  const declared = Object.keys(method.response?.properties ?? {});
  const undeclared = Object.keys(extra).filter((k) => !declared.includes(k));
  if (undeclared.length > 0) throw new Error(`${method.name} answered response fields its schema does not declare: ${undeclared.join(', ')}`);
  if (method.response) {
    let responseCheck = compiledResponses.get(method.name);
    if (!responseCheck) {
      responseCheck = TypeCompiler.Compile(method.response);
      compiledResponses.set(method.name, responseCheck);
    }
    if (!responseCheck.Check(extra)) throw new Error(`${method.name} answered response fields that do not match their schema: ${JSON.stringify(extra).slice(0, 120)}`);
  }
}

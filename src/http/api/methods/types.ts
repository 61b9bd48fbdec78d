// One row of the method table, as data: its name, which key may call it, the schema of its
// `arguments` (checked before run, http/api/schema.ts) and of its `data` (the OpenAPI document,
// http/openapi.ts; the tests check every answer against it). run converts the admitted arguments
// into the operation's typed input (reading them with Args, domain/args.ts), calls the operation,
// and returns the `data` of the envelope.
import type { TObject, TSchema } from '@sinclair/typebox';
import type { Args, Json, JsonObject } from '../../../domain/args.ts';
import { ApiError } from '../../../domain/errors.ts';
import type { Caller, KeyKind } from '../../../operations/context.ts';
import type { Services } from '../../../services.ts';
import type { Project } from '../../../operations/context.ts';

export interface MethodCall {
  readonly services: Services;
  readonly caller: Caller;
  readonly args: Args;
  /** the request's top-level uid (any JSON type), undefined when absent */
  readonly uid: Json | undefined;
  /** the whole request body (for aliases such as top-level recipient_override) */
  readonly body: JsonObject;
}

export interface MethodResult {
  data: unknown;
  /** extra fields of `response` (message_delivery_status's delivery_status) */
  response?: Record<string, Json>;
}

export interface MethodDef {
  readonly name: string;
  /** 'any': either kind; project-only methods refuse account keys and vice versa. */
  readonly key: KeyKind | 'any';
  /** one line for docs and get_method_list consumers */
  readonly summary: string;
  /** the `arguments` object (other keys are ignored) */
  readonly args: TObject;
  /**
   * The fields of the request body beside api_key and arguments that the method reads: the
   * top-level uid when it means more than the echo in response.uid (the message a lookup is about,
   * send_message's message uid), send_message's recipient_override, messages_history's from/to.
   * Described in the OpenAPI request body and docs/api/reference.md; not checked by a schema (the
   * method reads them itself).
   */
  readonly topLevel?: TObject;
  /** the envelope's `data` on success */
  readonly data: TSchema;
  /** fields of the envelope's `response` on success besides status and uid (MethodResult.response) */
  readonly response?: TObject;
  run(call: MethodCall): Promise<MethodResult>;
}

/**
 * The caller's project. Methods with key 'project' are only routed with a project key
 * (http/server.ts), so the 401 here is a guard for the type, not a path a client can reach.
 */
export function projectOf(caller: Caller): Project {
  if (!caller.project) throw new ApiError('unauthorized', 'This method needs a project API key.');
  return caller.project;
}

export function defineMethods(defs: MethodDef[]): MethodDef[] {
  return defs;
}

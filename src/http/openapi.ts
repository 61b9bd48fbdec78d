// The OpenAPI 3.1 document of the PostageApp API, generated from the method table (http/api/methods):
// every method is POST /v.1.1/<name> taking {api_key, uid, arguments} (with an example request,
// api/methods/examples.ts) and answering the envelope with its data schema (no success for
// test_error, which always fails), or the error envelope with the statuses of domain/errors.ts. Webhook
// payloads are its `webhooks`, one per event kind of domain/events.ts (docs/webhooks.md). Served
// at GET /openapi.json and rendered at GET /docs (http/api-reference.ts). Built once per process: the table does not change at run time.
import type { TSchema } from '@sinclair/typebox';
import { Type } from '@sinclair/typebox';
import { API_STATUSES, type ErrorStatus } from '../domain/errors.ts';
import { EVENT_SCHEMAS } from '../domain/events.ts';
import { REQUEST_EXAMPLES } from './api/methods/examples.ts';
import type { MethodDef } from './api/methods/types.ts';

export const OPENAPI_VERSION = '3.1.0';

export interface OpenApiOptions {
  /** the service's public base URL (--public-url) */
  serverUrl: string;
  /** the package version, shown as info.version */
  version: string;
}

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** A TypeBox schema as plain JSON Schema (TypeBox's own symbol keys are not JSON and are left out). */
export function toJsonSchema(schema: TSchema): Json {
  return JSON.parse(JSON.stringify(schema)) as Json;
}

/** The statuses answered with each HTTP code, "bad_request" under 400 and so on. */
export function errorStatusesByCode(): Map<number, ErrorStatus[]> {
  const byCode = new Map<number, ErrorStatus[]>();
  for (const [status, code] of Object.entries(API_STATUSES)) {
    if (status === 'ok') continue;
    byCode.set(code, [...(byCode.get(code) ?? []), status as ErrorStatus]);
  }
  return byCode;
}

const ERROR_MEANINGS: Record<ErrorStatus, string> = {
  bad_request: 'a required argument is missing, or a uid is taken',
  unauthorized: 'the API key is missing or unknown, or of the wrong kind for the method',
  not_found: 'the named record does not exist, or the path is not an API path',
  method_not_allowed: 'the HTTP method is not POST',
  request_timeout: 'the request line, headers or body did not arrive within --http-headers-timeout-ms / --http-request-timeout-ms',
  invalid_json: 'the body is not JSON (or v1.0 without Content-Type: application/json)',
  invalid_utf8: 'the body is not UTF-8 (the message names the byte offset)',
  call_error: 'an argument is malformed (the message names its path), contains NUL or a lone surrogate, nests too deep, or is a whole number beyond 2^53 where one is required',
  conflict: 'the API version in the path is not 1.0 or 1.1',
  precondition_failed: 'the request cannot be honoured as it is (unknown template, invalid address, a limit reached)',
  payload_too_large: 'the body exceeds --max-body-bytes',
  unsupported_media_type: 'the body has a Content-Encoding (gzip, br, deflate...): send it uncompressed',
  locked: 'the key, its project or its account is disabled',
  too_many_requests: 'the key exceeded --rate-limit-per-key; the Retry-After header says when to retry',
  request_header_fields_too_large: 'the request line and headers are larger than the server accepts (16 KiB)',
  internal_server_error: 'a failure on our side (logged); test_error always answers it',
  service_unavailable: 'the database is unreachable or cannot write now (read-only, disk full); nothing was stored; retry after Retry-After',
};

/** The success envelope; `extra`: the method's own fields of `response` (MethodDef.response). */
function okEnvelope(data: Json, extra?: { properties?: Record<string, Json>; required?: string[] }): Json {
  return {
    type: 'object',
    required: ['response', 'data'],
    properties: {
      response: {
        type: 'object',
        required: ['status', 'uid', ...(extra?.required ?? [])],
        properties: { status: { const: 'ok' }, uid: { description: "the request's top-level uid, with its JSON type; null when none was sent" }, ...extra?.properties },
      },
      data,
    },
  };
}

/** The request body: api_key, the top-level fields the method reads (MethodDef.topLevel; else uid is only echoed), arguments. */
function requestBody(method: MethodDef): Json {
  const topLevel = method.topLevel ? ((toJsonSchema(method.topLevel) as { properties?: Record<string, Json> }).properties ?? {}) : {};
  return {
    type: 'object',
    required: ['api_key'],
    properties: {
      api_key: { type: 'string', description: `${method.key === 'any' ? 'a project or an account' : method.key === 'project' ? 'a project' : 'an account'} API key` },
      uid: { description: "the request's own reference, echoed in response.uid", anyOf: [{ type: 'string' }, { type: 'number' }, { type: 'null' }] },
      ...topLevel,
      arguments: toJsonSchema(method.args),
    },
  };
}

/** A method whose data schema is `not: {}` (TypeBox's Never) has no success answer: test_error. */
function neverSucceeds(method: MethodDef): boolean {
  const data = toJsonSchema(method.data) as { not?: Json };
  return typeof data.not === 'object' && data.not !== null && Object.keys(data.not).length === 0;
}

export function buildOpenApiDocument(methods: readonly MethodDef[], options: OpenApiOptions): Record<string, Json> {
  const byCode = errorStatusesByCode();
  const errorResponses: Record<string, Json> = {};
  for (const [code, statuses] of [...byCode].sort((a, b) => a[0] - b[0])) {
    errorResponses[String(code)] = {
      description: statuses.map((s) => `${s}: ${ERROR_MEANINGS[s]}`).join('; '),
      ...(code === 429 || code === 503 ? { headers: { 'Retry-After': { $ref: '#/components/headers/RetryAfter' } } } : {}),
      content: { 'application/json': { schema: { $ref: '#/components/schemas/ErrorEnvelope' } } },
    };
  }
  const paths: Record<string, Json> = {};
  for (const method of [...methods].sort((a, b) => a.name.localeCompare(b.name))) {
    paths[`/v.1.1/${method.name}`] = {
      post: {
        operationId: method.name,
        summary: method.summary,
        description: `${method.summary}\n\nKey: ${method.key === 'any' ? 'a project or an account key' : `${method.key === 'project' ? 'a project' : 'an account'} key`}. Also served at /v.1.1/${method.name}.json and /v.1.0/${method.name}.json (v1.0 requires Content-Type: application/json).`,
        tags: [method.key === 'any' ? 'either key' : `${method.key} key`],
        requestBody: { required: true, content: { 'application/json': { schema: requestBody(method), ...(REQUEST_EXAMPLES[method.name] ? { example: REQUEST_EXAMPLES[method.name] } : {}) } } },
        responses: {
          ...(neverSucceeds(method)
            ? {}
            : { '200': { description: 'ok', content: { 'application/json': { schema: okEnvelope(toJsonSchema(method.data), method.response && (toJsonSchema(method.response) as { properties?: Record<string, Json>; required?: string[] })) } } } }),
          ...errorResponses,
        },
      },
    };
  }
  const webhooks: Record<string, Json> = {};
  // Event kinds and their bodies are defined once, in src/domain/events.ts.
  for (const [event, schema] of Object.entries(EVENT_SCHEMAS)) {
    webhooks[event] = {
      post: {
        summary: `The ${event} event, posted to every webhook endpoint that subscribed to it`,
        description: 'Signed with the endpoint secret: X-Posthorn-Signature is v1= + hex HMAC-SHA256 of "<X-Posthorn-Timestamp>.<raw body>" (docs/webhooks.md). De-duplicate on event_id.',
        parameters: [
          { name: 'X-Posthorn-Event', in: 'header', required: true, schema: { const: event } },
          { name: 'X-Posthorn-Event-Id', in: 'header', required: true, schema: { type: 'string' } },
          { name: 'X-Posthorn-Timestamp', in: 'header', required: true, schema: { type: 'string', description: 'Unix time in seconds' } },
          { name: 'X-Posthorn-Signature', in: 'header', required: true, schema: { type: 'string' } },
        ],
        requestBody: { required: true, content: { 'application/json': { schema: toJsonSchema(schema) } } },
        responses: { '2XX': { description: 'received; any other answer (or none within --webhook-timeout-ms) is retried' } },
      },
    };
  }
  return {
    openapi: OPENAPI_VERSION,
    info: {
      title: 'Posthorn: the PostageApp API',
      version: options.version,
      description:
        'Every call is an HTTP POST of a JSON body {"api_key", "uid", "arguments"} answered in an envelope {"response": {"status", "uid", "message"}, "data"}. Strings must not contain NUL (U+0000); arguments nest at most 32 levels, with at most 10,000 keys per object and items per array. The reference: docs/api/README.md.',
      license: { name: 'See the repository', identifier: 'MIT' },
    },
    servers: [{ url: options.serverUrl }],
    paths,
    webhooks,
    components: {
      schemas: {
        ErrorEnvelope: toJsonSchema(
          Type.Object({
            response: Type.Object({
              status: Type.Union(Object.keys(ERROR_MEANINGS).map((s) => Type.Literal(s))),
              uid: Type.Unknown({ description: "the request's top-level uid, null when none (or when the body could not be read)" }),
              message: Type.String({ description: 'what went wrong, for people; never internals' }),
            }),
          }),
        ),
      },
      headers: {
        RetryAfter: { description: 'seconds to wait before retrying', schema: { type: 'integer', minimum: 1 } },
      },
    },
  };
}

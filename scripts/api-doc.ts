// Prints docs/api/reference.md from the OpenAPI document that the method table generates
// (src/http/openapi.ts), so the reference cannot drift from what the server checks and answers:
//   node --import tsx scripts/api-doc.ts > docs/api/reference.md
// test/docs/docs.test.ts fails when the file differs from this output.
import { pathToFileURL } from 'node:url';
import { ALL_METHODS } from '../src/http/api/methods/index.ts';
import { buildOpenApiDocument } from '../src/http/openapi.ts';

type Schema = { [key: string]: any };

/** One line naming a schema's type as people read it: "string or number", "array of string", "object". */
export function describeType(s: Schema | undefined): string {
  if (!s || Object.keys(s).filter((k) => k !== 'description').length === 0) return 'any';
  if (s.const !== undefined) return JSON.stringify(s.const);
  if (s.anyOf) {
    // The lenient leaves (src/http/api/schema.ts) read as the type they stand for.
    const first = (s.anyOf as Schema[])[0];
    if (['string', 'integer', 'boolean'].includes(first.type) && (s.anyOf as Schema[]).slice(1).every((m) => m.type !== 'null' && m.type !== 'object' && m.type !== 'array')) return first.type;
    const parts = [...new Set((s.anyOf as Schema[]).filter((m) => m.type !== 'null').map(describeType))];
    return parts.join(' or ') + ((s.anyOf as Schema[]).some((m) => m.type === 'null') ? ' or null' : '');
  }
  if (s.type === 'array') return `array of ${s.items?.anyOf ? `(${describeType(s.items)})` : describeType(s.items)}`;
  if (s.type === 'object' && s.patternProperties) return `object of ${describeType(Object.values(s.patternProperties)[0] as Schema)}`;
  if (s.type === 'string' && s.pattern) return 'string';
  return String(s.type ?? 'any');
}

/** The member of a value-or-null that is not null. */
function nonNull(s: Schema): Schema {
  return s.anyOf && s.anyOf.length === 2 && s.anyOf.some((m: Schema) => m.type === 'null') ? s.anyOf.find((m: Schema) => m.type !== 'null') : s;
}

/**
 * The fields of an answer's `data`, `depth` levels deep: "data.message.id"; the values of an object
 * keyed by uid or address as "data.<key>.field", the items of an array as "data.list[].field".
 */
export function dataFields(s: Schema, path: string, depth: number): Array<{ path: string; schema: Schema }> {
  const inner = nonNull(s);
  const children: Array<[string, Schema]> = [];
  // A level of keys (uids, addresses) or of items is not counted in `depth`: their fields are.
  if (inner.properties) for (const [name, child] of Object.entries(inner.properties as Record<string, Schema>)) children.push([`${path}.${name}`, child]);
  else if (inner.patternProperties) return dataFields(Object.values(inner.patternProperties)[0] as Schema, `${path}.<key>`, depth);
  else if (inner.type === 'array' && inner.items) return dataFields(inner.items, `${path}[]`, depth);
  if (depth === 0) return [];
  const rows: Array<{ path: string; schema: Schema }> = [];
  for (const [childPath, child] of children) rows.push({ path: childPath, schema: child }, ...dataFields(child, childPath, depth - 1));
  return rows;
}

function cell(text: string): string {
  return text.replace(/\|/g, '\\|').replace(/\n/g, ' ');
}

export function renderApiReference(): string {
  const doc = buildOpenApiDocument(ALL_METHODS, { serverUrl: 'https://posthorn.example', version: 'reference' }) as Schema;
  const out: string[] = [];
  out.push(`# API reference (generated)

Generated from the method table (src/http/api/methods/), the same schemas that check every request
and describe every answer; the server publishes them as OpenAPI 3.1 at \`GET /openapi.json\` and
renders them at \`GET /docs\`. The prose reference is [README.md](README.md) and the pages it links.
Regenerate with \`node --import tsx scripts/api-doc.ts > docs/api/reference.md\`.

Every string argument also accepts a number or boolean (read as its spelling), every whole number
its decimal spelling, every boolean 0/1 and "true"/"false"/"yes"/"no"/"on"/"off"; \`null\` means
absent; unknown keys are ignored. A required argument that is missing is 400 \`bad_request\`; a
malformed one 406 \`call_error\` naming its path.
`);
  for (const [route, item] of Object.entries(doc.paths as Record<string, Schema>)) {
    const op = item.post as Schema;
    const body = op.requestBody.content['application/json'].schema as Schema;
    const args = body.properties.arguments as Schema;
    out.push(`## ${op.operationId}\n`);
    out.push(`\`POST ${route}\`, ${op.tags[0]}. ${op.summary}\n`);
    // The body's own fields first (api_key, uid and what else the method reads beside arguments).
    const bodyRequired = new Set<string>(body.required ?? []);
    out.push('| Field | Type | Required | Notes |\n|---|---|---|---|');
    for (const [name, s] of Object.entries(body.properties as Record<string, Schema>)) {
      if (name === 'arguments') continue;
      out.push(`| \`${name}\` | ${cell(describeType(s))} | ${bodyRequired.has(name) ? 'yes' : ''} | ${cell(s.description ?? '')} |`);
    }
    out.push(`| \`arguments\` | object | | ${Object.keys(args.properties ?? {}).length === 0 ? 'none are read' : 'below'} |`);
    out.push('');
    const props = Object.entries((args.properties ?? {}) as Record<string, Schema>);
    if (props.length > 0) {
      const required = new Set<string>(args.required ?? []);
      out.push('| Argument | Type | Required | Notes |\n|---|---|---|---|');
      for (const [name, s] of props) {
        const inner = s.anyOf && s.anyOf.length === 2 && s.anyOf.some((m: Schema) => m.type === 'null') ? s.anyOf.find((m: Schema) => m.type !== 'null') : s;
        const description = inner.description ?? s.description ?? '';
        out.push(`| \`${name}\` | ${cell(describeType(inner))} | ${required.has(name) ? 'yes' : ''} | ${cell(description)} |`);
      }
      out.push('');
    }
    const ok = op.responses['200']?.content['application/json'].schema as Schema | undefined;
    if (!ok) {
      out.push(`Never answers \`ok\`: ${Object.keys(op.responses).includes('500') ? 'the answer is an error envelope (500 `internal_server_error`, or the error of a bad key).' : 'every answer is an error envelope.'}\n`);
      continue;
    }
    const data = ok.properties.data as Schema;
    const extra = Object.entries(ok.properties.response.properties as Record<string, Schema>).filter(([k]) => k !== 'status' && k !== 'uid');
    const rows = [...dataFields(data, 'data', 2), ...extra.map(([k, s]) => ({ path: `response.${k}`, schema: s }))];
    out.push(`Answers \`data\`${data.description ? ` (${cell(data.description)})` : ''}${rows.length === 0 ? `: ${describeType(data)}` : ''}${extra.length > 0 ? `, and in \`response\` ${extra.map(([k]) => `\`${k}\``).join(', ')}` : ''}${rows.length === 0 ? '.' : ':'}\n`);
    if (rows.length > 0) {
      out.push('| Field | Type | Notes |\n|---|---|---|');
      for (const { path, schema } of rows) {
        const inner = nonNull(schema);
        out.push(`| \`${path}\` | ${cell(describeType(schema))} | ${cell(inner.description ?? schema.description ?? '')} |`);
      }
      out.push('');
    }
  }
  out.push(`## Webhooks\n\nEvent payloads posted to webhook endpoints (docs/webhooks.md): ${Object.keys(doc.webhooks).map((e) => `\`${e}\``).join(', ')}.\n`);
  return out.join('\n');
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) process.stdout.write(renderApiReference());

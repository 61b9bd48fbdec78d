// Documentation cannot drift from the code: every API method and every option is documented.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { OPTIONS } from '../../src/config.ts';
import { ALL_METHODS } from '../../src/http/api/methods/index.ts';
import { buildOpenApiDocument } from '../../src/http/openapi.ts';
import { renderApiReference } from '../../scripts/api-doc.ts';

function readDocs(dir: string): string {
  return fs
    .readdirSync(dir, { withFileTypes: true })
    // The generated reference (docs/api/reference.md) names every method by construction: prose must too.
    .map((e) => (e.isDirectory() ? readDocs(path.join(dir, e.name)) : e.name.endsWith('.md') && e.name !== 'reference.md' ? fs.readFileSync(path.join(dir, e.name), 'utf8') : ''))
    .join('\n');
}

describe('documentation', () => {
  const docs = readDocs('docs') + fs.readFileSync('README.md', 'utf8');

  it('documents every API method', () => {
    const missing = ALL_METHODS.map((m) => m.name).filter((name) => !new RegExp(`\\b${name}\\b`).test(docs));
    assert.deepEqual(missing, [], `methods without documentation under docs/: ${missing.join(', ')}`);
  });

  it('docs/api/reference.md is the one generated from the OpenAPI document', () => {
    const generated = renderApiReference();
    assert.ok(fs.readFileSync('docs/api/reference.md', 'utf8') === generated, 'regenerate: node --import tsx scripts/api-doc.ts > docs/api/reference.md');
  });

  it('every method and argument the pages of docs/api/ describe is one the OpenAPI document has', () => {
    const doc = buildOpenApiDocument(ALL_METHODS, { serverUrl: 'https://posthorn.example', version: 'test' }) as { paths: Record<string, any> };
    const methods = new Map(Object.values(doc.paths).map((p) => [p.post.operationId as string, p.post]));
    const stale: string[] = [];
    for (const file of fs.readdirSync('docs/api').filter((f) => f.endsWith('.md') && f !== 'reference.md')) {
      const text = fs.readFileSync(path.join('docs/api', file), 'utf8');
      // "### create_project" and "### disable_project / enable_project": each name is a method.
      for (const [, heading] of text.matchAll(/^### ([a-z_]+(?: \/ [a-z_]+)*)\s*$/gm)) {
        for (const name of heading.split(' / ')) if (!methods.has(name)) stale.push(`${file}: ### ${name}`);
      }
      // An arguments table under a method's heading names only arguments its schema has.
      for (const section of text.split(/^### /m).slice(1)) {
        const names = section.split('\n')[0].trim().split(' / ');
        const ops = names.map((n) => methods.get(n)).filter(Boolean);
        if (ops.length === 0) continue;
        const table = /^\| Argument \|[^\n]*\n\|[-| ]+\|\n((?:\|[^\n]*\n)+)/m.exec(section);
        if (!table) continue;
        for (const [, arg] of table[1].matchAll(/^\| `([a-z_\/]+)`/gm)) {
          const known = ops.some((op) => arg in op.requestBody.content['application/json'].schema.properties.arguments.properties);
          if (!known) stale.push(`${file}: ${names.join('/')} argument ${arg}`);
        }
      }
    }
    assert.deepEqual(stale, [], 'docs/api/ describes what the method table does not have');
  });

  it('documents every option, as generated from src/config.ts', () => {
    const config = fs.readFileSync('docs/configuration.md', 'utf8');
    const missing = OPTIONS.filter((o) => !config.includes(`--${o.flag}`) || (o.env && !config.includes(o.env))).map((o) => o.flag);
    assert.deepEqual(missing, [], `regenerate docs/configuration.md (scripts/config-doc.ts): missing ${missing.join(', ')}`);
  });
});

// Documentation cannot drift from the code: every API method and every option is documented.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { OPTIONS } from '../../src/config.ts';
import { ALL_METHODS } from '../../src/http/api/methods/index.ts';

function readDocs(dir: string): string {
  return fs
    .readdirSync(dir, { withFileTypes: true })
    .map((e) => (e.isDirectory() ? readDocs(path.join(dir, e.name)) : e.name.endsWith('.md') ? fs.readFileSync(path.join(dir, e.name), 'utf8') : ''))
    .join('\n');
}

describe('documentation', () => {
  const docs = readDocs('docs') + fs.readFileSync('README.md', 'utf8');

  it('documents every API method', () => {
    const missing = ALL_METHODS.map((m) => m.name).filter((name) => !new RegExp(`\\b${name}\\b`).test(docs));
    assert.deepEqual(missing, [], `methods without documentation under docs/: ${missing.join(', ')}`);
  });

  it('documents every option, as generated from src/config.ts', () => {
    const config = fs.readFileSync('docs/configuration.md', 'utf8');
    const missing = OPTIONS.filter((o) => !config.includes(`--${o.flag}`) || (o.env && !config.includes(o.env))).map((o) => o.flag);
    assert.deepEqual(missing, [], `regenerate docs/configuration.md (scripts/config-doc.ts): missing ${missing.join(', ')}`);
  });
});

// Every dependency runs on the Node versions Posthorn says it runs on (package.json `engines`: the
// oldest Node 20 it admits) and on the current LTS: a package whose own `engines` excludes one of
// them is pinned back or overridden (README, "Pinned versions, and why").
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { describe, it } from 'node:test';
import semver from 'semver';

const root = new URL('../', import.meta.url);
const manifest = JSON.parse(fs.readFileSync(new URL('package.json', root), 'utf8')) as { engines: { node: string } };
const lock = JSON.parse(fs.readFileSync(new URL('package-lock.json', root), 'utf8')) as {
  packages: Record<string, { version?: string; engines?: Record<string, string> | string[] }>;
};

/** The current LTS line when this was written (Node 24, "Krypton"), from its first release. */
const CURRENT_LTS = '24.0.0';

describe('dependencies', () => {
  it('declare engines that admit our oldest Node and the current LTS', () => {
    const oldest = semver.minVersion(manifest.engines.node)!.version;
    assert.ok(semver.satisfies(process.version, manifest.engines.node), `this Node (${process.version}) is outside package.json engines ${manifest.engines.node}`);
    const excluded: string[] = [];
    for (const [where, pkg] of Object.entries(lock.packages)) {
      const range = pkg.engines && !Array.isArray(pkg.engines) ? pkg.engines.node : undefined;
      if (!where || !range) continue;
      for (const node of [oldest, CURRENT_LTS]) {
        if (!semver.satisfies(node, range)) excluded.push(`${where}@${pkg.version} wants node ${range}, excluding ${node}`);
      }
    }
    assert.deepEqual(excluded, []);
  });
});

// Debian packages the bench drives (Postfix's programs, wrk), installed when missing. No service
// is started by an install: policy-rc.d exiting 101 tells invoke-rc.d to start none.
import fs from 'node:fs';
import { runCommand } from './processes.ts';

const POLICY_RC = '/usr/sbin/policy-rc.d';

/** apt-get install `pkg` (root only), with the debconf answers given as `selections` first. */
export async function installDebianPackage(pkg: string, log: (line: string) => void, selections: string[] = []): Promise<void> {
  if (process.getuid?.() !== 0) throw new Error(`${pkg} is not installed and the bench is not root: apt-get install ${pkg}`);
  log(`installing the Debian package ${pkg} (no system service is started)`);
  const ownPolicy = !fs.existsSync(POLICY_RC);
  if (ownPolicy) fs.writeFileSync(POLICY_RC, '#!/bin/sh\nexit 101\n', { mode: 0o755 });
  try {
    const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
    for (const selection of selections) {
      await runCommand('sh', ['-c', `echo "${selection}" | debconf-set-selections`], { env, timeoutMs: 60_000 });
    }
    const update = await runCommand('apt-get', ['update', '-qq'], { env, timeoutMs: 300_000 });
    if (update.code !== 0) throw new Error(`apt-get update failed: ${update.stderr.trim()}`);
    const install = await runCommand('apt-get', ['install', '-y', '-qq', '--no-install-recommends', pkg], { env, timeoutMs: 600_000 });
    if (install.code !== 0) throw new Error(`apt-get install ${pkg} failed: ${install.stderr.trim()}`);
  } finally {
    if (ownPolicy) fs.rmSync(POLICY_RC, { force: true });
  }
}

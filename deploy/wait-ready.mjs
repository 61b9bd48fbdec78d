#!/usr/bin/env node
// Asks a local Posthorn process whether it is ready (GET /readyz: the database answers and is
// migrated, the role's loops run; docs/operations.md, "Health"). Used by the systemd unit
// (ExecStartPost: the unit counts as started once the process is ready) and by the container's
// HEALTHCHECK (--once).
//
//   node deploy/wait-ready.mjs [--once] [--timeout SECONDS]
//
// The port is the process's own: --ops-port (POSTHORN_OPS_PORT, default 8081) for a worker-only
// process (POSTHORN_ROLE=worker), else the API port (PORT, default 8080). Plain HTTP on loopback;
// a process serving HTTPS (--tls-cert) is asked over HTTPS without certificate checks, as it is
// this machine's own. Exit 0: ready; 1: not ready (within the timeout).
import http from 'node:http';
import https from 'node:https';

const args = process.argv.slice(2);
const once = args.includes('--once');
const timeoutIndex = args.indexOf('--timeout');
const timeoutS = timeoutIndex >= 0 ? Number(args[timeoutIndex + 1]) : 90;

const worker = process.env.POSTHORN_ROLE === 'worker';
const port = Number(worker ? process.env.POSTHORN_OPS_PORT || 8081 : process.env.PORT || 8080);
const bound = (worker ? process.env.POSTHORN_OPS_HOST : undefined) || process.env.POSTHORN_HOST || '127.0.0.1';
const host = bound === '0.0.0.0' ? '127.0.0.1' : bound === '::' ? '::1' : bound;
const secure = !worker && Boolean(process.env.POSTHORN_TLS_CERT);

function ask() {
  return new Promise((resolve) => {
    const client = secure ? https : http;
    const req = client.get({ host, port, path: '/readyz', timeout: 5000, rejectUnauthorized: false }, (res) => {
      let body = '';
      res.on('data', (c) => (body += c));
      res.on('end', () => resolve({ ok: res.statusCode === 200, text: body }));
    });
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.on('error', (error) => resolve({ ok: false, text: error.message }));
  });
}

const deadline = Date.now() + timeoutS * 1000;
for (;;) {
  const { ok, text } = await ask();
  if (ok) process.exit(0);
  if (once || Date.now() > deadline) {
    process.stderr.write(`posthorn not ready at ${host}:${port}: ${text.slice(0, 300)}\n`);
    process.exit(1);
  }
  await new Promise((r) => setTimeout(r, 500));
}

// The options of SMTP submission and of the renamed bounce listener (docs/smtp-submission.md,
// docs/configuration.md), and the smuggling rule as a function.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConfigError, parseArgv, parseConfig } from '../../src/config.ts';
import { isLoopback } from '../../src/config.ts';
import { findBareLineEndDot, SubmissionListener } from '../../src/smtp/submission.ts';
import { startTestApp } from '../helpers/app.ts';

const config = (argv: string[], env: NodeJS.ProcessEnv = {}) => parseConfig(parseArgv(argv).flags, env);

/** Runs fn and returns the warnings it emitted (process 'warning' events). */
async function warningsOf(fn: () => void): Promise<string[]> {
  const seen: string[] = [];
  const listener = (w: Error) => seen.push(w.message);
  process.on('warning', listener);
  try {
    fn();
    // emitWarning delivers on the next tick
    await new Promise((resolve) => setImmediate(resolve));
  } finally {
    process.off('warning', listener);
  }
  return seen;
}

describe('SMTP submission options', () => {
  it('names the bounce listener --bounce-port/--bounce-host; the old names still work, with a warning', async () => {
    assert.equal(config(['--bounce-port', '2525']).bouncePort, 2525);
    let parsed: ReturnType<typeof config> | null = null;
    const warnings = await warningsOf(() => (parsed = config(['--smtp-port', '2526', '--smtp-host', '0.0.0.0'])));
    assert.equal(parsed!.bouncePort, 2526);
    assert.equal(parsed!.bounceHost, '0.0.0.0');
    assert.ok(warnings.some((w) => w.includes('--smtp-port is deprecated: use --bounce-port')), warnings.join('; '));
    assert.ok(warnings.some((w) => w.includes('--smtp-host is deprecated')));
    const fromEnv = await warningsOf(() => (parsed = config([], { POSTHORN_SMTP_PORT: '2527' })));
    assert.equal(parsed!.bouncePort, 2527);
    assert.ok(fromEnv.some((w) => w.includes('POSTHORN_SMTP_PORT is deprecated: use POSTHORN_BOUNCE_PORT')));
    // The new name wins over the old when both are given.
    assert.equal(config(['--smtp-port', '1', '--bounce-port', '2']).bouncePort, 2);
    assert.equal(config([]).bouncePort, null);
    assert.equal(config([]).submissionPort, null);
  });

  it('takes the API certificate unless given its own, and wants one for implicit TLS', () => {
    const c = config(['--tls-cert', '/c.pem', '--tls-key', '/k.pem', '--submission-port', '587']);
    assert.equal(c.submissionTlsCert, '/c.pem');
    assert.equal(c.submissionTlsKey, '/k.pem');
    assert.equal(c.submissionHost, '127.0.0.1');
    const own = config(['--tls-cert', '/c.pem', '--tls-key', '/k.pem', '--submission-tls-cert', '/s.pem', '--submission-tls-key', '/sk.pem']);
    assert.equal(own.submissionTlsCert, '/s.pem');
    assert.throws(() => config(['--submission-tls-port', '465']), ConfigError);
    assert.throws(() => config(['--submission-tls-cert', '/s.pem']), /go together/);
    assert.equal(config([]).submissionMaxBytes, 25 * 1024 * 1024);
  });

  it('refuses to start without a certificate on a non-loopback address unless plaintext is allowed', async () => {
    const t = await startTestApp({ background: false });
    try {
      const services = t.app.services;
      const at = (host: string, allow: boolean) => () =>
        new SubmissionListener({ ...services, config: Object.freeze({ ...services.config, submissionAllowPlaintext: allow }) }, { port: 0, tlsPort: null, host });
      assert.throws(at('0.0.0.0', false), /needs a certificate/);
      assert.doesNotThrow(at('0.0.0.0', true));
      assert.doesNotThrow(at('127.0.0.1', false));
    } finally {
      await t.close();
    }
  });

  it('knows loopback addresses', () => {
    for (const host of ['127.0.0.1', '127.1.2.3', '::1', 'localhost']) assert.ok(isLoopback(host), host);
    for (const host of ['0.0.0.0', '10.0.0.1', '::', 'example.com']) assert.ok(!isLoopback(host), host);
  });

  it('finds a "." line reached through a bare CR or LF, and nothing else', () => {
    const at = (text: string) => findBareLineEndDot(Buffer.from(text, 'latin1'));
    for (const sequence of ['\n.\n', '\n.\r\n', '\r\n.\n', '\r.\r', '\r.\r\n', '\r\n.\r', '\r.\n', '\n.\r', '\r\n.\r\r\n']) {
      assert.notEqual(at(`body${sequence}more`), -1, JSON.stringify(sequence));
    }
    for (const clean of ['a.b\r\n', '\r\n.\r\n', '\r\n..\r\n', 'end.\r\n', '\r\n.x\r\n', 'x\r\n.', '.\r\n', 'a\n.b']) {
      assert.equal(at(clean), -1, JSON.stringify(clean));
    }
  });
});

// The configuration: flags over environment over defaults, refused values, derived defaults.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConfigError, defaultMailerHost, parseArgv, parseConfig } from '../src/config.ts';

const config = (argv: string[], env: NodeJS.ProcessEnv = {}) => parseConfig(parseArgv(argv).flags, env);

describe('configuration', () => {
  it('reads a flag before its environment variable, and the variable before the default', () => {
    assert.equal(config([]).port, 8080);
    assert.equal(config([], { PORT: '9000' }).port, 9000);
    assert.equal(config(['--port', '7000'], { PORT: '9000' }).port, 7000);
    assert.equal(config(['--port=7001']).port, 7001);
    assert.equal(config([], { POSTHORN_HOST: '0.0.0.0' }).host, '0.0.0.0');
    assert.equal(config([], { HOST: 'my-laptop' }).host, '127.0.0.1', 'a shell HOST variable is not ours');
  });

  it('accumulates repeated list flags and splits lists from the environment', () => {
    assert.deepEqual(config(['--transport-map', 'a.test=127.0.0.1:25', '--transport-map', 'b.test=127.0.0.1:26']).transportMap, [
      'a.test=127.0.0.1:25',
      'b.test=127.0.0.1:26',
    ]);
    assert.deepEqual(config([], { POSTHORN_DNS_SERVERS: '127.0.0.1:53, 127.0.0.2' }).dnsServers, ['127.0.0.1:53', '127.0.0.2']);
  });

  it('refuses unknown flags and malformed values', () => {
    assert.throws(() => config(['--prot', '1']), ConfigError);
    assert.throws(() => config(['--port', '80a']), /whole number/);
    assert.throws(() => config(['--require-tls', 'maybe']), /true or false/);
    assert.throws(() => config(['--role', 'boss']), /role/);
    assert.throws(() => config(['--tls-cert', 'c.pem']), /go together/);
  });

  it('derives what is not given: a fully qualified mailer host, EHLO name, bounce domain, public URL', () => {
    const c = config(['--mailer-host', 'mail.example.com', '--port', '8443']);
    assert.equal(c.ehloName, 'mail.example.com');
    assert.equal(c.bounceDomain, 'mail.example.com');
    assert.equal(c.publicUrl, 'http://127.0.0.1:8443');
    assert.equal(defaultMailerHost('vm'), 'vm.localdomain');
    assert.equal(defaultMailerHost('Mail.Example.com.'), 'mail.example.com');
    assert.match(config([]).mailerHost, /\./);
    assert.ok(Object.isFrozen(c));
  });
});

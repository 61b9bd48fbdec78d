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

  it('checks every value when it is parsed, naming the option (and its variable when it came from one)', () => {
    assert.throws(() => config(['--port', '65536']), /--port must be a port between 0 and 65535, got 65536/);
    assert.throws(() => config([], { PORT: '70000' }), /--port \(PORT\) must be a port between 0 and 65535/);
    assert.throws(() => config(['--bounce-port', '99999']), /--bounce-port must be a port/);
    assert.equal(config(['--port', '0']).port, 0, 'port 0: any free port');
    assert.throws(() => config(['--lease-ms', '0']), /--lease-ms must be between 1 and/);
    assert.throws(() => config(['--poll-ms', '1.5']), /whole number/);
    assert.equal(config(['--workers', '0']).workers, 0, 'no delivery workers is a valid setting');
    assert.throws(() => config(['--retry-schedule', '1m,,x']), /--retry-schedule must be durations/);
    assert.throws(() => config(['--retry-schedule', '0s']), /--retry-schedule must be durations/);
    assert.equal(config(['--retry-schedule', '30s, 2m ,1h']).retrySchedule, '30s, 2m ,1h');
    assert.throws(() => config(['--role', 'boss']), /--role must be one of all, api, worker, got "boss"/);
    assert.throws(() => config(['--log-level', 'verbose']), /--log-level must be one of fatal, error, warn, info, debug, trace, silent/);
    assert.throws(() => config(['--public-url', 'example.com']), /--public-url must be an http:\/\/ or https:\/\/ URL/);
    assert.throws(() => config(['--relay', 'http://relay.example.com']), /--relay must be a URL like smtp:/);
    assert.throws(() => config(['--relay', 'smtp://u:secret@']), (e: Error) => !e.message.includes('secret'));
    assert.equal(config(['--relay', 'smtps://u:p@relay.example.com:465']).relay, 'smtps://u:p@relay.example.com:465');
    assert.throws(() => config(['--dns-server', 'dns.example.com']), /--dns-server takes an IP address/);
    assert.deepEqual(config(['--dns-server', '127.0.0.1:5353', '--dns-server', '[::1]:53']).dnsServers, ['127.0.0.1:5353', '[::1]:53']);
    // Checked here by the parsers of the features that read them, before anything starts.
    assert.throws(() => config(['--transport-map', 'foo']), /--transport-map entries look like example\.com=127\.0\.0\.1:2525, got "foo"/);
    assert.throws(() => config(['--transport-map', '*=127.0.0.1:notaport']), /--transport-map target must be host\[:port\]/);
    assert.throws(() => config([], { POSTHORN_TRANSPORT_MAP: 'a=b:c' }), /POSTHORN_TRANSPORT_MAP|--transport-map/);
    assert.deepEqual(config(['--transport-map', 'example.test=127.0.0.1:2525']).transportMap, ['example.test=127.0.0.1:2525']);
    assert.throws(() => config(['--rate-limit-per-key', 'lots']), /--rate-limit-per-key must be "N\/window"/);
    assert.equal(config(['--rate-limit-per-key', '600/1m']).rateLimitPerKey, '600/1m');
    assert.throws(() => config(['--relay', 'smtp://u:secret@h%zz']), (e: Error) => /--relay host must be a host name/.test(e.message) && !e.message.includes('secret'));
    // SMTP submission without a certificate: only on a loopback address, unless plaintext is allowed.
    assert.throws(() => config(['--submission-port', '2587', '--submission-host', '0.0.0.0']), /--submission-port on 0\.0\.0\.0 needs a certificate/);
    assert.equal(config(['--submission-port', '2587', '--submission-host', '0.0.0.0', '--submission-allow-plaintext']).submissionPort, 2587);
    assert.equal(config(['--submission-port', '2587', '--submission-host', '127.0.0.1']).submissionPort, 2587);
  });

  it('takes DATABASE_URL as postgres://, postgresql:// or sqlite: with an absolute path, and refuses anything else in one line', () => {
    for (const url of ['postgres://u@127.0.0.1:5432/db', 'postgresql://u:p@db.example.com/posthorn', 'sqlite:///var/lib/posthorn/posthorn.db', 'sqlite:/tmp/x.db', 'sqlite::memory:']) {
      assert.equal(config([], { DATABASE_URL: url }).databaseUrl, url);
    }
    for (const url of ['mysql://root@localhost/db', 'postgres:/typo', 'postgres://', 'posthorn.db', 'sqlite://relative.db', 'sqlite:relative.db', 'file:///x.db']) {
      assert.throws(
        () => config([], { DATABASE_URL: url }),
        (e: Error) => e instanceof ConfigError && /^--database-url \(DATABASE_URL\) /.test(e.message) && !e.message.includes('\n'),
        url,
      );
    }
    assert.throws(() => config(['--database-url', 'mysql://root:hunter2@localhost/db']), (e: Error) => /root:\*\*\*@/.test(e.message) && !e.message.includes('hunter2'));
  });

  it('--allow-private-addresses, and its former name --allow-private-webhooks (flag and variable), set one option', () => {
    assert.equal(config([]).allowPrivateWebhooks, false);
    assert.equal(config(['--allow-private-addresses']).allowPrivateWebhooks, true);
    assert.equal(config([], { POSTHORN_ALLOW_PRIVATE_ADDRESSES: 'true' }).allowPrivateWebhooks, true);
    assert.equal(config(['--allow-private-webhooks']).allowPrivateWebhooks, true);
    assert.equal(config([], { POSTHORN_ALLOW_PRIVATE_WEBHOOKS: 'true' }).allowPrivateWebhooks, true);
  });

  it('listener limits have bounded defaults and take whole numbers', () => {
    const c = config([]);
    assert.deepEqual(
      [c.httpHeadersTimeoutMs, c.httpRequestTimeoutMs, c.httpKeepAliveTimeoutMs, c.maxConnectionsPerIp, c.bounceIdleTimeoutMs, c.bounceSessionTimeoutMs],
      [10_000, 60_000, 65_000, 256, 60_000, 600_000],
    );
    assert.equal(config(['--max-connections-per-ip', '0']).maxConnectionsPerIp, 0);
    assert.throws(() => config(['--http-request-timeout-ms', 'soon']), ConfigError);
  });
});

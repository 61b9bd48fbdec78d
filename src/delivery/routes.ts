// Where the mail for a recipient domain goes, in Postfix's order of precedence:
// 1. the relay (--relay smtp://user:pass@host:port or smtps://...): every message, one smarthost;
// 2. the transport map (--transport-map domain=host:port): a fixed server per domain, like
//    Postfix's transport(5) `smtp:[host]:port` (no MX lookup). "example.com" matches the domain
//    itself, ".example.com" its subdomains, "*" every domain;
// 3. MX lookup (dns-resolver.ts): MX hosts in preference order, the domain's own address when it
//    has no MX, a permanent failure for a null MX (RFC 7505) or a domain that does not exist.
//
// Domains are routed in their ASCII (IDNA, A-label) form, the form of RCPT TO (docs/delivery.md,
// "SMTP"): transport-map entries and host names written in Unicode are converted when parsed.
//
// Host names of the relay and the transport map are resolved through the same DNS servers as MX
// hosts (never the system's resolver behind the operator's back); IP literals and "localhost" are
// used as they are. Every destination is an IP address to connect to plus the name to present for
// TLS (SNI and certificate verification) and to record as the attempt's host.
import net from 'node:net';
import { domainToASCII } from 'node:url';
import type { DnsResolver } from './dns-resolver.ts';

export interface Destination {
  /** IP address to connect to */
  address: string;
  port: number;
  /** host name: TLS servername, and what attempts record as mx_host */
  name: string;
  /** implicit TLS from the first byte (smtps://) */
  secure: boolean;
  auth: { user: string; pass: string } | null;
  /** how it was chosen */
  via: 'relay' | 'transport' | 'mx';
}

export type RouteAnswer =
  | { kind: 'route'; destinations: Destination[] }
  /** permanent: no destination will ever exist for this domain */
  | { kind: 'failed'; resultCode: string; resultMessage: string }
  /** temporary: DNS did not answer */
  | { kind: 'deferred'; resultCode: string; resultMessage: string };

interface HostPort {
  host: string;
  port: number;
}

export interface RelayConfig extends HostPort {
  secure: boolean;
  auth: { user: string; pass: string } | null;
}

/** Most addresses tried in one attempt (Postfix's smtp_mx_address_limit). */
export const MAX_ADDRESSES_PER_ATTEMPT = 5;

/** Parses smtp://[user:pass@]host[:port] (STARTTLS, port 25) or smtps://... (implicit TLS, port 465). */
export function parseRelayUrl(text: string): RelayConfig {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new Error(`--relay must be a URL like smtp://user:pass@host:587, got "${redactUrl(text)}"`);
  }
  const scheme = url.protocol.replace(/:$/, '');
  if (scheme !== 'smtp' && scheme !== 'smtps') throw new Error(`--relay must use smtp:// or smtps://, got ${scheme}://`);
  const secure = scheme === 'smtps';
  // An smtp:// URL's host is opaque to the URL parser: a Unicode name comes percent-encoded.
  const written = url.hostname.replace(/^\[(.*)\]$/, '$1');
  if (!written) throw new Error('--relay needs a host');
  let host: string;
  try {
    host = asciiHost(decodeURIComponent(written));
  } catch {
    host = '';
  }
  if (!host) throw new Error(`--relay host must be a host name or an IP address, got "${written}"`);
  const port = url.port ? Number(url.port) : secure ? 465 : 25;
  const user = decodeURIComponent(url.username);
  const auth = user ? { user, pass: decodeURIComponent(url.password) } : null;
  return { host, port, secure, auth };
}

/** The URL with its password replaced, for messages and logs. */
export function redactUrl(text: string): string {
  return text.replace(/(\/\/[^:/@]*:)[^@]*@/, '$1[redacted]@');
}

/** Parses "domain=host:port" entries (port 25 by default; [ipv6]:port). */
export function parseTransportMap(entries: readonly string[]): Map<string, HostPort> {
  const map = new Map<string, HostPort>();
  for (const entry of entries) {
    const eq = entry.indexOf('=');
    if (eq <= 0) throw new Error(`--transport-map entries look like example.com=127.0.0.1:2525, got "${entry}"`);
    const written = entry.slice(0, eq).trim().toLowerCase();
    const domain = written === '*' ? written : written.startsWith('.') ? '.' + asciiHost(written.slice(1)) : asciiHost(written);
    if (domain === '' || domain === '.') throw new Error(`--transport-map domain must be a domain name, ".parent" or "*", got "${written}"`);
    const target = entry.slice(eq + 1).trim();
    const m = /^\[([^\]]+)\](?::(\d+))?$/.exec(target) ?? /^([^:[\]]+)(?::(\d+))?$/.exec(target);
    if (!m) throw new Error(`--transport-map target must be host[:port], got "${target}"`);
    const port = m[2] ? Number(m[2]) : 25;
    if (!(port > 0 && port < 65536)) throw new Error(`--transport-map port out of range in "${entry}"`);
    const host = asciiHost(m[1].toLowerCase());
    if (!host) throw new Error(`--transport-map target must be host[:port], got "${target}"`);
    map.set(domain, { host, port });
  }
  return map;
}

/** A host name in its ASCII (IDNA) form; an IP address as it is; '' when it is not a name. */
function asciiHost(host: string): string {
  return net.isIP(host) ? host : domainToASCII(host);
}

/** The transport-map entry for a domain: exact, then ".parent" entries from nearest, then "*". */
export function lookupTransport(map: ReadonlyMap<string, HostPort>, domain: string): HostPort | undefined {
  const d = domain.toLowerCase();
  const exact = map.get(d);
  if (exact) return exact;
  const labels = d.split('.');
  for (let i = 1; i < labels.length; i++) {
    const hit = map.get('.' + labels.slice(i).join('.'));
    if (hit) return hit;
  }
  return map.get('*');
}

export class Router {
  private readonly relay: RelayConfig | null;
  private readonly transports: Map<string, HostPort>;

  constructor(
    private readonly dns: DnsResolver,
    config: { relay: string | null; transportMap: readonly string[] },
    private readonly mxPort = 25,
  ) {
    this.relay = config.relay ? parseRelayUrl(config.relay) : null;
    this.transports = parseTransportMap(config.transportMap);
  }

  async route(domain: string): Promise<RouteAnswer> {
    if (this.relay) {
      const { host, port, secure, auth } = this.relay;
      return this.fixedHost({ host, port }, { secure, auth, via: 'relay' });
    }
    const mapped = lookupTransport(this.transports, domain);
    if (mapped) return this.fixedHost(mapped, { secure: false, auth: null, via: 'transport' });
    return this.mxRoute(domain);
  }

  private async fixedHost(target: HostPort, extra: Pick<Destination, 'secure' | 'auth' | 'via'>): Promise<RouteAnswer> {
    const addresses = await this.addressesOf(target.host);
    if (addresses.kind !== 'addresses') {
      // The operator named this host: a lookup failure is their configuration, so defer, never fail.
      return { kind: 'deferred', resultCode: 'DNS_ERROR', resultMessage: `${extra.via} host ${target.host}: ${describeAddressFailure(addresses)}` };
    }
    return {
      kind: 'route',
      destinations: addresses.addresses.slice(0, MAX_ADDRESSES_PER_ATTEMPT).map((address) => ({ address, port: target.port, name: target.host, ...extra })),
    };
  }

  private async mxRoute(domain: string): Promise<RouteAnswer> {
    const mx = await this.dns.resolveMx(domain);
    switch (mx.kind) {
      case 'null_mx':
        return { kind: 'failed', resultCode: 'NULL_MX', resultMessage: `${domain} does not accept mail (null MX, RFC 7505)` };
      case 'nxdomain':
        return { kind: 'failed', resultCode: 'DNS_NXDOMAIN', resultMessage: `${domain}: domain does not exist` };
      case 'no_host':
        return { kind: 'failed', resultCode: 'DNS_NO_MAIL_HOST', resultMessage: `${domain} has neither MX nor address records` };
      case 'tempfail':
        return { kind: 'deferred', resultCode: 'DNS_ERROR', resultMessage: mx.reason };
      case 'hosts':
        break;
    }
    const destinations: Destination[] = [];
    let lastFailure = '';
    for (const host of mx.hosts) {
      if (destinations.length >= MAX_ADDRESSES_PER_ATTEMPT) break;
      const addresses = await this.addressesOf(host.name);
      if (addresses.kind !== 'addresses') {
        lastFailure = `MX ${host.name}: ${describeAddressFailure(addresses)}`;
        continue;
      }
      for (const address of addresses.addresses) {
        if (destinations.length >= MAX_ADDRESSES_PER_ATTEMPT) break;
        destinations.push({ address, port: this.mxPort, name: host.name, secure: false, auth: null, via: 'mx' });
      }
    }
    if (destinations.length === 0) {
      // MX hosts that do not resolve may be fixed by their owner: try again later.
      return { kind: 'deferred', resultCode: 'DNS_ERROR', resultMessage: lastFailure || `${domain}: no MX host has an address` };
    }
    return { kind: 'route', destinations };
  }

  private async addressesOf(host: string) {
    if (net.isIP(host)) return { kind: 'addresses' as const, addresses: [host] };
    if (host === 'localhost') return { kind: 'addresses' as const, addresses: ['127.0.0.1'] };
    return this.dns.resolveAddresses(host);
  }
}

function describeAddressFailure(answer: { kind: string; reason?: string }): string {
  if (answer.kind === 'tempfail') return answer.reason ?? 'DNS lookup failed';
  if (answer.kind === 'nxdomain') return 'host does not exist';
  return 'host has no address records';
}

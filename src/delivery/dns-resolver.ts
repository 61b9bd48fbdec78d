// DNS for delivery: MX, A and AAAA lookups through the configured servers (--dns-server, else the
// system's), cached for each answer's TTL.
//
// Why not node:dns's Resolver: resolveMx() does not return TTLs (only resolve4/resolve6 do), and
// resolveAny() relies on ANY queries, which resolvers answer minimally since RFC 8482. Honouring
// the MX TTL needs the raw answer, so queries go through dns2's UDP client (TCP retry when the
// answer is truncated), which returns the whole packet: rcode, answers with their TTLs, and the
// SOA of negative answers (RFC 2308 negative-cache TTL).
//
// Semantics:
// - NXDOMAIN and NODATA are answers (cached for the SOA minimum, at most NEGATIVE_TTL_MAX_S).
// - Timeouts, SERVFAIL and REFUSED try the next server; when every server fails the lookup is a
//   temporary failure (delivery defers), never cached.
// - Concurrent lookups of the same name and type share one query.
import dns from 'node:dns';
import net from 'node:net';
import dns2 from 'dns2';
import type { Clock } from '../domain/clock.ts';

// dns2's declarations do not cover the packet shapes it returns; it is used untyped here.
const { UDPClient, Packet } = dns2 as unknown as { UDPClient: (o: object) => (name: string, type: string) => Promise<any>; Packet: any };

export interface DnsServerAddress {
  host: string;
  port: number;
}

export interface MxHost {
  name: string;
  priority: number;
}

export type MxAnswer =
  /** MX hosts in the order to try them; `implicit` when the domain has no MX and its own address is used */
  | { kind: 'hosts'; hosts: MxHost[]; implicit: boolean }
  /** RFC 7505: the domain accepts no mail */
  | { kind: 'null_mx' }
  | { kind: 'nxdomain' }
  /** neither MX nor address records */
  | { kind: 'no_host' }
  | { kind: 'tempfail'; reason: string };

export type AddressAnswer =
  | { kind: 'addresses'; addresses: string[] }
  | { kind: 'nxdomain' }
  | { kind: 'nodata' }
  | { kind: 'tempfail'; reason: string };

type RawAnswer =
  | { kind: 'records'; records: any[]; ttlS: number }
  | { kind: 'nxdomain'; ttlS: number }
  | { kind: 'nodata'; ttlS: number }
  | { kind: 'tempfail'; reason: string };

const NEGATIVE_TTL_MAX_S = 300;
const POSITIVE_TTL_MAX_S = 86_400;
/** Bound of the cache: evicts the oldest entries beyond it. */
const CACHE_MAX_ENTRIES = 10_000;

/** Parses "1.2.3.4", "1.2.3.4:5353", "[::1]:53", "::1" into a server address. */
export function parseDnsServer(text: string): DnsServerAddress {
  const t = text.trim();
  const bracketed = /^\[([^\]]+)\](?::(\d+))?$/.exec(t);
  if (bracketed) return { host: bracketed[1], port: bracketed[2] ? Number(bracketed[2]) : 53 };
  if (net.isIPv6(t)) return { host: t, port: 53 };
  const m = /^([^:]+)(?::(\d+))?$/.exec(t);
  if (!m || !net.isIP(m[1])) throw new Error(`DNS server must be an IP address with an optional port, got "${text}"`);
  return { host: m[1], port: m[2] ? Number(m[2]) : 53 };
}

export interface DnsResolverOptions {
  /** ip[:port] strings; empty: the system's resolvers */
  servers: readonly string[];
  clock: Clock;
  /** per query and server */
  timeoutMs: number;
}

export class DnsResolver {
  private readonly servers: DnsServerAddress[];
  private readonly cache = new Map<string, { answer: RawAnswer; expiresAt: number }>();
  private readonly inflight = new Map<string, Promise<RawAnswer>>();

  constructor(private readonly opts: DnsResolverOptions) {
    const list = opts.servers.length > 0 ? opts.servers : dns.getServers();
    this.servers = list.map(parseDnsServer);
  }

  /** MX hosts of a mail domain, with the RFC 5321 implicit MX and RFC 7505 null MX. */
  async resolveMx(domain: string): Promise<MxAnswer> {
    const mx = await this.query(domain, 'MX');
    if (mx.kind === 'tempfail') return mx;
    if (mx.kind === 'nxdomain') return { kind: 'nxdomain' };
    if (mx.kind === 'records') {
      const records = mx.records.map((r) => ({ name: String(r.exchange ?? '').replace(/\.$/, '').toLowerCase(), priority: Number(r.priority) }));
      if (records.length === 1 && records[0].name === '') return { kind: 'null_mx' };
      const hosts = orderMxHosts(records.filter((r) => r.name !== ''));
      if (hosts.length > 0) return { kind: 'hosts', hosts, implicit: false };
    }
    // No MX: the domain itself is the mail host (RFC 5321 5.1), if it has an address.
    const addresses = await this.resolveAddresses(domain);
    if (addresses.kind === 'tempfail') return addresses;
    if (addresses.kind === 'nxdomain') return { kind: 'nxdomain' };
    if (addresses.kind === 'nodata') return { kind: 'no_host' };
    return { kind: 'hosts', hosts: [{ name: domain.toLowerCase(), priority: 0 }], implicit: true };
  }

  /** A then AAAA addresses of a host (IPv4 first: it is what most MX hosts answer reliably). */
  async resolveAddresses(host: string): Promise<AddressAnswer> {
    const [a, aaaa] = await Promise.all([this.query(host, 'A'), this.query(host, 'AAAA')]);
    const addresses = [
      ...(a.kind === 'records' ? a.records.map((r) => String(r.address)) : []),
      ...(aaaa.kind === 'records' ? aaaa.records.map((r) => String(r.address)) : []),
    ];
    if (addresses.length > 0) return { kind: 'addresses', addresses };
    if (a.kind === 'tempfail') return a;
    if (aaaa.kind === 'tempfail') return aaaa;
    if (a.kind === 'nxdomain') return { kind: 'nxdomain' };
    return { kind: 'nodata' };
  }

  private async query(name: string, type: 'MX' | 'A' | 'AAAA'): Promise<RawAnswer> {
    const key = `${type} ${name.toLowerCase()}`;
    const now = this.opts.clock.now();
    const cached = this.cache.get(key);
    if (cached && cached.expiresAt > now) return cached.answer;
    const pending = this.inflight.get(key);
    if (pending) return pending;
    const lookup = this.queryServers(name, type).then((answer) => {
      this.inflight.delete(key);
      if (answer.kind !== 'tempfail' && answer.ttlS > 0) {
        this.cache.delete(key);
        this.cache.set(key, { answer, expiresAt: this.opts.clock.now() + answer.ttlS * 1000 });
        if (this.cache.size > CACHE_MAX_ENTRIES) this.cache.delete(this.cache.keys().next().value as string);
      }
      return answer;
    });
    this.inflight.set(key, lookup);
    return lookup;
  }

  private async queryServers(name: string, type: 'MX' | 'A' | 'AAAA'): Promise<RawAnswer> {
    let reason = 'no DNS server configured';
    for (const server of this.servers) {
      try {
        const resolve = UDPClient({ dns: server.host, port: server.port, timeout: this.opts.timeoutMs, socketType: net.isIPv6(server.host) ? 'udp6' : 'udp4' });
        const response = await resolve(name, type);
        const rcode = response.header.rcode;
        if (rcode === Packet.RCODE.NXDOMAIN) return { kind: 'nxdomain', ttlS: negativeTtl(response) };
        if (rcode !== Packet.RCODE.NOERROR) {
          reason = `DNS server ${server.host}:${server.port} answered rcode ${rcode} for ${type} ${name}`;
          continue;
        }
        const wanted = Packet.TYPE[type];
        const records = (response.answers as any[]).filter((r) => r.type === wanted);
        if (records.length === 0) return { kind: 'nodata', ttlS: negativeTtl(response) };
        // A CNAME chain's TTLs bound the answer's too.
        const ttlS = Math.min(POSITIVE_TTL_MAX_S, ...(response.answers as any[]).map((r) => Number(r.ttl) || 0));
        return { kind: 'records', records, ttlS };
      } catch (error) {
        reason = `DNS ${type} ${name} via ${server.host}:${server.port}: ${(error as Error).message}`;
      }
    }
    return { kind: 'tempfail', reason };
  }
}

function negativeTtl(response: any): number {
  const soa = (response.authorities as any[] | undefined)?.find((r) => r.type === Packet.TYPE.SOA);
  if (!soa) return 60;
  return Math.min(NEGATIVE_TTL_MAX_S, Number(soa.ttl) || 0, Number(soa.minimum) || 0);
}

/** Preference order; equal preferences in random order (RFC 5321 5.1). */
export function orderMxHosts(records: MxHost[], random: () => number = Math.random): MxHost[] {
  const keyed = records.map((r) => ({ r, tie: random() }));
  keyed.sort((a, b) => a.r.priority - b.r.priority || a.tie - b.tie);
  const seen = new Set<string>();
  return keyed.map((k) => k.r).filter((r) => (seen.has(r.name) ? false : (seen.add(r.name), true)));
}

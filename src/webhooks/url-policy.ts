// Where Posthorn may post (SSRF policy). A webhook or postback URL must be http(s) without
// credentials, and every address its host resolves to must be public: private, loopback,
// link-local, CGNAT, unspecified, multicast and reserved ranges are refused (IPv4 and IPv6,
// including IPv4-mapped, NAT64 and 6to4 forms) unless the operator sets --allow-private-addresses.
// The check runs when the URL is saved AND before every request, and the request connects to the
// address that was checked (no second lookup), so DNS rebinding cannot slip a private address in.
import dns from 'node:dns';
import net from 'node:net';

export type UrlParse = { ok: true; url: URL } | { ok: false; reason: string };
export type AddressCheck = { ok: true; address: string; family: 4 | 6 } | { ok: false; reason: string };

export const MAX_URL_LENGTH = 2048;

/** Syntax only: scheme, credentials, length. */
export function parseOutboundUrl(raw: string): UrlParse {
  if (raw.length > MAX_URL_LENGTH) return { ok: false, reason: `is longer than ${MAX_URL_LENGTH} characters` };
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { ok: false, reason: 'is not a valid URL' };
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return { ok: false, reason: 'must be an http or https URL' };
  if (url.username !== '' || url.password !== '') return { ok: false, reason: 'must not carry credentials' };
  if (url.hostname === '') return { ok: false, reason: 'has no host' };
  return { ok: true, url };
}

export interface ResolveOptions {
  allowPrivate: boolean;
  /** DNS servers (ip or ip:port) to ask instead of the system resolver (--dns-server) */
  dnsServers: readonly string[];
}

/** Resolves the URL's host and checks every address; the first checked address is the one to use. */
export async function resolveOutboundAddress(url: URL, opts: ResolveOptions): Promise<AddressCheck> {
  return resolveOutboundHost(url.hostname, opts);
}

/** The same check for a bare host: a name, an IPv4 literal or an IPv6 literal (bracketed or not). */
export async function resolveOutboundHost(hostname: string, opts: ResolveOptions): Promise<AddressCheck> {
  const host = hostname.replace(/^\[(.*)\]$/, '$1');
  let addresses: string[];
  if (net.isIP(host)) {
    addresses = [host];
  } else {
    try {
      addresses = await resolveHost(host, opts.dnsServers);
    } catch (error) {
      return { ok: false, reason: `host ${host} does not resolve (${(error as NodeJS.ErrnoException).code ?? 'error'})` };
    }
    if (addresses.length === 0) return { ok: false, reason: `host ${host} has no address` };
  }
  if (!opts.allowPrivate) {
    for (const address of addresses) {
      if (!isPublicAddress(address)) return { ok: false, reason: `host ${host} resolves to a non-public address (${address})` };
    }
  }
  const address = addresses[0];
  return { ok: true, address, family: net.isIPv6(address) ? 6 : 4 };
}

async function resolveHost(host: string, dnsServers: readonly string[]): Promise<string[]> {
  if (dnsServers.length === 0) {
    const found = await dns.promises.lookup(host, { all: true, verbatim: true });
    return found.map((f) => f.address);
  }
  const resolver = new dns.promises.Resolver({ timeout: 3000, tries: 2 });
  resolver.setServers([...dnsServers]);
  const [v4, v6] = await Promise.allSettled([resolver.resolve4(host), resolver.resolve6(host)]);
  const out = [...(v4.status === 'fulfilled' ? v4.value : []), ...(v6.status === 'fulfilled' ? v6.value : [])];
  if (out.length === 0 && v4.status === 'rejected') throw v4.reason;
  return out;
}

const BLOCKED_V4: Array<[string, number]> = [
  ['0.0.0.0', 8], // "this network", unspecified
  ['10.0.0.0', 8], // private
  ['100.64.0.0', 10], // CGNAT
  ['127.0.0.0', 8], // loopback
  ['169.254.0.0', 16], // link-local (cloud metadata)
  ['172.16.0.0', 12], // private
  ['192.0.0.0', 24], // IETF protocol assignments
  ['192.168.0.0', 16], // private
  ['198.18.0.0', 15], // benchmarking
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, broadcast
];

function v4ToInt(ip: string): number {
  return ip.split('.').reduce((acc, part) => acc * 256 + Number(part), 0);
}

function isPublicV4(ip: string): boolean {
  const n = v4ToInt(ip);
  return !BLOCKED_V4.some(([base, bits]) => {
    const size = 2 ** (32 - bits);
    const start = v4ToInt(base);
    return n >= start && n < start + size;
  });
}

/** The 8 16-bit groups of an IPv6 address (with an embedded dotted quad expanded). */
function v6Groups(ip: string): number[] {
  let text = ip.toLowerCase().replace(/%.*$/, '');
  const quad = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (quad) {
    const n = v4ToInt(quad[1]);
    text = text.slice(0, -quad[1].length) + `${(n >>> 16).toString(16)}:${(n & 0xffff).toString(16)}`;
  }
  const [head, tail] = text.includes('::') ? text.split('::') : [text, null];
  const headParts = head ? head.split(':') : [];
  const tailParts = tail ? tail.split(':') : [];
  const zeros = tail === null ? [] : new Array(8 - headParts.length - tailParts.length).fill('0');
  return [...headParts, ...zeros, ...tailParts].map((g) => parseInt(g, 16));
}

function isPublicV6(ip: string): boolean {
  const g = v6Groups(ip);
  const embeddedV4 = (hi: number, lo: number) => `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
  if (g.slice(0, 6).every((x) => x === 0)) return false; // ::, ::1, IPv4-compatible (deprecated)
  if (g.slice(0, 5).every((x) => x === 0) && g[5] === 0xffff) return isPublicV4(embeddedV4(g[6], g[7])); // ::ffff:a.b.c.d
  if (g.slice(0, 4).every((x) => x === 0) && g[4] === 0xffff && g[5] === 0) return isPublicV4(embeddedV4(g[6], g[7])); // ::ffff:0:a.b.c.d (SIIT)
  if (g[0] === 0x64 && g[1] === 0xff9b && g.slice(2, 6).every((x) => x === 0)) return isPublicV4(embeddedV4(g[6], g[7])); // NAT64
  if (g[0] === 0x64 && g[1] === 0xff9b && g[2] === 1) return false; // local-use NAT64 (RFC 8215): translated on this network
  if (g[0] === 0x2001 && g[1] === 0) return false; // Teredo: a tunnel to an IPv4 address it hides
  if (g[0] === 0x100 && g.slice(1, 4).every((x) => x === 0)) return false; // discard-only (RFC 6666)
  if (g[0] === 0x2002) return isPublicV4(embeddedV4(g[1], g[2])); // 6to4
  if ((g[0] & 0xffc0) === 0xfe80) return false; // link-local
  if ((g[0] & 0xffc0) === 0xfec0) return false; // site-local (deprecated)
  if ((g[0] & 0xfe00) === 0xfc00) return false; // unique local
  if ((g[0] & 0xff00) === 0xff00) return false; // multicast
  if (g[0] === 0x2001 && g[1] === 0x0db8) return false; // documentation
  return true;
}

export function isPublicAddress(ip: string): boolean {
  const kind = net.isIP(ip);
  if (kind === 4) return isPublicV4(ip);
  if (kind === 6) return isPublicV6(ip);
  return false;
}

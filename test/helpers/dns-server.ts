// A real DNS server on 127.0.0.1 (UDP, port 0) for tests, built on the dns2 package. The test
// defines the zone; the service under test resolves through it (config.dnsServers = [server.address])
// with a real resolver, so nothing leaves loopback.
//
//   const dns = await startDnsServer({
//     'example.test': { mx: [{ exchange: 'mx1.example.test', priority: 10 }] },
//     'mx1.example.test': { a: ['127.0.0.1'] },
//     'nullmx.test': { mx: [{ exchange: '.', priority: 0 }] },   // RFC 7505 null MX
//     'gone.test': { nxdomain: true },
//   });
//   config.dnsServers = [dns.address];  // "127.0.0.1:PORT"
//
// Semantics: a name in the zone answers the record types it has (NOERROR), and NODATA (NOERROR,
// no answers, an SOA in the authority section) for types it lacks. A name not in the zone, or
// with nxdomain: true, answers NXDOMAIN. servfail: true answers SERVFAIL; drop: true never answers
// (a resolver timeout). Every query is logged in `queries` so tests can assert caching.
import dns2 from 'dns2';

// dns2's type declarations lag its runtime (RCODE, loose resource shapes): use it untyped here.
const Packet: any = dns2.Packet;

export interface MxRecord {
  /** host name; "." (or "") is the null MX of RFC 7505 */
  exchange: string;
  priority: number;
}

export interface DnsName {
  mx?: MxRecord[];
  a?: string[];
  aaaa?: string[];
  /** one entry per TXT record; a string[] entry is one record of several strings (each <= 255 bytes, like a long DKIM key) */
  txt?: Array<string | string[]>;
  cname?: string;
  /** TTL in seconds of every record of this name (default 300) */
  ttl?: number;
  nxdomain?: boolean;
  servfail?: boolean;
  /** never answer (the resolver times out) */
  drop?: boolean;
  /** answer once this settles (a slow resolver, held until the test lets it answer) */
  hold?: () => Promise<void> | null;
}

export type DnsZone = Record<string, DnsName>;

export interface DnsQuery {
  name: string;
  /** A | AAAA | MX | TXT | ... */
  type: string;
  at: number;
}

export interface TestDnsServer {
  /** "127.0.0.1:PORT", the form config.dnsServers takes */
  readonly address: string;
  readonly port: number;
  readonly queries: DnsQuery[];
  /** Adds or replaces a name (tests may change the zone while running). */
  set(name: string, records: DnsName): void;
  remove(name: string): void;
  /** queries of one name (and type), for cache assertions */
  countQueries(name: string, type?: string): number;
  close(): Promise<void>;
}

const TYPE_NAMES = new Map<number, string>(Object.entries(Packet.TYPE as Record<string, number>).map(([k, v]) => [v, k]));

function normalise(name: string): string {
  return name.toLowerCase().replace(/\.$/, '');
}

export async function startDnsServer(initial: DnsZone = {}): Promise<TestDnsServer> {
  const zone = new Map<string, DnsName>();
  for (const [name, records] of Object.entries(initial)) zone.set(normalise(name), records);
  const queries: DnsQuery[] = [];

  const server = dns2.createServer({
    udp: true,
    handle: (request: any, send: (response: any) => void) => {
      const response = Packet.createResponseFromRequest(request);
      const [question] = request.questions;
      if (!question) return void send(response);
      const name = normalise(question.name);
      const typeName = TYPE_NAMES.get(question.type) ?? String(question.type);
      queries.push({ name, type: typeName, at: Date.now() });
      response.header.ra = 1;
      const entry = zone.get(name);
      if (entry?.drop) return;
      const held = entry?.hold?.();
      if (held) {
        const { hold: _, ...rest } = entry!;
        return void held.then(() => answer(rest));
      }
      answer(entry);

      function answer(entry: DnsName | undefined): void {
        if (entry?.servfail) {
          response.header.rcode = Packet.RCODE.SERVFAIL;
          return void send(response);
        }
        if (!entry || entry.nxdomain) {
          response.header.rcode = Packet.RCODE.NXDOMAIN;
          response.authorities.push(soaFor(name));
          return void send(response);
        }
        const ttl = entry.ttl ?? 300;
        const base = { name: question.name, class: Packet.CLASS.IN, ttl };
        if (entry.cname) {
          response.answers.push({ ...base, type: Packet.TYPE.CNAME, domain: entry.cname });
        } else if (question.type === Packet.TYPE.MX) {
          for (const mx of entry.mx ?? []) {
            response.answers.push({ ...base, type: Packet.TYPE.MX, exchange: mx.exchange === '.' ? '' : mx.exchange, priority: mx.priority });
          }
        } else if (question.type === Packet.TYPE.A) {
          for (const address of entry.a ?? []) response.answers.push({ ...base, type: Packet.TYPE.A, address });
        } else if (question.type === Packet.TYPE.AAAA) {
          for (const address of entry.aaaa ?? []) response.answers.push({ ...base, type: Packet.TYPE.AAAA, address });
        } else if (question.type === Packet.TYPE.TXT) {
          for (const data of entry.txt ?? []) response.answers.push({ ...base, type: Packet.TYPE.TXT, data });
        }
        if (response.answers.length === 0) response.authorities.push(soaFor(name));
        send(response);
      }
    },
  });
  server.on('requestError', () => {
    /* malformed query: ignore, like a real server would */
  });

  await server.listen({ udp: { port: 0, address: '127.0.0.1' } });
  const port = (server.addresses() as any).udp.port as number;

  return {
    address: `127.0.0.1:${port}`,
    port,
    queries,
    set(name, records) {
      zone.set(normalise(name), records);
    },
    remove(name) {
      zone.delete(normalise(name));
    },
    countQueries(name, type) {
      const n = normalise(name);
      return queries.filter((q) => q.name === n && (type === undefined || q.type === type)).length;
    },
    close: () => server.close() as Promise<void>,
  };
}

/** The authority record of negative answers (RFC 2308): its minimum is the negative-cache TTL. */
function soaFor(name: string) {
  return {
    name: name.split('.').slice(-1)[0] || name,
    type: Packet.TYPE.SOA,
    class: Packet.CLASS.IN,
    ttl: 60,
    primary: 'ns.test',
    admin: 'hostmaster.test',
    serial: 1,
    refresh: 3600,
    retry: 600,
    expiration: 86400,
    minimum: 60,
  };
}

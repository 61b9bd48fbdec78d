// Property-based fuzz of the whole API (docs/reliability.md, "Bad input"): every method of the
// method table, called with an account key and with a project key, with arguments of random shapes
// (random JSON, deep nesting, strings with NUL and other controls, huge strings, odd Unicode,
// numbers as strings, every argument the method reads given a value of the wrong type), must
// answer a JSON envelope whose status is in the API's table (domain/errors.ts) with its HTTP code,
// never a 500, and the process must stay up.
//
// Bounded: POSTHORN_FUZZ_RUNS calls (default 2500, about a minute per database on a quiet
// machine) from a fixed seed, POSTHORN_FUZZ_SEED (printed with any failure, with the shrunk input,
// so a failure reproduces with `POSTHORN_FUZZ_SEED=<seed> npm test -- test/reliability/fuzz`).
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import pino from 'pino';
import { API_STATUSES } from '../../src/domain/errors.ts';
import { ALL_METHODS } from '../../src/http/api/methods/index.ts';
import { startTestApp, type Seed, type TestApp } from '../helpers/app.ts';
import { startDnsServer, type TestDnsServer } from '../helpers/dns-server.ts';

const RUNS = Number(process.env.POSTHORN_FUZZ_RUNS ?? 2500);
const SEED = Number(process.env.POSTHORN_FUZZ_SEED ?? 20261124);

const METHOD_ARGS = new Map(ALL_METHODS.map((m) => [m.name, Object.keys(m.args.properties ?? {})]));
const METHOD_KEY = new Map(ALL_METHODS.map((m) => [m.name, m.key]));
const METHOD_NAMES = [...METHOD_ARGS.keys()];

/**
 * Alternating arrays and objects nested `depth` levels, built when serialised (toJSON): fast-check
 * prints a counterexample with its own recursive printer, which a nesting this deep would overflow.
 */
class Nested {
  constructor(readonly depth: number) {}
  /** The JSON text, built without recursion (JSON.stringify would overflow the stack first). */
  text(): string {
    let open = '';
    let close = '';
    for (let i = this.depth - 1; i >= 0; i--) {
      open += i % 2 ? '[' : '{"a":';
      close = (i % 2 ? ']' : '}') + close;
    }
    return `${open}"leaf"${close}`;
  }
  [fc.toStringMethod](): string {
    return `<nested ${this.depth} levels>`;
  }
}
const nested = (depth: number) => new Nested(depth);

/** The request body's JSON text, deep nestings spliced in as text. */
function bodyText(body: unknown): string {
  const deep: Nested[] = [];
  const text = JSON.stringify(body, (_k, v) => {
    if (!(v instanceof Nested)) return v;
    deep.push(v);
    return `@@nested-${deep.length - 1}@@`;
  });
  return text.replace(/"@@nested-(\d+)@@"/g, (_m, i: string) => deep[Number(i)].text());
}

const ODD_UNICODE = ['\ud800', '\udfff', 'a\ud83d', '\ufeff', '\u202e', '\u200b\u200d', 'e\u0301\u0301\u0301', '👩‍👩‍👧', '\u2028\u2029', '\uffff', '\u0085', 'İı', 'ß', '𝔘𝔫𝔦'];
const CONTROL_UNIT = fc.constantFrom('\0', '\r', '\n', '\t', '\x01', '\x1b', '\x7f', 'a', ' ', '{{', '}}', '"', '\\', '<', '@');

const oddString = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.string({ unit: CONTROL_UNIT, maxLength: 40 }),
  fc.constantFrom(...ODD_UNICODE),
  fc.constantFrom('', ' ', 'null', 'true', 'false', '0', '-1', '1e400', '-0', '0x10', ' 12 ', '1.5', 'NaN', '9007199254740993', '[]', '{}'),
  fc.constantFrom('a@example.com', 'Ann <ann@example.com>', 'x@null.postageapp.com', 'http://127.0.0.1/x', 'https://example.com/hook', 'sample_parent_layout', 'welcome', '2026-11-24', '2026-11-24T00:00:00Z'),
  fc.integer().map(String),
  fc.tuple(fc.integer({ min: 1000, max: 300_000 }), fc.constantFrom('x', '\0', 'é', '{{a}}')).map(([n, c]) => c.repeat(n)),
);

const leaf = fc.oneof(
  oddString,
  fc.integer(),
  fc.integer({ min: -1, max: 1_000_000 }),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.constantFrom(Number.MAX_SAFE_INTEGER, -Number.MAX_SAFE_INTEGER, 1e308, -1e-308, 0.1),
  fc.boolean(),
  fc.constant(null),
);

/** Any argument value: a leaf, random JSON, a list or map of odd values, or a deep nesting. */
const anyValue: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 6, arbitrary: leaf },
  { weight: 2, arbitrary: fc.jsonValue({ maxDepth: 4 }) },
  { weight: 2, arbitrary: fc.array(leaf, { maxLength: 8 }) },
  { weight: 2, arbitrary: fc.dictionary(oddString, leaf, { maxKeys: 6 }) },
  { weight: 1, arbitrary: fc.integer({ min: 10, max: 6000 }).map(nested) },
);

interface Call {
  method: string;
  key: 'account' | 'project' | 'none' | 'bogus';
  /** the arguments object, or (rarely) something that is not an object */
  args: unknown;
  top: Record<string, unknown>;
  version: '1.0' | '1.1';
}

const callArb: fc.Arbitrary<Call> = fc
  .constantFrom(...METHOD_NAMES)
  .chain((method) => {
    const names = METHOD_ARGS.get(method)!;
    const known = names.length === 0 ? fc.constant({}) : fc.record(Object.fromEntries(names.map((n) => [n, anyValue])), { requiredKeys: [] });
    const args = fc.oneof(
      { weight: 8, arbitrary: fc.tuple(known, fc.dictionary(oddString, leaf, { maxKeys: 3 })).map(([k, extra]) => ({ ...extra, ...k })) },
      { weight: 1, arbitrary: anyValue },
    );
    return fc.record({
      method: fc.constant(method),
      // Mostly the key kind the method takes (so the arguments are read), else the other kind, none
      // or a key that does not exist.
      key: fc.oneof(
        { weight: 7, arbitrary: METHOD_KEY.get(method) === 'any' ? fc.constantFrom<'account' | 'project'>('account', 'project') : fc.constant(METHOD_KEY.get(method) as 'account' | 'project') },
        { weight: 2, arbitrary: fc.constantFrom<'account' | 'project'>('account', 'project') },
        { weight: 1, arbitrary: fc.constantFrom<'none' | 'bogus'>('none', 'bogus') },
      ),
      args,
      top: fc.record({ uid: anyValue, recipient_override: anyValue }, { requiredKeys: [] }),
      version: fc.constantFrom<'1.0' | '1.1'>('1.0', '1.1'),
    });
  });

/** A short description of a value for messages: huge strings and nestings abbreviated. */
function describeCall(call: Call): string {
  const text = JSON.stringify(call, (_k, v) => {
    if (v instanceof Nested) return `<nested ${v.depth} levels>`;
    return typeof v === 'string' && v.length > 80 ? `<${v.length} chars of ${JSON.stringify(v.slice(0, 8))}...>` : v;
  });
  return text.length > 2000 ? `${text.slice(0, 2000)}... (${text.length} chars)` : text;
}

describe('fuzz: every method, both key kinds, arbitrary arguments', () => {
  let t: TestApp;
  let dns: TestDnsServer;
  let seed: Seed;
  const tally = new Map<string, number>();
  const logged: Array<{ msg?: string; err?: { message?: string; stack?: string } }> = [];

  before(async () => {
    // Webhook, mailbox and domain checks resolve through this empty zone (NXDOMAIN at once).
    dns = await startDnsServer({});
    // Errors the service logs are kept: they name the cause of a 500.
    const sink = new Writable({
      write(chunk, _enc, done) {
        try {
          const line = JSON.parse(String(chunk));
          if (line.level >= 50) logged.push(line);
        } catch {
          /* not JSON: ignore */
        }
        done();
      },
    });
    t = await startTestApp({ background: false, log: pino({ level: 'error' }, sink), config: { dnsServers: [dns.address] } });
    seed = await t.seed('fuzz');
  });
  after(async () => {
    console.log(`# fuzz (seed ${SEED}, ${RUNS} runs, ${METHOD_NAMES.length} methods): ${JSON.stringify(Object.fromEntries([...tally].sort()))}`);
    await t?.close();
    await dns?.close();
  });

  async function send(call: Call) {
    const apiKey = call.key === 'account' ? seed.accountKey : call.key === 'project' ? seed.projectKey : call.key === 'bogus' ? 'not-a-key' : undefined;
    const body: Record<string, unknown> = { ...call.top, arguments: call.args };
    if (apiKey !== undefined) body.api_key = apiKey;
    const path = call.version === '1.0' ? `/v.1.0/${call.method}.json` : `/v.1.1/${call.method}`;
    const reply = await t.post(path, bodyText(body), { 'content-type': 'application/json' });
    // A call that took the caller's own key away (rotate, disable) is answered; the next calls need
    // working keys, so a fresh account and project take over.
    if (reply.status === 200 && ['rotate_project_key', 'disable_project'].includes(call.method)) seed = await t.seed('fuzz');
    return reply;
  }

  /** What is wrong with a reply, or null when it is a proper envelope. */
  function defectOf(method: string, r: { status: number; body: any }): string | null {
    const status = r.body?.response?.status;
    if (typeof r.body !== 'object' || r.body === null) return 'not a JSON envelope';
    if (typeof status !== 'string' || !(status in API_STATUSES)) return `status ${JSON.stringify(status)} is not in the API's table`;
    // test_error answers 500 by design (docs/api/reference.md), with an envelope.
    if ((r.status === 500 || status === 'internal_server_error') && method !== 'test_error') return '500 internal_server_error';
    if (r.status !== API_STATUSES[status as keyof typeof API_STATUSES]) return `HTTP ${r.status} does not match ${status}`;
    return null;
  }

  it(`answers every call with an envelope of the API's table, never a 500 (${RUNS} runs, seed ${SEED})`, { timeout: 20 * 60_000 }, async () => {
    // Every defective reply is recorded, grouped by method and by the error the service logged, so
    // one run shows every class of failure (not only the first), each with an input that shows it.
    const defects = new Map<string, { count: number; methods: Set<string>; example: string }>();
    await fc.assert(
      fc.asyncProperty(callArb, async (call) => {
        logged.length = 0;
        const r = await send(call);
        const status = r.body?.response?.status;
        tally.set(String(status), (tally.get(String(status)) ?? 0) + 1);
        const defect = defectOf(call.method, r);
        if (defect === null) return;
        const cause = logged.map((l) => `${l.err?.message ?? l.msg} at ${/\n\s+at ([^\n]*)/.exec(l.err?.stack ?? '')?.[1] ?? '?'}`).join('; ') || 'nothing logged';
        const key = `${defect}: ${cause}`;
        const entry = defects.get(key) ?? { count: 0, methods: new Set<string>(), example: `${describeCall(call)} -> ${r.status} ${JSON.stringify(r.body).slice(0, 200)}` };
        entry.count++;
        entry.methods.add(call.method);
        defects.set(key, entry);
      }),
      { numRuns: RUNS, seed: SEED },
    );
    // The process is up and answers.
    const alive = await t.call('get_account_info', { api_key: seed.accountKey });
    assert.equal(alive.status, 200);
    const report = [...defects].map(([key, d]) => `- ${d.count}x ${key} (${d.methods.size} methods: ${[...d.methods].sort().join(', ')})\n    e.g. ${d.example}`).join('\n');
    assert.equal(defects.size, 0, `defective replies (seed ${SEED}, reproduce with POSTHORN_FUZZ_SEED=${SEED}):\n${report}`);
  });
});

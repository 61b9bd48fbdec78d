// Sending domains of an account (docs/domains-and-bounces.md): create (with a fresh 2048-bit RSA DKIM key),
// list, get, check the DNS records, delete. The private key is sealed with services.secrets before
// it is stored and is never returned or logged; answers carry the records to publish instead.
import { generateKeyPair } from 'node:crypto';
import { Resolver } from 'node:dns/promises';
import { promisify } from 'node:util';
import {
  canonicalDomainName,
  checkDkim,
  checkReturnPath,
  checkSpf,
  dkimSelectorFor,
  expectedRecords,
  joinTxt,
  summarizeCheck,
  type DnsRecords,
  type DomainCheck,
  type LookupResult,
} from '../domain/dns-records.ts';
import { ApiError } from '../domain/errors.ts';
import { countDomains, deleteDomain as deleteDomainRow, findDomain, insertDomain, listDomains as listDomainRows, recordDomainCheck } from '../storage/domains.ts';
import { isDuplicate } from '../storage/duplicates.ts';
import type { Account, Domain } from '../storage/schema.ts';
import type { Services } from '../services.ts';

/** Domains per account: each costs an RSA key generation, so the number is bounded. */
export const MAX_DOMAINS_PER_ACCOUNT = 100;
/** Per DNS query; check_domain makes three in parallel, each tried twice at most. */
const DNS_TIMEOUT_MS = 3000;

const generateRsaKeyPair = promisify(generateKeyPair);

export interface DomainView {
  domain: Domain;
  records: DnsRecords;
  lastCheck: DomainCheck | null;
}

function viewOf(services: Services, domain: Domain): DomainView {
  return {
    domain,
    records: expectedRecords(
      { name: domain.name, dkimSelector: domain.dkim_selector, dkimPublicKeyPem: domain.dkim_public_key },
      { mailerHost: services.config.mailerHost, bounceDomain: services.config.bounceDomain },
    ),
    lastCheck: domain.last_check ? (JSON.parse(domain.last_check) as DomainCheck) : null,
  };
}

/** The canonical name, or 412 naming the input (like an invalid address in send_message). */
function requireDomainName(input: string): string {
  const name = canonicalDomainName(input);
  if (!name) throw new ApiError('precondition_failed', `Invalid domain name "${input.slice(0, 300)}".`);
  return name;
}

async function requireDomain(services: Services, account: Account, input: string): Promise<Domain> {
  const name = requireDomainName(input);
  const domain = await findDomain(services.store.db, account.id, name);
  if (!domain) throw new ApiError('not_found', `Domain ${name} not found.`);
  return domain;
}

export async function createDomain(services: Services, account: Account, input: { name: string }): Promise<DomainView> {
  const name = requireDomainName(input.name);
  if (await findDomain(services.store.db, account.id, name)) throw new ApiError('bad_request', `Domain ${name} already exists.`);
  if ((await countDomains(services.store.db, account.id)) >= MAX_DOMAINS_PER_ACCOUNT) {
    throw new ApiError('precondition_failed', `An account may have at most ${MAX_DOMAINS_PER_ACCOUNT} domains; delete one first.`);
  }
  // Key generation runs on the thread pool, outside any transaction.
  const { publicKey, privateKey } = await generateRsaKeyPair('rsa', {
    modulusLength: 2048,
    publicKeyEncoding: { type: 'spki', format: 'pem' },
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
  });
  const now = services.clock.now();
  const domain = await services.store.write(async (trx) => {
    const inserted = await insertDomain(trx, {
      accountId: account.id,
      name,
      selector: dkimSelectorFor(now),
      sealedPrivateKey: services.secrets.seal(privateKey),
      publicKeyPem: publicKey,
      now,
    });
    // Two concurrent creations of one name: the unique constraint decides.
    if (isDuplicate(inserted)) throw new ApiError('bad_request', `Domain ${name} already exists.`);
    return inserted;
  });
  services.ports.forgetDkimKeys(account.id);
  return viewOf(services, domain);
}

export async function listDomains(services: Services, account: Account): Promise<DomainView[]> {
  return (await listDomainRows(services.store.db, account.id)).map((d) => viewOf(services, d));
}

export async function getDomain(services: Services, account: Account, input: { name: string }): Promise<DomainView> {
  return viewOf(services, await requireDomain(services, account, input.name));
}

export async function removeDomain(services: Services, account: Account, input: { name: string }): Promise<string> {
  const domain = await requireDomain(services, account, input.name);
  const deleted = await services.store.write((trx) => deleteDomainRow(trx, account.id, domain.name));
  services.ports.forgetDkimKeys(account.id);
  if (!deleted) throw new ApiError('not_found', `Domain ${domain.name} not found.`);
  return domain.name;
}

/** Looks the records up through the configured DNS servers and stores the result. */
export async function checkDomain(services: Services, account: Account, input: { name: string }): Promise<DomainView> {
  const domain = await requireDomain(services, account, input.name);
  const { records } = viewOf(services, domain);
  const resolver = createResolver(services);
  const [dkim, spf, mx] = await Promise.all([
    lookup(() => resolver.resolveTxt(records.dkim.name).then(joinTxt)),
    lookup(() => resolver.resolveTxt(records.spf.name).then(joinTxt)),
    lookup(() => resolver.resolveMx(records.return_path.name)),
  ]);
  const check = summarizeCheck({
    dkim: checkDkim(records.dkim, dkim),
    spf: checkSpf(services.config.mailerHost, spf),
    return_path: checkReturnPath(services.config.mailerHost, mx),
  });
  const now = services.clock.now();
  const updated = await services.store.write((trx) => recordDomainCheck(trx, domain.id, JSON.stringify(check), now));
  if (!updated) throw new ApiError('not_found', `Domain ${domain.name} not found.`);
  return viewOf(services, updated);
}

function createResolver(services: Services): Resolver {
  const resolver = new Resolver({ timeout: DNS_TIMEOUT_MS, tries: 2 });
  if (services.config.dnsServers.length > 0) resolver.setServers([...services.config.dnsServers]);
  return resolver;
}

/** A lookup as a value: NXDOMAIN and NODATA are "none", anything else that fails is "error". */
async function lookup<T>(fn: () => Promise<T[]>): Promise<LookupResult<T>> {
  try {
    return { kind: 'answers', answers: await fn() };
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? 'EUNKNOWN';
    if (code === 'ENODATA' || code === 'ENOTFOUND') return { kind: 'none' };
    return { kind: 'error', code };
  }
}

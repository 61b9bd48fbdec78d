// Delivery configuration methods (docs/domains-and-bounces.md): the suppression list by hand (project key) and sending
// domains with their DKIM keys and DNS records (account key). docs/domains-and-bounces.md.
import type { Args } from '../../../domain/args.ts';
import { formatIsoTime } from '../../../domain/time.ts';
import { checkDomain, createDomain, getDomain, listDomains, removeDomain, type DomainView } from '../../../operations/domains.ts';
import { addToSuppressionList, removeFromSuppressionList } from '../../../operations/suppressions.ts';
import { defineMethods, projectOf } from './types.ts';
import { Type } from '@sinclair/typebox';
import { DomainData, SuppressionEntry } from '../data-schemas.ts';
import { anyOf, NO_ARGUMENTS, obj, optional, required, str } from '../schema.ts';

/** `address` (one string) and/or `addresses` (an array of strings, or one string). */
function readAddresses(args: Args): string[] {
  const out: string[] = [];
  const one = args.string('address');
  if (one !== undefined && one.trim() !== '') out.push(one);
  const many = args.value('addresses');
  if (typeof many === 'string') {
    if (many.trim() !== '') out.push(many);
  } else if (many !== undefined) {
    const list = args.array('addresses') ?? [];
    list.forEach((item, i) => {
      if (typeof item !== 'string') throw args.invalid(`addresses[${i}]`, 'must be a string');
      if (item.trim() !== '') out.push(item);
    });
  }
  return out;
}

function presentDomain(view: DomainView) {
  return {
    name: view.domain.name,
    dkim_selector: view.domain.dkim_selector,
    created_at: formatIsoTime(view.domain.created_at),
    dns_records: view.records,
    last_check: view.lastCheck,
    checked_at: formatIsoTime(view.domain.checked_at),
  };
}

function domainName(args: Args): { name: string } {
  return { name: args.string('name', { required: true }) };
}

export const deliveryMethods = defineMethods([
  {
    name: 'add_to_suppression_list',
    key: 'project',
    summary: 'Puts addresses on the project suppression list by hand (status rejected, suppression_state manual).',
    args: obj({ address: optional(str({ description: 'one address' })), addresses: optional(anyOf([Type.Array(Type.Union([Type.String(), Type.Null()])), Type.String()], 'an array', { description: 'several addresses (or one as a string); at most 1000 per call' })), message: optional(str({ description: 'why (default "Added manually")' })) }),
    data: Type.Object({ suppression_list: Type.Record(Type.String(), SuppressionEntry, { description: 'by normalized address' }) }),
    async run({ services, caller, args }) {
      const message = args.string('message') ?? null;
      const entries = await addToSuppressionList(services, projectOf(caller), { addresses: readAddresses(args), message });
      return { data: { suppression_list: entries } };
    },
  },
  {
    name: 'remove_from_suppression_list',
    key: 'project',
    summary: 'Removes addresses from the project suppression list, whatever put them there.',
    args: obj({ address: optional(str({ description: 'one address' })), addresses: optional(anyOf([Type.Array(Type.Union([Type.String(), Type.Null()])), Type.String()], 'an array', { description: 'several addresses (or one as a string); at most 1000 per call' })) }),
    data: Type.Object({ removed: Type.Array(Type.String()), not_found: Type.Array(Type.String()) }),
    async run({ services, caller, args }) {
      return { data: await removeFromSuppressionList(services, projectOf(caller), { addresses: readAddresses(args) }) };
    },
  },
  {
    name: 'create_domain',
    key: 'account',
    summary: 'Adds a sending domain with a new 2048-bit DKIM key; answers the DNS records to publish.',
    args: obj({ name: required(str({ description: 'the domain name, e.g. mail.example.com' })) }),
    data: Type.Object({ domain: DomainData }),
    async run({ services, caller, args }) {
      return { data: { domain: presentDomain(await createDomain(services, caller.account, domainName(args))) } };
    },
  },
  {
    name: 'list_domains',
    key: 'account',
    summary: 'The sending domains of the account, by name.',
    args: NO_ARGUMENTS,
    data: Type.Object({ domains: Type.Array(DomainData) }),
    async run({ services, caller }) {
      return { data: { domains: (await listDomains(services, caller.account)).map(presentDomain) } };
    },
  },
  {
    name: 'get_domain',
    key: 'account',
    summary: 'One sending domain: its DNS records and the last check.',
    args: obj({ name: required(str({ description: 'the domain name, e.g. mail.example.com' })) }),
    data: Type.Object({ domain: DomainData }),
    async run({ services, caller, args }) {
      return { data: { domain: presentDomain(await getDomain(services, caller.account, domainName(args))) } };
    },
  },
  {
    name: 'check_domain',
    key: 'account',
    summary: "Looks up a domain's DKIM, SPF and return-path records in DNS and reports each as ok, missing, mismatch or error.",
    args: obj({ name: required(str({ description: 'the domain name, e.g. mail.example.com' })) }),
    data: Type.Object({ domain: DomainData }),
    async run({ services, caller, args }) {
      return { data: { domain: presentDomain(await checkDomain(services, caller.account, domainName(args))) } };
    },
  },
  {
    name: 'delete_domain',
    key: 'account',
    summary: 'Removes a sending domain and its DKIM key; its mail goes out unsigned afterwards.',
    args: obj({ name: required(str({ description: 'the domain name, e.g. mail.example.com' })) }),
    data: Type.Object({ domain: Type.Object({ name: Type.String(), deleted: Type.Literal(true) }) }),
    async run({ services, caller, args }) {
      return { data: { domain: { name: await removeDomain(services, caller.account, domainName(args)), deleted: true } } };
    },
  },
]);

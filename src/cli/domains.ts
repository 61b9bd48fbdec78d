// domain: add a sending domain (its DKIM key is made), print the DNS records to publish as
// zone-file lines, check them against DNS, list (docs/cli.md).
import type { DomainView } from '../operations/domains.ts';
import { unhandled } from './command-args.ts';
import { print, withServices } from './output.ts';
import { isoTime, resolveAccount, table } from './scope.ts';
import { SWITCH, TEXT, type CliCommand, type CommandInput } from './types.ts';

/** A TXT value as zone-file strings: quoted, split into the 255-byte strings DNS allows. */
function zoneValue(type: string, value: string): string {
  if (type !== 'TXT') return value;
  const parts: string[] = [];
  for (let i = 0; i < value.length; i += 255) parts.push(`"${value.slice(i, i + 255).replace(/["\\]/g, (c) => `\\${c}`)}"`);
  return parts.join(' ');
}

export function zoneLines(view: DomainView): string[] {
  return Object.values(view.records).map((r) => `${r.name.endsWith('.') ? r.name : `${r.name}.`}\t3600\tIN\t${r.type}\t${zoneValue(r.type, r.value)}\t; ${r.note}`);
}

function present(view: DomainView) {
  return {
    name: view.domain.name,
    dkim_selector: view.domain.dkim_selector,
    records: view.records,
    last_check: view.lastCheck,
    checked_at: isoTime(view.domain.checked_at),
  };
}

async function domain({ config, args, flags }: CommandInput): Promise<number> {
  const [sub, name] = args;
  const json = flags.bool('json');
  const ops = await import('../operations/domains.ts');
  return withServices(config, async (services) => {
    const account = await resolveAccount(services, flags);
    switch (sub) {
      case 'add': {
        const view = await ops.createDomain(services, account, { name });
        print(json, present(view), [`domain ${view.domain.name} added; publish these records:`, ...zoneLines(view)].join('\n'));
        return 0;
      }
      case 'zone': {
        const view = await ops.getDomain(services, account, { name });
        print(json, { name: view.domain.name, lines: zoneLines(view) }, zoneLines(view).join('\n'));
        return 0;
      }
      case 'check': {
        const view = await ops.checkDomain(services, account, { name });
        const check = view.lastCheck;
        const rows = check ? Object.entries(check.records).map(([purpose, r]) => [purpose, r.status, r.found.join(' | ').slice(0, 100)]) : [];
        print(json, present(view), `${view.domain.name}: ${check?.status ?? 'unchecked'}\n${table(['RECORD', 'STATUS', 'FOUND'], rows, '')}`);
        return check?.status === 'ok' ? 0 : 1;
      }
      case 'list': {
        const views = await ops.listDomains(services, account);
        const out = views.map(present);
        print(json, out, table(['DOMAIN', 'SELECTOR', 'CHECK', 'CHECKED'], out.map((d) => [d.name, d.dkim_selector, d.last_check?.status ?? 'unchecked', d.checked_at]), '(no domains)'));
        return 0;
      }
      default:
        return unhandled(sub);
    }
  });
}

export const domainCommands: CliCommand[] = [
  {
    name: 'domain',
    usage: ['domain add NAME [--account UID] [--json]', 'domain zone NAME [--json]   the DNS records as zone-file lines', 'domain check NAME [--json]   exit 1 unless every record is in place', 'domain list [--json]'],
    description: 'Sending domains of an account: DKIM key, the SPF, DKIM and return-path records to publish, and their check against DNS (--dns-server).',
    flags: { json: SWITCH, account: TEXT },
    subcommands: { add: { args: ['NAME'] }, zone: { args: ['NAME'] }, check: { args: ['NAME'] }, list: {} },
    run: domain,
  },
];

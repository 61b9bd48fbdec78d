// Managing a project's suppression list by hand (docs/domains-and-bounces.md): add addresses (`rejected`, `manual`) and
// remove entries (hard, soft or manual). Bounces add entries through storage/suppressions.ts
// recordBounce; get_suppression_list (reports) reads them, and can present them with
// presentSuppression below.
import { ApiError, callError } from '../domain/errors.ts';
import { isPlausibleAddress, normalizeAddress, suppressionKey } from '../domain/suppression-policy.ts';
import { formatIsoTime } from '../domain/time.ts';
import type { Project, Suppression } from '../storage/schema.ts';
import { addManualSuppressions, findSuppressions, removeSuppressions } from '../storage/suppressions.ts';
import type { Services } from '../services.ts';

/** Addresses in one add or remove call. */
export const MAX_ADDRESSES_PER_CALL = 1000;

export interface SuppressionView {
  status: string;
  suppression_state: string;
  blocked_until: string | null;
  message: string | null;
}

/**
 * The address an entry is shown under (the API's keys, the dashboard): the spelling it was first
 * stored with. An entry is found by any spelling (docs/domains-and-bounces.md, "Suppression rules").
 */
export function shownAddress(row: Suppression): string {
  return row.display_address ?? row.address;
}

/** The given addresses in their normal form, one per entry (the first spelling of each), in order. */
function distinctAddresses(addresses: readonly string[]): string[] {
  const byKey = new Map<string, string>();
  for (const address of addresses) {
    const normal = normalizeAddress(address);
    if (!byKey.has(suppressionKey(normal))) byKey.set(suppressionKey(normal), normal);
  }
  return [...byKey.values()];
}

/** One entry as get_suppression_list shows it (compatibility.md). */
export function presentSuppression(row: Suppression): SuppressionView {
  return { status: row.status, suppression_state: row.suppression_state, blocked_until: formatIsoTime(row.blocked_until), message: row.message };
}

function checkCount(addresses: readonly string[]): void {
  if (addresses.length === 0) throw new ApiError('bad_request', 'Missing required argument "address" (or "addresses").');
  if (addresses.length > MAX_ADDRESSES_PER_CALL) {
    throw callError(`at most ${MAX_ADDRESSES_PER_CALL} addresses per call, got ${addresses.length}`);
  }
}

/** Adds addresses; answers every given address's entry after the call, keyed by its shown address. */
export async function addToSuppressionList(
  services: Services,
  project: Project,
  input: { addresses: readonly string[]; message: string | null },
): Promise<Record<string, SuppressionView>> {
  checkCount(input.addresses);
  const addresses = distinctAddresses(input.addresses);
  const invalid = addresses.find((a) => !isPlausibleAddress(a));
  if (invalid !== undefined) throw new ApiError('precondition_failed', `Invalid email address "${invalid.slice(0, 320)}".`);
  const message = input.message ?? 'Added manually';
  const now = services.clock.now();
  const rows = await services.store.write(async (trx) => {
    await addManualSuppressions(trx, project.id, addresses, message.slice(0, 1000), now);
    return findSuppressions(trx, project.id, addresses);
  });
  return Object.fromEntries(rows.map((r) => [shownAddress(r), presentSuppression(r)]));
}

/** One line of a pasted list that is not an address: its number (from 1) and text. */
export interface BadLine {
  line: number;
  text: string;
}

/**
 * A pasted list of addresses (the dashboard's form): one a line, commas and semicolons separating
 * too, a line may be "Name <address>"; the addresses, and every line that holds something that is
 * not one, so a form can say which lines to fix and keep the rest as typed.
 */
export function readAddressLines(text: string): { addresses: string[]; bad: BadLine[] } {
  const addresses: string[] = [];
  const bad: BadLine[] = [];
  text.split(/\r\n|\r|\n/).forEach((line, i) => {
    for (const item of line.split(/[,;]+/).map((a) => a.trim()).filter((a) => a !== '')) {
      if (isPlausibleAddress(normalizeAddress(item))) addresses.push(item);
      else if (bad[bad.length - 1]?.line !== i + 1) bad.push({ line: i + 1, text: line.trim().slice(0, 320) });
    }
  });
  return { addresses, bad };
}

export interface RemovalResult {
  removed: string[];
  not_found: string[];
}

/**
 * Removes entries, found by any spelling; answers both lists in the order given, as given (in
 * normal form); 404 when none of the addresses was on the list.
 */
export async function removeFromSuppressionList(services: Services, project: Project, input: { addresses: readonly string[] }): Promise<RemovalResult> {
  checkCount(input.addresses);
  const addresses = distinctAddresses(input.addresses);
  const gone = new Set(await services.store.write((trx) => removeSuppressions(trx, project.id, addresses)));
  const notFound = addresses.filter((a) => !gone.has(suppressionKey(a)));
  if (gone.size === 0) {
    const shown = notFound.slice(0, 5).join(', ') + (notFound.length > 5 ? `, and ${notFound.length - 5} more` : '');
    throw new ApiError('not_found', `Not on the suppression list: ${shown}.`);
  }
  return { removed: addresses.filter((a) => gone.has(suppressionKey(a))), not_found: notFound };
}

// Outbound URLs (webhook endpoints, mailbox postbacks) are checked against the address policy when
// they are saved, so the user learns at once; the dispatcher checks again before every send, since
// DNS may change in between. The policy is the port services.ports.outboundAddresses
// (src/services.ts; the adapter is src/webhooks/url-policy.ts).
import { invalidArgument } from '../domain/args.ts';
import { ApiError } from '../domain/errors.ts';
import type { Services } from '../services.ts';

/** The URL, normalised; 406 call_error when malformed, 400 when its host is not a public address. */
export async function checkOutboundUrl(services: Services, raw: string, opts: { field: string; label: string }): Promise<string> {
  const policy = services.ports.outboundAddresses;
  const parsed = policy.parseUrl(raw.trim());
  if (!parsed.ok) throw invalidArgument(opts.field, parsed.reason);
  const checked = await policy.checkHost(parsed.url.hostname);
  if (!checked.ok) throw new ApiError('bad_request', `${opts.label} refused: ${checked.reason}. Posthorn only posts to public addresses (the operator allows private ones with --allow-private-addresses).`);
  return parsed.url.href;
}

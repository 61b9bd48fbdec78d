// Outbound URLs (webhook endpoints, mailbox postbacks) are checked against the address policy when
// they are saved, so the user learns at once; the dispatcher checks again before every send, since
// DNS may change in between (src/webhooks/url-policy.ts).
import { invalidArgument } from '../domain/args.ts';
import { ApiError } from '../domain/errors.ts';
import { parseOutboundUrl, resolveOutboundAddress } from '../webhooks/url-policy.ts';
import type { Services } from './context.ts';

/** The URL, normalised; 406 call_error when malformed, 400 when its host is not a public address. */
export async function checkOutboundUrl(services: Services, raw: string, opts: { field: string; label: string }): Promise<string> {
  const parsed = parseOutboundUrl(raw.trim());
  if (!parsed.ok) throw invalidArgument(opts.field, parsed.reason);
  const checked = await resolveOutboundAddress(parsed.url, {
    allowPrivate: services.config.allowPrivateWebhooks,
    dnsServers: services.config.dnsServers,
  });
  if (!checked.ok) throw new ApiError('bad_request', `${opts.label} refused: ${checked.reason}. Posthorn only posts to public addresses.`);
  return parsed.url.href;
}

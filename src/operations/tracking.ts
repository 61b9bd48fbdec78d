// Recording opens and clicks (docs/tracking.md). The first open (or click) of a transmission sets
// opened_at (clicked_at) and writes one 'opened' ('clicked') event in the same transaction, so
// get_message_transmissions, metrics and webhooks agree; later ones change nothing. A click also
// counts as an open (an image-blocking mail client still opened the mail to click).
import { buildEventPayload, readAcceptedPayload, type ReaderDetails } from '../domain/events.ts';
import { recordEvent } from '../storage/events.ts';
import type { Tx } from '../storage/store.ts';
import { findTransmissionSubject, setFirstTrackingTime } from '../storage/transmissions.ts';
import type { Services } from '../services.ts';

export interface TrackingHit {
  transmissionId: number;
  /** the link's target, for a click */
  url?: string;
  userAgent: string | null;
}

export async function recordOpen(services: Services, hit: TrackingHit): Promise<void> {
  await record(services, hit, ['opened']);
}

export async function recordClick(services: Services, hit: TrackingHit): Promise<void> {
  await record(services, hit, ['opened', 'clicked']);
}

async function record(services: Services, hit: TrackingHit, kinds: Array<'opened' | 'clicked'>): Promise<void> {
  const now = services.clock.now();
  const wrote = await services.store.write(async (trx) => {
    let any = false;
    for (const kind of kinds) {
      const column = kind === 'opened' ? 'opened_at' : 'clicked_at';
      if (!(await setFirstTrackingTime(trx, hit.transmissionId, column, now))) continue;
      await writeEvent(trx, kind, hit, now);
      any = true;
    }
    return any;
  });
  if (wrote) services.store.wake('events');
}

async function writeEvent(trx: Tx, kind: 'opened' | 'clicked', hit: TrackingHit, now: number): Promise<void> {
  const row = await findTransmissionSubject(trx, hit.transmissionId);
  if (!row) return;
  const details: ReaderDetails = kind === 'clicked' ? { kind, userAgent: hit.userAgent, url: hit.url ?? '' } : { kind, userAgent: hit.userAgent };
  const subject = {
    transmissionId: Number(row.transmission_id),
    messageId: Number(row.message_id),
    messageUid: row.message_uid,
    uniqueId: row.unique_id,
    projectUid: row.project_uid,
    recipient: row.recipient,
    globalVariables: readAcceptedPayload(row.payload).globalVariables,
    recipientVariables: row.variables,
  };
  await recordEvent(trx, { accountId: Number(row.account_id), projectId: Number(row.project_id), type: kind, payload: buildEventPayload(subject, details, now), now });
}


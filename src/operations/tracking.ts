// Recording opens and clicks (issue 6). The first open (or click) of a transmission sets
// opened_at (clicked_at) and writes one 'opened' ('clicked') event in the same transaction, so
// get_message_transmissions, metrics and webhooks agree; later ones change nothing. A click also
// counts as an open (an image-blocking mail client still opened the mail to click).
import type { EventType } from '../storage/events.ts';
import { recordEvent } from '../storage/events.ts';
import type { Tx } from '../storage/store.ts';
import { findTransmissionSubject, setFirstTrackingTime } from '../storage/transmissions.ts';
import { formatIsoTime } from '../domain/time.ts';
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

async function writeEvent(trx: Tx, type: EventType, hit: TrackingHit, now: number): Promise<void> {
  const row = await findTransmissionSubject(trx, hit.transmissionId);
  if (!row) return;
  let variables: unknown = null;
  try {
    variables = row.variables ? JSON.parse(row.variables) : null;
  } catch {
    variables = null;
  }
  await recordEvent(trx, {
    accountId: Number(row.account_id),
    projectId: Number(row.project_id),
    type,
    payload: {
      transmission_id: Number(row.transmission_id),
      message_id: Number(row.message_id),
      message_uid: row.message_uid,
      unique_id: row.unique_id,
      project_uid: row.project_uid,
      recipient: row.recipient,
      ...(type === 'clicked' ? { url: hit.url } : {}),
      user_agent: hit.userAgent,
      occurred_at: formatIsoTime(now),
      variables,
    },
    now,
  });
}

// Recording opens and clicks (docs/tracking.md). The first open (or click) of a transmission sets
// opened_at (clicked_at) and writes one 'opened' ('clicked') event in the same transaction, so
// get_message_transmissions, metrics and webhooks agree; later ones change nothing. A click also
// counts as an open (an image-blocking mail client still opened the mail to click).
import { buildEventPayload, type ReaderDetails } from '../domain/events.ts';
import { recordEvent } from '../storage/events.ts';
import type { Tx } from '../storage/store.ts';
import { findTransmissionSubject, setFirstTrackingTime } from '../storage/transmissions.ts';
import { listProjectsNamingTracking } from '../storage/projects.ts';
import { isLocalOnlyUrl } from '../domain/public-url.ts';
import type { Services } from '../services.ts';
import type { Project } from './context.ts';
import { readProjectSettings } from './projects.ts';

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
  // The store wakes the webhook fan-out for the events written, where an endpoint hears them.
  await services.store.write(async (trx) => {
    for (const kind of kinds) {
      const column = kind === 'opened' ? 'opened_at' : 'clicked_at';
      if (await setFirstTrackingTime(trx, hit.transmissionId, column, now)) await writeEvent(trx, kind, hit, now);
    }
  });
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
    sandbox: Number(row.sandbox) === 1,
  };
  await recordEvent(trx, { accountId: Number(row.account_id), projectId: Number(row.project_id), type: kind, payload: buildEventPayload(subject, details, now), now });
}


/**
 * What is wrong with the tracking of this project's messages (or, without a project, of any
 * active project's), or null: tracking is on (--tracking, and the project's setting) while
 * --public-url names this machine alone, so the links and the open pixel written into the mail
 * point where no reader's mail client can go, and no open or click is ever recorded
 * (docs/tracking.md). A message may also ask for tracking itself (send_message's `tracking`,
 * X-Posthorn-Tracking): those cannot be foreseen, so only the projects' settings are asked.
 */
export async function unreachableTrackingProblem(services: Services, project?: Pick<Project, 'settings'>): Promise<string | null> {
  const { config } = services;
  if (!config.tracking || !isLocalOnlyUrl(config.publicUrl)) return null;
  const tracks = project
    ? readProjectSettings(project).tracking
    : (await listProjectsNamingTracking(services.store.db, 10)).some((p) => readProjectSettings(p).tracking);
  if (!tracks) return null;
  return `tracking links and the open pixel point at ${config.publicUrl}, which readers' mail clients cannot reach, so no open or click is recorded: set --public-url (POSTHORN_PUBLIC_URL) to the address readers reach this service at`;
}

// get_messages: the project's messages, newest first, keyed by uid, each with its transmission
// tallies, the day it falls out of the retention window and, for a scheduled send, when it is due.
// Answered as [uid, listing] pairs in that order: an object would put integer-like uids ("2",
// "10") first and read a uid "__proto__" as its prototype; the API writes the pairs as the keys
// of `data`, in order (http/api/envelope.ts, KeyedInOrder).
import { formatIsoTime } from '../../domain/time.ts';
import { willPurgeAt } from '../retention.ts';
import { listMessagesPage, tallyTransmissionsByMessage } from '../../storage/reports.ts';
import type { Project } from '../../storage/schema.ts';
import type { Services } from '../../services.ts';


export interface MessageListing {
  project_id: number;
  template: string | null;
  transmissions_total: number;
  transmissions_failed: number;
  transmissions_completed: number;
  created_at: string | null;
  will_purge_at: string | null;
  /** when a message scheduled with send_at is due; null when it was due at acceptance */
  send_at: string | null;
}

export async function listMessages(
  services: Services,
  project: Project,
  req: { page: number; perPage: number },
): Promise<Array<[string, MessageListing]>> {
  const db = services.store.db;
  const messages = await listMessagesPage(db, project.id, (req.page - 1) * req.perPage, req.perPage);
  const tallies = new Map((await tallyTransmissionsByMessage(db, messages.map((m) => m.id))).map((t) => [t.message_id, t]));
  const out: Array<[string, MessageListing]> = [];
  for (const m of messages) {
    const tally = tallies.get(Number(m.id));
    out.push([m.uid, {
      project_id: Number(m.project_id),
      template: m.template,
      transmissions_total: tally?.total ?? 0,
      transmissions_failed: tally?.failed ?? 0,
      transmissions_completed: tally?.completed ?? 0,
      created_at: formatIsoTime(m.created_at),
      // The purge's own rule (operations/retention.ts): null when the project keeps everything.
      will_purge_at: formatIsoTime(willPurgeAt(services, project, m.created_at, m.send_at === null ? null : Number(m.send_at))),
      // Written at acceptance (migration 280), as get_message_transmissions reads it from the payload.
      send_at: m.send_at === null ? null : formatIsoTime(Number(m.send_at)),
    }]);
  }
  return out;
}

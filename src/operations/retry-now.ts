// "Retry now" (the dashboard's message page, docs/dashboard.md "One message"): a copy waiting to
// retry (status retry) is made due now instead of at its next retry time, and the delivery
// workers are woken. It does not attempt the delivery itself: a worker claims the copy as it
// claims any due one, under a lease, so a copy is never sent twice. A copy a worker holds under a
// live lease is being delivered right now and is left alone (storage/transmissions.ts).
import { ApiError } from '../domain/errors.ts';
import type { Services } from '../services.ts';
import { findProjectMessage } from '../storage/cancellations.ts';
import { findCopyState, makeRetryDueNow } from '../storage/transmissions.ts';
import type { Project } from './context.ts';

export interface RetryNowInput {
  messageId: number;
  /** the copy (transmission) of that message */
  transmissionId: number;
}

/** Makes the copy due now; its recipient. Refused (nothing changed) when it is not waiting to retry. */
export async function retryCopyNow(services: Services, project: Project, input: RetryNowInput): Promise<{ recipient: string }> {
  const db = services.store.db;
  const notFound = new ApiError('not_found', `Message ${input.messageId} has no copy ${input.transmissionId}.`);
  if (!(await findProjectMessage(db, project.id, { id: input.messageId }))) throw notFound;
  const now = services.clock.now();
  const changed = await services.store.write((trx) => makeRetryDueNow(trx, { ...input, now }));
  const copy = await findCopyState(db, input.messageId, input.transmissionId);
  if (!copy) throw notFound;
  if (changed) {
    services.store.wake('transmissions');
    return { recipient: copy.recipient };
  }
  if (copy.status === 'retry') throw new ApiError('precondition_failed', `The copy to ${copy.recipient} is being delivered right now: nothing to retry.`);
  throw new ApiError('precondition_failed', `The copy to ${copy.recipient} is not waiting to retry (it is ${copy.status}): nothing to retry.`);
}

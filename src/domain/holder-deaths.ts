// A transmission whose holder died (docs/reliability.md, "A message that kills its worker"). A
// process that dies while holding transmissions, killed or crashed, leaves them to be released by
// the registry of live processes (workers/process-registry.ts), and each counts the death
// (`transmissions.holder_deaths`, back to 0 once an attempt is recorded). One death says nothing
// of a row (a deploy's kill -9 hits every row in flight), so it is due again at once; but a
// message whose delivery crashes its process (a template that exhausts the heap) would be claimed
// and crash the next process too, for ever, and take every row claimed with it along. So:
//
//   1 death    due at once, at the front of the queue, worked as any other
//   2 deaths   a suspect: due after SUSPECT_DELAY_MS, behind what is due, and worked alone (one
//              at a time in a process, never claimed with other suspects), so that the next
//              crash is pinned on it: the rows in flight with it count a death too, but a row
//              reaches three only while it is the one suspect at work
//   3 deaths   failed at its next claim with WORKER_CRASHED (an attempt row, a `failed` event),
//              without reading its message's payload, composing or sending it: the event names
//              what is read without the payload, whichever step killed the holders

// Outbound requests (webhooks and postbacks, webhooks/dispatch-outbound.ts) count the deaths of
// their holders the same way (migration 270): from 2 a request is posted alone, at 3 it fails with
// WORKER_CRASHED without being posted (its attempts, charged at each claim, keep counting).

/** Deaths from which a transmission is worked alone (the literal 2 of migration 260's index). */
export const SUSPECT_AFTER_DEATHS = 2;
/** Deaths at which a transmission fails with WORKER_CRASHED instead of being worked again. */
export const MAX_HOLDER_DEATHS = 3;
/** How long a suspect waits after its release: the restarted process first takes what is due. */
export const SUSPECT_DELAY_MS = 5000;
/** The result code of a transmission failed for the deaths of its holders. */
export const WORKER_CRASHED = 'WORKER_CRASHED';

/** The result message of that failure. */
export function workerCrashedMessage(deaths: number): string {
  return `a delivery process died while holding this transmission ${deaths} times in a row; not tried again (a message that crashes its worker)`;
}

/** The error recorded for an outbound request failed for the deaths of its holders (after `WORKER_CRASHED: `). */
export function workerCrashedRequestMessage(deaths: number): string {
  return `a process died while holding this request ${deaths} times in a row; not posted again (a request that crashes its worker)`;
}

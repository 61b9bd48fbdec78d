// What one delivery attempt's outcome does to its transmission, as a value: the new state, the
// event it reports, and the result message (docs/delivery.md, "Retries"). Pure: the retry policy
// and the times come in, nothing is read or written.
//
//   sent                       -> completed, event delivered
//   failed (hard bounce)       -> failed,    event bounced
//   failed (otherwise)         -> failed,    event failed
//   deferred, within the policy -> retry at the policy's next time, event retry
//   deferred, policy exhausted  -> failed,    event failed, "gave up after ...; last: <message>"
import type { OutcomeKind } from './classify-smtp-reply.ts';
import { decideRetry, type RetryPolicy } from './retry-policy.ts';

export type TransmissionState =
  | { status: 'completed'; at: number }
  | { status: 'failed'; at: number }
  | { status: 'retry'; nextAttemptAt: number };

export type TransmissionEventType = 'delivered' | 'bounced' | 'failed' | 'retry';

export interface AttemptOutcome {
  kind: OutcomeKind;
  resultMessage: string;
  bounce: 'hard' | 'soft' | null;
}

export interface TransmissionOutcome {
  state: TransmissionState;
  eventType: TransmissionEventType;
  /** the outcome as reported: a deferral past the policy is reported as failed */
  kind: OutcomeKind;
  resultMessage: string;
}

/** `attemptsBefore` counts the attempts recorded before this one. */
export function decideTransmissionOutcome(
  policy: RetryPolicy,
  outcome: AttemptOutcome,
  transmission: { createdAt: number; attemptsBefore: number },
  now: number,
): TransmissionOutcome {
  if (outcome.kind === 'sent') return { state: { status: 'completed', at: now }, eventType: 'delivered', kind: 'sent', resultMessage: outcome.resultMessage };
  if (outcome.kind === 'failed') {
    return { state: { status: 'failed', at: now }, eventType: outcome.bounce === 'hard' ? 'bounced' : 'failed', kind: 'failed', resultMessage: outcome.resultMessage };
  }
  const decision = decideRetry(policy, { createdAt: transmission.createdAt, now, failedAttempts: transmission.attemptsBefore + 1 });
  if (decision.kind === 'retry') {
    return { state: { status: 'retry', nextAttemptAt: decision.nextAttemptAt }, eventType: 'retry', kind: 'deferred', resultMessage: outcome.resultMessage };
  }
  return { state: { status: 'failed', at: now }, eventType: 'failed', kind: 'failed', resultMessage: `${decision.reason}; last: ${outcome.resultMessage}` };
}

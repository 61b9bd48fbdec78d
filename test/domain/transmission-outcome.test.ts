// The pure mapping from one delivery attempt's outcome to its transmission's new state and event
// (src/domain/transmission-outcome.ts).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decideTransmissionOutcome } from '../../src/domain/transmission-outcome.ts';

const MIN = 60_000;
const policy = { delaysMs: [MIN, 5 * MIN], maxRetryAgeMs: 60 * MIN };
const T0 = 1_800_000_000_000;

describe('transmission outcome', () => {
  it('sent: completed, delivered', () => {
    assert.deepEqual(decideTransmissionOutcome(policy, { kind: 'sent', resultMessage: '250 ok', bounce: null }, { createdAt: T0, attemptsBefore: 0 }, T0 + 5), {
      state: { status: 'completed', at: T0 + 5 },
      eventType: 'delivered',
      kind: 'sent',
      resultMessage: '250 ok',
    });
  });

  it('failed: bounced on a hard bounce, failed otherwise', () => {
    const hard = decideTransmissionOutcome(policy, { kind: 'failed', resultMessage: '550 no such user', bounce: 'hard' }, { createdAt: T0, attemptsBefore: 0 }, T0);
    assert.deepEqual(hard.state, { status: 'failed', at: T0 });
    assert.equal(hard.eventType, 'bounced');
    const other = decideTransmissionOutcome(policy, { kind: 'failed', resultMessage: 'suppressed', bounce: null }, { createdAt: T0, attemptsBefore: 0 }, T0);
    assert.equal(other.eventType, 'failed');
    assert.equal(other.kind, 'failed');
  });

  it('deferred: a retry on the schedule while the policy allows, the last delay repeating', () => {
    const first = decideTransmissionOutcome(policy, { kind: 'deferred', resultMessage: '451 later', bounce: 'soft' }, { createdAt: T0, attemptsBefore: 0 }, T0);
    assert.deepEqual(first, { state: { status: 'retry', nextAttemptAt: T0 + MIN }, eventType: 'retry', kind: 'deferred', resultMessage: '451 later' });
    const third = decideTransmissionOutcome(policy, { kind: 'deferred', resultMessage: '451 later', bounce: null }, { createdAt: T0, attemptsBefore: 2 }, T0 + 10 * MIN);
    assert.deepEqual(third.state, { status: 'retry', nextAttemptAt: T0 + 15 * MIN });
    // Never scheduled past the deadline.
    const late = decideTransmissionOutcome(policy, { kind: 'deferred', resultMessage: '451 later', bounce: null }, { createdAt: T0, attemptsBefore: 5 }, T0 + 58 * MIN);
    assert.deepEqual(late.state, { status: 'retry', nextAttemptAt: T0 + 60 * MIN });
  });

  it('deferred past the policy: failed, with why and the last answer', () => {
    const gaveUp = decideTransmissionOutcome(policy, { kind: 'deferred', resultMessage: '451 later', bounce: null }, { createdAt: T0, attemptsBefore: 6 }, T0 + 60 * MIN);
    assert.deepEqual(gaveUp.state, { status: 'failed', at: T0 + 60 * MIN });
    assert.equal(gaveUp.eventType, 'failed');
    assert.equal(gaveUp.kind, 'failed');
    assert.match(gaveUp.resultMessage, /^gave up after 7 attempts over 1 h; last: 451 later$/);
  });
});

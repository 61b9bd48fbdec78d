// serve's children relay wake-ups to each other through the supervisor (cli/service.ts,
// coalesceWakes): the first of a quiet spell goes at the end of the turn, a burst goes as one
// sending per channel, and what comes within the interval after a sending goes together once it
// has passed; nothing is dropped. The relay itself, end to end, is in
// test/perf-shape/serve-supervisor.test.ts.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { coalesceWakes } from '../../src/cli/service.ts';
import type { WakeChannel } from '../../src/domain/wake-channels.ts';

function recorder() {
  const sent: Array<{ channel: WakeChannel; at: number }> = [];
  let waiters: Array<{ count: number; resolve: () => void }> = [];
  const send = (channel: WakeChannel) => {
    sent.push({ channel, at: performance.now() });
    waiters = waiters.filter((w) => (sent.length >= w.count ? (w.resolve(), false) : true));
  };
  /** Resolves once `count` sendings have been made (fails after 2 s). */
  const until = (count: number) =>
    new Promise<void>((resolve, reject) => {
      if (sent.length >= count) return resolve();
      waiters.push({ count, resolve });
      setTimeout(() => reject(new Error(`${sent.length} of ${count} wake-ups sent within 2 s`)), 2000).unref();
    });
  return { sent, send, until };
}

describe('coalesced wake-up relay', () => {
  it('sends the first wake-up at the end of the turn, and a burst once per channel', async () => {
    const r = recorder();
    const relay = coalesceWakes(r.send, 5);
    for (let i = 0; i < 100; i++) relay('transmissions');
    relay('events');
    assert.equal(r.sent.length, 0, 'nothing is sent within the turn');
    await r.until(2);
    assert.deepEqual(r.sent.map((s) => s.channel).sort(), ['events', 'transmissions']);
  });

  it('sends what comes within the interval after a sending once the interval has passed, losing none', async () => {
    const r = recorder();
    const relay = coalesceWakes(r.send, 20);
    relay('transmissions');
    await r.until(1);
    relay('transmissions');
    relay('events');
    relay('transmissions');
    await r.until(3);
    const [first, ...rest] = r.sent;
    assert.deepEqual(rest.map((s) => s.channel).sort(), ['events', 'transmissions']);
    // Held back to the interval (timers may fire a millisecond or two early), not sent at once.
    for (const later of rest) assert.ok(later.at - first.at >= 15, `sent ${(later.at - first.at).toFixed(1)} ms after the previous sending`);
  });
});

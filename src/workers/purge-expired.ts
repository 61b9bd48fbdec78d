// The retention purge as a background job of the worker role (docs/operations.md, "Retention"):
// a run shortly after start, then one every PURGE_INTERVAL_MS, under the sweep runner
// (workers/sweep-runner.ts). A run is operations/retention.ts's purgeExpired: small batches, each
// its own transaction, with pauses, so it never stalls ingest or delivery. Several worker
// processes may purge at once: each batch deletes what is still there, so they only share the work.
import { purgeExpired } from '../operations/retention.ts';
import type { Services } from '../services.ts';
import { SweepRunner } from './sweep-runner.ts';

/** The first run waits this long after start, so a starting process serves first. */
export const PURGE_FIRST_DELAY_MS = 60_000;
export const PURGE_INTERVAL_MS = 3_600_000;

/** Always created: with --retention-days 0 a project may still set its own retention. */
export function createPurgeJob(services: Services): SweepRunner {
  return new SweepRunner(services, {
    name: 'purge',
    firstDelayMs: PURGE_FIRST_DELAY_MS,
    everyMs: PURGE_INTERVAL_MS,
    async sweep(shouldStop) {
      const started = Date.now();
      const purged = await purgeExpired(services, { shouldStop });
      const total = Object.values(purged).reduce((a, b) => a + b, 0);
      if (total > 0) services.log.info({ event: 'purge', ...purged, duration_ms: Date.now() - started }, 'retention purge');
    },
  });
}

// The retention purge as a background job of the worker role (docs/operations.md, "Retention"):
// a run shortly after start, then one every PURGE_INTERVAL_MS. A run is operations/retention.ts's
// purgeExpired: small batches, each its own transaction, with pauses, so it never stalls ingest or
// delivery. Several worker processes may purge at once: each batch deletes what is still there, so
// they only share the work.
import type { BackgroundService } from '../background.ts';
import { purgeExpired } from '../operations/retention.ts';
import type { Services } from '../services.ts';

/** The first run waits this long after start, so a starting process serves first. */
export const PURGE_FIRST_DELAY_MS = 60_000;
export const PURGE_INTERVAL_MS = 3_600_000;

export class PurgeExpiredJob implements BackgroundService {
  readonly name = 'purge';
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private stopping = false;

  constructor(
    private readonly services: Services,
    private readonly options: { firstDelayMs?: number; intervalMs?: number } = {},
  ) {}

  async start(): Promise<void> {
    this.schedule(this.options.firstDelayMs ?? PURGE_FIRST_DELAY_MS);
  }

  private schedule(delayMs: number): void {
    if (this.stopping) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.runOnce().finally(() => this.schedule(this.options.intervalMs ?? PURGE_INTERVAL_MS));
    }, delayMs);
    this.timer.unref();
  }

  /** One purge run; a run already under way is joined, not doubled. */
  runOnce(): Promise<void> {
    this.running ??= (async () => {
      const started = Date.now();
      try {
        const purged = await purgeExpired(this.services, { shouldStop: () => this.stopping });
        const total = Object.values(purged).reduce((a, b) => a + b, 0);
        if (total > 0) this.services.log.info({ event: 'purge', ...purged, duration_ms: Date.now() - started }, 'retention purge');
      } catch (error) {
        this.services.log.warn({ err: error }, 'retention purge failed; it runs again at the next interval');
      } finally {
        this.running = null;
      }
    })();
    return this.running;
  }

  async stop(): Promise<void> {
    this.stopping = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.running;
  }
}

/** Always created: with --retention-days 0 a project may still set its own retention. */
export function createPurgeJob(services: Services): BackgroundService {
  return new PurgeExpiredJob(services);
}

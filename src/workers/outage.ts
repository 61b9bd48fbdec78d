// How a job lives through a database outage (docs/operations.md, "When the database is away"): a
// StoreUnavailableError pauses it, said once per outage in the log, with tries spaced out from
// OUTAGE_FIRST_RETRY_MS up to OUTAGE_MAX_RETRY_MS; the first success resumes it and says so. Any
// other error is not an outage and is the caller's to report.
import type { Logger } from 'pino';
import { isStoreUnavailable } from '../storage/store.ts';

export const OUTAGE_FIRST_RETRY_MS = 250;
export const OUTAGE_MAX_RETRY_MS = 5000;

export class OutageWatch {
  private since: number | null = null;
  private nextTryAt = 0;
  private tries = 0;

  constructor(
    private readonly log: Logger,
    private readonly job: string,
  ) {}

  /** True when `error` is an outage (the job pauses); logs its start once. */
  failed(error: unknown): boolean {
    if (!isStoreUnavailable(error)) return false;
    const now = Date.now();
    if (this.since === null) {
      this.since = now;
      this.tries = 0;
      this.log.warn({ job: this.job, cause: error.message }, 'database unavailable: job paused until it returns');
    }
    this.nextTryAt = now + this.retryInMs();
    this.tries++;
    return true;
  }

  /** A database call went through: ends the outage, if there was one. */
  succeeded(): void {
    if (this.since === null) return;
    this.log.info({ job: this.job, pausedMs: Date.now() - this.since }, 'database available again: job resumed');
    this.since = null;
    this.tries = 0;
    this.nextTryAt = 0;
  }

  get paused(): boolean {
    return this.since !== null;
  }

  /** Whether the job should hold off now (paused, and the next try is not due yet). */
  holdingOff(): boolean {
    return this.since !== null && Date.now() < this.nextTryAt;
  }

  /** How long until the next try. */
  retryInMs(): number {
    return Math.min(OUTAGE_MAX_RETRY_MS, OUTAGE_FIRST_RETRY_MS * 2 ** this.tries);
  }

  /** Waits until the next try is due (at most OUTAGE_MAX_RETRY_MS), or until `abort` says so. */
  async waitToRetry(abort: () => boolean): Promise<void> {
    const until = this.nextTryAt;
    while (!abort() && Date.now() < until) {
      await new Promise((resolve) => setTimeout(resolve, Math.min(100, until - Date.now())));
    }
  }
}

// The runner of background work done inside the database, batch after batch, with nothing held
// between batches (docs/decisions/0008-lease-runner.md): the events fan-out (events -> outbound
// requests) and the retention purge. Leased work (deliveries, outbound requests, mailbox
// sessions) runs under workers/lease-runner.ts instead.
//
//   run       one sweep at a time; a request during a run makes one more run after it
//   when      on the job's store.wake channel (if any), every `everyMs`, and first `firstDelayMs`
//             after start
//   outage    a lost database pauses the job (workers/outage.ts); the next tick tries again
//   stop      no new runs; the run under way is told to stop (shouldStop) and awaited
import type { BackgroundService, Services } from '../services.ts';
import type { WakeChannel } from '../storage/store.ts';
import { OutageWatch } from './outage.ts';

export interface SweepJob {
  readonly name: string;
  /** the store.wake channel that announces work, if any */
  readonly wakeOn?: WakeChannel;
  /** time between runs without a wake-up */
  readonly everyMs: number;
  /** the first run after start (default at once) */
  readonly firstDelayMs?: number;
  /** One run: batches until done or told to stop. */
  sweep(shouldStop: () => boolean): Promise<void>;
}

export class SweepRunner implements BackgroundService {
  readonly name: string;
  private readonly outage: OutageWatch;
  private running: Promise<void> | null = null;
  private again = false;
  private stopping = false;
  private timer: NodeJS.Timeout | null = null;
  private unlisten: (() => Promise<void>) | null = null;

  constructor(
    private readonly services: Services,
    private readonly job: SweepJob,
  ) {
    this.name = job.name;
    this.outage = new OutageWatch(services.log, job.name);
  }

  async start(): Promise<void> {
    if (this.job.wakeOn) this.unlisten = await this.services.store.onWake(this.job.wakeOn, () => void this.runNow());
    this.schedule(this.job.firstDelayMs ?? 0);
  }

  private schedule(delayMs: number): void {
    if (this.stopping) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.runNow().finally(() => this.schedule(this.job.everyMs));
    }, delayMs);
    this.timer.unref();
  }

  /** Runs the sweep now; joins a run under way (which then runs once more). */
  runNow(): Promise<void> {
    if (this.stopping) return this.running ?? Promise.resolve();
    if (this.running) {
      this.again = true;
      return this.running;
    }
    // While the database is away, tries are spaced out (workers/outage.ts); the timer brings the next.
    if (this.outage.holdingOff()) return Promise.resolve();
    const running = this.sweepUntilDone();
    this.running = running;
    // Cleared after the run (which may end without awaiting); a request in between runs again.
    void running.then(() => {
      if (this.running !== running) return;
      this.running = null;
      if (this.again && !this.stopping) void this.runNow();
    });
    return running;
  }

  private async sweepUntilDone(): Promise<void> {
    try {
      do {
        this.again = false;
        await this.job.sweep(() => this.stopping);
        this.outage.succeeded();
      } while (this.again && !this.stopping);
    } catch (error) {
      if (!this.outage.failed(error)) this.services.log.warn({ err: error, job: this.name }, 'background sweep failed; it runs again at the next interval');
    }
  }

  async stop(): Promise<void> {
    this.stopping = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.unlisten?.();
    await this.running;
  }
}

// The one runner of leased background work (docs/decisions/0008-lease-runner.md). A job says what
// a unit of its work is and how to claim, work, record, renew and give back units; the runner owns
// the rest, the same for deliveries, outbound requests and mailbox sessions:
//
//   claim     into the free slots, one statement for many units: once a quarter of the slots are
//             free (or none is busy), so a stream of completions costs one claim per batch
//   work      each unit outside any transaction (job.work), concurrently up to the slots
//   finish    outcomes wait up to finishBatchMs (or until finishBatchMax wait) and are written
//             together; where the job allows (claimWithFinishes), the claim that refills the freed
//             slots is made in the same turn, so where writes are group-committed (SQLite) the
//             finishes and the next claim share one commit; else it follows their commit.
//             A failed batch is written again one finish at a time, so one bad finish never takes
//             the others with it; while the database is away a finish waits for it (the work was
//             done: doing it again when the lease ends would repeat it)
//   renew     the leases of the units held, every lease / 3
//   fence     before an irreversible step (an SMTP transaction) a unit asks whether its claim still
//             holds (UnitContext.stillHeld): yes at once while the process's heartbeat is recent
//             and the unit's lease young; else one heartbeat and one renewal for every unit held
//             decide, so a process that stalled past them (presumed dead by a process on another
//             host, or past its leases) sends none of what was taken from it meanwhile
//   wake      on the job's store.wake channel (NOTIFY on PostgreSQL), and a poll for what comes due
//   outage    a lost database pauses claims, spaced out (workers/outage.ts), and resumes them;
//             a claim that failed may still have been written (its answer lost, not its
//             statement), so the next claim first gives back what the database says this process
//             holds and the runner does not (job.heldBy), due at once, not when the lease ends
//   stop      no new claims, and no new step: the fence answers no to a unit that has not begun
//             its send (UnitContext.stillHeld); the units at work get a bounded grace (and a stop
//             signal: a mailbox session ends on it); pending finishes are flushed; what is still
//             held, begun or not, is given back (due again at once), the log line naming it, and
//             the work still under way is cut (job.stopped) and not recorded
//
// Every unit may be worked twice (a lease can end under slow work, a process can die between the
// work and its finish): jobs make repeats harmless (fixed Message-IDs, event ids).
import { setMaxListeners } from 'node:events';
import type { Logger } from 'pino';
import type { BackgroundService, ProcessLiveness, Services } from '../services.ts';
import type { WakeChannel } from '../storage/store.ts';
import { isStoreUnavailable } from '../storage/store.ts';
import { OutageWatch } from './outage.ts';

/** What a job's work gets besides its unit. */
export interface UnitContext<Unit = unknown> {
  /**
   * aborted when the runner stops: long-running units (mailbox sessions) end on it. Shared by
   * every unit in its slots (one listener each is expected, not a leak): a unit that listens
   * removes its listener when it ends.
   */
  readonly signal: AbortSignal;
  /** the job's outage watch: work that reads the database may wait out an outage with it */
  readonly outage: OutageWatch;
  /**
   * The fence, right before an irreversible step: whether this process still holds the unit, false
   * when it was released meanwhile (this process presumed dead, its lease expired) and may be with
   * another process. Cheap while the process's heartbeat is recent and the lease young; otherwise
   * a heartbeat and a renewal (shared by every unit asking meanwhile). Always true for a job
   * without `confirm`. Throws when the database is away (nothing can be confirmed).
   */
  stillHeld(unit: Unit): Promise<boolean>;
}

/** A job: units of work claimed under a lease. Every function may assume the runner's sequencing. */
export interface LeaseJob<Unit, Finish> {
  readonly name: string;
  /** the store.wake channel that announces new work */
  readonly wakeOn: WakeChannel;
  /** units held at once */
  readonly slots: number;
  /** claim when this many slots are free (or none is busy); default a quarter of the slots */
  readonly claimThreshold?: number;
  /** largest claim in one statement (default 500) */
  readonly maxClaim?: number;
  /** the lease of a claimed unit; renewed every leaseMs / 3 while it is held */
  readonly leaseMs: number;
  /** how often to look for work coming due without a wake-up */
  readonly pollMs: number;
  /** how long stop() lets units at work finish before giving them back */
  readonly stopGraceMs: number;
  /** finishes wait at most this long to be written together ... */
  readonly finishBatchMs: number;
  /** ... or until this many wait */
  readonly finishBatchMax: number;
  /**
   * Claim for the freed slots in the same turn as the finishes are written, so that where writes
   * are group-committed (SQLite) one commit covers both. Only for a job whose claim does not
   * depend on those finishes (the dispatch job's finishes hold back a failing destination, which
   * its next claim must see): otherwise the next claim waits for the finishes to commit.
   */
  readonly claimWithFinishes?: boolean;

  /** Claims up to `limit` due units under `worker` (one write). */
  claim(worker: string, limit: number): Promise<Unit[]>;
  idOf(unit: Unit): number;
  /** The unit's work, outside any transaction; what to record. */
  work(unit: Unit, context: UnitContext<Unit>): Promise<Finish>;
  /** Writes finishes in one transaction; per finish, whether the lease still held. */
  finish(worker: string, finishes: Finish[]): Promise<boolean[]>;
  /** After a finish was written (or failed for good: `kept` false): metrics, logs, wake-ups. */
  finished?(unit: Unit, finish: Finish, kept: boolean): void;
  /** Extends the leases of the units held. */
  renew(worker: string, ids: number[]): Promise<unknown>;
  /**
   * Extends the leases of `ids` like renew, and answers those `worker` still holds. A job that has
   * it is renewed with it, and fenced (UnitContext.stillHeld).
   */
  confirm?(worker: string, ids: number[]): Promise<readonly number[]>;
  /** Gives back units still held at stop (due again at once). */
  release(worker: string, ids: number[]): Promise<unknown>;
  /**
   * The ids of the units the database says `worker` holds (one read). With it, the claim after a
   * failed one gives back those the runner does not hold: a claim whose answer was lost.
   */
  heldBy?(worker: string): Promise<number[]>;
  /** A wake-up came (before the runner claims). */
  woken?(): void;
  /** The runner stopped: close the job's resources. */
  stopped?(): void;
}

/** One claim of a unit, from the claim until its work and finish are done. */
interface Claim {
  /** when (services' clock) the claim or renewal that last extended its lease began */
  leaseFrom: number;
  /** ProcessLiveness.lives() when that claim or renewal began: a change since means: confirm first */
  life: number;
  /** found taken (released, claimed by another, or claimed again here): the fence says no */
  lost: boolean;
  /** not started because the runner is stopping (the fence said no): given back at stop, due at once */
  withheld?: true;
  /** given back by stop() while still at work: its outcome is not recorded (the next holder works it) */
  givenBack?: boolean;
  done: Promise<void>;
}

interface QueuedFinish<Finish> {
  finish: Finish;
  resolve: (kept: boolean) => void;
  reject: (error: unknown) => void;
}

const DEFAULT_MAX_CLAIM = 500;

export class LeaseRunner<Unit, Finish> implements BackgroundService {
  readonly name: string;
  private readonly log: Logger;
  private readonly outage: OutageWatch;
  /** every claimed unit until its finish is recorded (what stop() waits for), by claim */
  private readonly claims = new Map<Unit, Claim>();
  /**
   * The latest claim of each unit id held (what renew() extends). A unit released while this
   * process was presumed dead may be claimed here again while its earlier claim is still at work:
   * the earlier one is lost then.
   */
  private readonly held = new Map<number, Claim>();
  /** a heartbeat and renewal under way for the fence (one at a time, shared) */
  private confirming: Promise<void> | null = null;
  /** what every unit's work gets besides its unit (one object for all) */
  private readonly unitContext: UnitContext<Unit>;
  /**
   * Slots in use: claimed units still at work. A slot is freed when the work is done, before its
   * finish is written, so that the claim refilling it can share the finishes' commit.
   */
  private working = 0;
  private finishQueue: Array<QueuedFinish<Finish>> = [];
  /** finishes handed to the store and not committed yet: their units are still held */
  private writing = 0;
  private finishTimer: NodeJS.Timeout | null = null;
  private claiming: Promise<void> | null = null;
  /** a claim failed: it may have been written all the same (its answer lost in an outage) */
  private claimUnsure = false;
  /** the last claim was full, or a wake-up came since: there may be more due units */
  private moreDue = true;
  private wokeDuringClaim = false;
  private stopping = false;
  private readonly abort = new AbortController();
  private pollTimer: NodeJS.Timeout | null = null;
  private renewTimer: NodeJS.Timeout | null = null;
  private unlisten: (() => Promise<void>) | null = null;

  constructor(
    private readonly services: Services,
    private readonly job: LeaseJob<Unit, Finish>,
    /** the process's registry id (workers/process-registry.ts): every claim is locked_by it */
    readonly workerId: string,
    /** the process's standing in the registry; without it (tests) the fence only checks leases */
    private readonly liveness?: ProcessLiveness,
  ) {
    this.name = job.name;
    this.log = services.log;
    // One listener per unit in a slot (UnitContext.signal): as many as the job's slots, more than
    // Node's warning threshold of 10 for a busy job; the units remove theirs.
    setMaxListeners(0, this.abort.signal);
    this.outage = new OutageWatch(services.log, job.name);
    this.unitContext = { signal: this.abort.signal, outage: this.outage, stillHeld: (unit) => this.stillHeld(unit) };
  }

  async start(): Promise<void> {
    this.unlisten = await this.services.store.onWake(this.job.wakeOn, () => this.wake());
    this.pollTimer = setInterval(() => this.lookForWork(), Math.max(10, this.job.pollMs));
    this.pollTimer.unref();
    this.renewTimer = setInterval(
      () => void this.renewLeases().catch((error) => this.outage.failed(error) || this.log.error({ err: error, job: this.name }, 'renewing leases failed')),
      Math.max(1000, Math.floor(this.job.leaseMs / 3)),
    );
    this.renewTimer.unref();
    this.lookForWork();
  }

  /** A wake-up: new work is due (the job hears of it first). */
  wake(): void {
    if (this.stopping) return;
    this.job.woken?.();
    this.lookForWork();
  }

  /** Claims into the free slots now, without waiting for the work (tests). */
  async claimNow(): Promise<void> {
    while (this.claiming) await this.claiming;
    this.moreDue = true;
    await this.fill();
  }

  /** Work may be due (a wake-up, the poll): claim if slots are free. */
  private lookForWork(): void {
    if (this.stopping) return;
    this.moreDue = true;
    if (this.claiming) this.wokeDuringClaim = true;
    else void this.fill();
  }

  /** Units held now (claimed, finish not recorded yet). */
  heldIds(): number[] {
    return [...this.held.keys()];
  }

  /** Extends the lease of every unit held; resolves to how many were asked for. */
  async renewLeases(): Promise<number> {
    const ids = this.heldIds();
    if (ids.length === 0) return 0;
    if (!this.job.confirm) {
      await this.job.renew(this.workerId, ids);
      return ids.length;
    }
    const from = this.services.clock.now();
    const life = this.liveness?.lives() ?? 0;
    const still = new Set(await this.job.confirm(this.workerId, ids));
    for (const id of ids) {
      const claim = this.held.get(id);
      // A claim made since the renewal began is not what it found.
      if (!claim || claim.leaseFrom > from) continue;
      if (!still.has(id)) claim.lost = true;
      else {
        claim.leaseFrom = from;
        claim.life = life;
      }
    }
    return ids.length;
  }

  /** UnitContext.stillHeld. */
  private async stillHeld(unit: Unit): Promise<boolean> {
    const claim = this.claims.get(unit);
    // A stopping runner starts nothing: what has not begun its step is given back (stop), so a
    // deploy repeats nothing that was not already under way.
    if (this.stopping) {
      if (claim) claim.withheld = true;
      return false;
    }
    if (!this.job.confirm) return true;
    // Each round confirms every claim held, so one is normally enough; after three that found this
    // one held, only the heartbeat is slow to be recorded (a loaded database): it is held.
    for (let round = 0; claim && !claim.lost; round++) {
      // Half the lease and half the time to be presumed dead (ProcessLiveness.fresh) are left for
      // the step itself: what was confirmed cannot be taken before they run out.
      const young = this.services.clock.now() - claim.leaseFrom < this.job.leaseMs / 2;
      const standing = !this.liveness || (this.liveness.fresh() && this.liveness.lives() === claim.life);
      if ((young && standing) || round === 3) return true;
      await (this.confirming ??= this.confirmHeld().finally(() => (this.confirming = null)));
    }
    return false;
  }

  /**
   * The fence's slow path: a heartbeat first (from then on no process can presume this one dead
   * and release its claims, for a while), then a renewal of every unit held, which finds those
   * released or taken before it.
   */
  private async confirmHeld(): Promise<void> {
    const alive = await this.liveness?.confirm();
    if (alive === false) this.log.warn({ job: this.name, held: this.held.size }, 'this process was presumed dead: what it held was released; sending none of it');
    await this.renewLeases();
  }

  /**
   * Claims what is due now (up to the free slots), works it and waits until those units are
   * recorded; resolves to how many were claimed. Tests drive a job with this and a ManualClock.
   */
  async runOnce(): Promise<number> {
    while (this.claiming) await this.claiming;
    let claimed: Unit[] = [];
    this.claiming = (async () => {
      claimed = await this.claim(this.job.slots - this.busy());
    })();
    try {
      await this.claiming;
    } finally {
      this.claiming = null;
    }
    await Promise.all(claimed.map((unit) => this.launch(unit)));
    return claimed.length;
  }

  /** Until nothing is held (tests, drains). */
  async idle(): Promise<void> {
    while (this.claims.size > 0 || this.claiming) {
      await Promise.race([...[...this.claims.values()].map((c) => c.done), ...(this.claiming ? [this.claiming] : [])]);
    }
  }

  async stop(): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    if (this.pollTimer) clearInterval(this.pollTimer);
    if (this.renewTimer) clearInterval(this.renewTimer);
    await this.unlisten?.();
    await this.claiming;
    this.abort.abort();
    const all = Promise.allSettled([...this.claims.values()].map((c) => c.done));
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([all, new Promise((resolve) => (timer = setTimeout(resolve, this.job.stopGraceMs)))]);
    clearTimeout(timer);
    this.flushFinishes();
    if (this.held.size > 0) {
      // Give back what is still held so the next process need not wait for the leases. The units
      // still at work are cut short by the job's stopped() (the delivery closes its SMTP
      // connections); whatever their work ends in is not recorded, here or anywhere: the next
      // holder works them again, and this line is their record. Work cut off after its peer had
      // it all (a message whose final reply had not come) is repeated: the job makes repeats
      // harmless (fixed Message-IDs, event ids).
      const ids = this.heldIds();
      let atWork = 0;
      for (const claim of this.claims.values()) {
        claim.lost = true;
        claim.givenBack = true;
        atWork++;
      }
      this.log.warn({ job: this.name, held: ids.length, atWork, ids }, 'stopped with work in flight; releasing it (work cut off here is not recorded; it is done again by the next holder)');
      await this.job.release(this.workerId, ids).catch(() => {});
    }
    this.job.stopped?.();
  }

  /**
   * Claimed units at work plus finishes not yet committed: at most `slots` units held at once, so
   * at most `slots` can be worked twice after a crash (the bound docs/decisions/0008 states).
   */
  private busy(): number {
    return this.working + this.finishQueue.length + this.writing;
  }

  /**
   * Claims while slots are free and units are due. Outside a finish flush a claim waits for the
   * claim threshold (unless nothing is busy), so one statement feeds many units; in a flush any
   * free slot is refilled (`threshold` 1), as the claim then joins the finishes' commit.
   */
  private fill(threshold?: number, committingWith = 0): Promise<void> {
    if (this.claiming || this.stopping || this.outage.holdingOff()) return this.claiming ?? Promise.resolve();
    const claiming = this.claimWhileFree(threshold, committingWith);
    this.claiming = claiming;
    // Cleared after the loop (which may end without awaiting); a wake-up in between claims again.
    void claiming.then(() => {
      if (this.claiming !== claiming) return;
      this.claiming = null;
      const woken = this.wokeDuringClaim;
      this.wokeDuringClaim = false;
      if (woken && this.moreDue && !this.stopping) void this.fill();
    });
    return claiming;
  }

  /** @param committingWith finishes that commit together with this claim: their slots count as free */
  private async claimWhileFree(threshold: number | undefined, committingWith: number): Promise<void> {
    try {
      const slots = Math.max(1, this.job.slots);
      const minimum = threshold ?? this.job.claimThreshold ?? Math.max(1, Math.floor(slots / 4));
      while (!this.stopping && this.moreDue) {
        const busy = this.busy() - committingWith;
        committingWith = 0;
        const free = slots - busy;
        if (free <= 0 || (busy > 0 && free < minimum)) break;
        this.wokeDuringClaim = false;
        const limit = Math.min(free, this.job.maxClaim ?? DEFAULT_MAX_CLAIM);
        const claimed = await this.claim(limit);
        for (const unit of claimed) void this.launch(unit);
        if (claimed.length < limit && !this.wokeDuringClaim) this.moreDue = false;
      }
    } catch (error) {
      if (!this.outage.failed(error)) this.log.error({ err: error, job: this.name }, 'claiming failed');
    }
  }

  private async claim(limit: number): Promise<Unit[]> {
    if (limit <= 0 || this.stopping) return [];
    let claimed: Unit[];
    try {
      if (this.claimUnsure) await this.giveBackStrays();
      const from = this.services.clock.now();
      const life = this.liveness?.lives() ?? 0;
      claimed = await this.job.claim(this.workerId, limit);
      this.hold(claimed, from, life);
    } catch (error) {
      this.claimUnsure = true;
      throw error;
    }
    this.outage.succeeded();
    return claimed;
  }

  /**
   * After a failed claim: what the database says this process holds and the runner does not was
   * claimed by a statement whose answer never came. Given back, due at once (claims are serialised:
   * none is under way meanwhile).
   */
  private async giveBackStrays(): Promise<void> {
    if (this.job.heldBy) {
      const strays = (await this.job.heldBy(this.workerId)).filter((id) => !this.held.has(id));
      if (strays.length > 0) {
        await this.job.release(this.workerId, strays);
        this.log.warn({ job: this.name, ids: strays }, 'claimed by a statement whose answer was lost; given back');
      }
    }
    this.claimUnsure = false;
  }

  /** Holds what a claim took: its lease counts from `from`, its standing from `life`. */
  private hold(claimed: Unit[], from: number, life: number): void {
    for (const unit of claimed) {
      const claim: Claim = { leaseFrom: from, life, lost: false, done: Promise.resolve() };
      const id = this.job.idOf(unit);
      // Claimed again while an earlier claim of it is at work: that one was taken (released while
      // this process was presumed dead), whatever the database says of it now.
      const earlier = this.held.get(id);
      if (earlier) earlier.lost = true;
      this.held.set(id, claim);
      this.claims.set(unit, claim);
    }
  }

  private launch(unit: Unit): Promise<void> {
    const id = this.job.idOf(unit);
    const claim = this.claims.get(unit)!;
    this.working++;
    claim.done = this.workAndRecord(unit).finally(() => {
      this.claims.delete(unit);
      // A withheld unit stays held until stop() gives it back.
      if (this.held.get(id) === claim && !claim.withheld) this.held.delete(id);
      if (this.moreDue && !this.stopping) void this.fill();
    });
    return claim.done;
  }

  private async workAndRecord(unit: Unit): Promise<void> {
    let finish: Finish;
    try {
      finish = await this.job.work(unit, this.unitContext);
    } catch (error) {
      // A job's work handles what it expects; a throw is a defect. The lease still holds the
      // unit: it is worked again when the lease ends.
      this.log.error({ err: error, job: this.name, unit: this.job.idOf(unit) }, 'background work failed unexpectedly');
      return;
    } finally {
      this.working--;
    }
    if (this.claims.get(unit)?.withheld) {
      // Not started (stopping): no finish; stop() gives it back, due again at once.
      this.job.finished?.(unit, finish, false);
      return;
    }
    if (this.claims.get(unit)?.givenBack) {
      // stop() gave it back and said so: nothing to record (the next holder works it again).
      this.log.info({ job: this.name, unit: this.job.idOf(unit) }, 'work given back at stop ended; not recorded');
      this.job.finished?.(unit, finish, false);
      return;
    }
    if (this.claims.get(unit)?.lost) {
      // Known taken (the fence said so, or this process claimed the unit again since): no finish,
      // which could land on the unit's newer claim here, locked_by the same id.
      this.log.warn({ job: this.name, unit: this.job.idOf(unit) }, 'lease lost before the finish was recorded; the new holder owns the unit');
      this.job.finished?.(unit, finish, false);
      return;
    }
    let kept = false;
    try {
      for (;;) {
        try {
          kept = await this.finishSoon(finish);
          break;
        } catch (error) {
          if (this.stopping || !this.outage.failed(error)) throw error;
          await this.outage.waitToRetry(() => this.stopping);
        }
      }
    } catch (error) {
      // The lease still holds the unit; it is worked again when the lease ends. After stop() gave
      // it back (and the store may be closed) this is expected, not an error.
      if (this.stopping) this.log.debug({ err: error, job: this.name, unit: this.job.idOf(unit) }, 'finish not recorded: stopping');
      else this.log.error({ err: error, job: this.name, unit: this.job.idOf(unit) }, 'recording a finish failed');
      this.job.finished?.(unit, finish, false);
      return;
    }
    if (!kept) this.log.warn({ job: this.name, unit: this.job.idOf(unit) }, 'lease lost before the finish was recorded; the new holder owns the unit');
    this.job.finished?.(unit, finish, kept);
  }

  private finishSoon(finish: Finish): Promise<boolean> {
    return new Promise<boolean>((resolve, reject) => {
      this.finishQueue.push({ finish, resolve, reject });
      // Waiting finishes hold their slots: flush early once finishBatchMax wait (at most half the
      // slots), so a small job never idles on the timer.
      const limit = Math.max(1, Math.min(this.job.finishBatchMax, Math.floor(this.job.slots / 2)));
      if (this.finishQueue.length >= limit || this.stopping) this.flushFinishes();
      else this.finishTimer ??= setTimeout(() => this.flushFinishes(), this.job.finishBatchMs);
    });
  }

  private flushFinishes(): void {
    if (this.finishTimer) clearTimeout(this.finishTimer);
    this.finishTimer = null;
    const batch = this.finishQueue;
    this.finishQueue = [];
    // One transaction for the batch, on both databases: on SQLite one commit (one fsync) covers it;
    // on PostgreSQL a batch of delivery finishes is a fixed handful of statements whatever its
    // size, where one transaction per finish cost five round trips each (measured: the worker's and
    // the database's CPU per message halve, docs/decisions/0003-performance.md). A job whose next
    // claim must see its finishes claims after they commit (claimWithFinishes unset).
    if (batch.length === 0) return;
    this.writing += batch.length;
    void this.writeFinishes(batch);
    // Refill the slots these units freed in the same turn where the store commits the claim with
    // these finishes (SQLite's group commit: one fsync for both); elsewhere the claim follows
    // their commit (the units' completion calls fill()), so no more than `slots` are ever held.
    if (this.job.claimWithFinishes && this.services.store.commitsTurnsTogether && this.moreDue && !this.stopping) void this.fill(1, batch.length);
  }

  /** Writes a batch; its units stop counting as held (`writing`) before anyone hears the outcome. */
  private async writeFinishes(batch: Array<QueuedFinish<Finish>>): Promise<void> {
    let kept: boolean[];
    try {
      kept = await this.job.finish(
        this.workerId,
        batch.map((b) => b.finish),
      );
    } catch (error) {
      this.writing -= batch.length;
      if (batch.length === 1 || this.stopping || isStoreUnavailable(error)) {
        for (const b of batch) b.reject(error);
        return;
      }
      this.log.warn({ err: error, job: this.name, finishes: batch.length }, 'a batch of finishes failed; writing them one by one');
      await Promise.all(batch.map((b) => this.job.finish(this.workerId, [b.finish]).then(([one]) => b.resolve(one), b.reject)));
      return;
    }
    this.writing -= batch.length;
    batch.forEach((b, i) => b.resolve(kept[i]));
  }
}

// The store: the Kysely handle for reads, write() for transactions, and wake-ups for workers.
//
// write(fn) runs fn inside a transaction. Where the dialect asks for group commit (SQLite), the
// units that arrive within one event-loop turn share ONE transaction and ONE fsync: each unit runs
// inside its own SAVEPOINT, so a unit that throws is rolled back alone and rejects alone, and no
// unit's promise settles before the shared COMMIT is durable. This is what lets a durable
// send_message answer thousands of times a second on one SQLite file (bench/, docs/decisions/0003-performance.md).
import type { WakeChannel } from '../domain/wake-channels.ts';
import { sql, type Kysely, type Transaction } from 'kysely';
import { EventEmitter } from 'node:events';
import type { Logger } from 'pino';
import { StoreUnavailableError } from '../domain/errors.ts';
import { isPostgresUrl } from '../domain/database-url.ts';
import { WriteLockBusyError, type StoreDialect } from './dialect.ts';
import { withDeferredEvents, type UnitOutcome } from './events.ts';
import { migrateToLatest } from './migrate.ts';
import type { AcceptedTransmission, Database, MessageRow, Tx } from './schema.ts';
import { BUSY_TIMEOUT_MS, LOCKED, openSqlite, sqliteFileFrom } from './dialects/sqlite.ts';

export type { Tx } from './schema.ts';

export type { WakeChannel };

interface Unit {
  fn: (trx: Tx) => Promise<unknown>;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

/** Upper bound of units in one grouped transaction: keeps each commit short under heavy load. */
const MAX_GROUP = 1000;

export class Store {
  readonly db: Kysely<Database>;
  private readonly wakes = new EventEmitter();
  private pending: Unit[] = [];
  private flushing = false;
  /** Since when, and how many times, the group at the front of pending found the write lock held. */
  private lockedSince: number | null = null;
  private lockedTries = 0;
  private readonly inflight = new Set<Promise<unknown>>();
  private closed = false;
  private unwritable: StoreUnavailableError | null = null;
  private probing: Promise<void> | null = null;

  /**
   * The dialect stays inside storage/ (docs/decisions/0001-storage.md): code outside it asks the
   * store (kind, migrate, poolStats) and never reads a capability (test/architecture.test.ts).
   */
  constructor(readonly dialect: StoreDialect) {
    this.db = dialect.db;
    this.wakes.setMaxListeners(0);
  }

  /** Which database this is: for what only one of them can do (a SQLite file backup). */
  get kind(): StoreDialect['name'] {
    return this.dialect.name;
  }

  /**
   * Whether the writes issued in one event-loop turn commit together (SQLite's group commit): a
   * claim issued beside a batch of finishes then becomes visible in the same commit as they do.
   */
  get commitsTurnsTogether(): boolean {
    return this.dialect.groupCommit;
  }

  /** Applies pending migrations (storage/migrate.ts); returns the names applied. */
  migrate(): Promise<string[]> {
    return migrateToLatest(this.dialect);
  }

  /** The connection pool's counts, where the dialect has a pool that reports them. */
  poolStats(): { total: number; idle: number; waiting: number } | undefined {
    return this.dialect.poolStats?.();
  }

  write<T>(fn: (trx: Tx) => Promise<T>): Promise<T> {
    if (this.closed) return Promise.reject(new Error('store is closed'));
    if (!this.dialect.groupCommit) {
      // The unit's events are inserted together when fn returns, before the COMMIT (events.ts);
      // once it has committed, the fan-out is woken if one of them waits for it.
      return this.watch(this.track(
        this.db.transaction().execute((trx) => withDeferredEvents(trx, fn)).then((outcome) => this.settleUnit(outcome)),
      ));
    }
    return this.watch(this.joinGroup(fn));
  }

  /**
   * Whether acceptMessage writes a message and its transmissions in one statement or thread of
   * the dialect's own (dialect.ts insertMessageWithTransmissions) rather than as a unit of write().
   */
  get acceptsApart(): boolean {
    return this.dialect.insertMessageWithTransmissions !== undefined;
  }

  /**
   * Writes an accepted message and its transmissions by the dialect's own path (acceptsApart);
   * the message's id, or null when its (project_id, uid) is taken. A write like any other for the
   * metrics (observability/metrics.ts) and for writeFailure.
   */
  acceptMessage(message: MessageRow, transmissions: readonly AcceptedTransmission[]): Promise<number | null> {
    const insert = this.dialect.insertMessageWithTransmissions;
    if (!insert) return Promise.reject(new Error('this database accepts messages by write()'));
    if (this.closed) return Promise.reject(new Error('store is closed'));
    return this.watch(insert(message, transmissions));
  }

  /**
   * The cause of the last write that failed because the database cannot write now (a full disk,
   * the write lock held past its wait, a server away or read-only), until a write succeeds; null
   * when the last one succeeded. A database that answers reads and cannot write is not ready
   * (observability/readiness.ts), so /readyz and posthorn_database_up ask this as well as a ping.
   */
  get writeFailure(): StoreUnavailableError | null {
    return this.unwritable;
  }

  /**
   * After a write failed as unavailable, tries one small write (one at a time, however many ask)
   * so that a process nobody writes through (a load balancer drained it) finds out that the
   * database can write again; the failure that remains, or null.
   */
  async checkWritable(): Promise<StoreUnavailableError | null> {
    if (this.unwritable === null || this.closed) return this.unwritable;
    this.probing ??= this.write((trx) => sql`update posthorn_migrations set name = name where name = (select max(name) from posthorn_migrations)`.execute(trx))
      .then(() => {}, () => {})
      .finally(() => {
        this.probing = null;
      });
    await this.probing;
    return this.unwritable;
  }

  /** Records whether a write went through or failed as unavailable (writeFailure). */
  private watch<T>(unit: Promise<T>): Promise<T> {
    unit.then(
      () => {
        this.unwritable = null;
      },
      (error: unknown) => {
        if (error instanceof StoreUnavailableError) this.unwritable = error;
      },
    );
    return unit;
  }

  /**
   * A write unit of exactly ONE statement that records no event (a claim: `UPDATE ... RETURNING`).
   * Where each unit is its own transaction (PostgreSQL) the statement runs alone, atomic without
   * BEGIN and COMMIT (one round trip instead of three); where a turn's units share a commit
   * (SQLite) it joins the turn's group like any write.
   */
  writeStatement<T>(fn: (db: Tx) => Promise<T>): Promise<T> {
    if (this.closed) return Promise.reject(new Error('store is closed'));
    return this.watch(this.dialect.groupCommit ? this.joinGroup(fn) : this.track(fn(this.db)));
  }

  /** Tracked so close() waits for it: ending the pool under a waiting transaction strands it. */
  private track<T>(unit: Promise<T>): Promise<T> {
    this.inflight.add(unit);
    const forget = () => this.inflight.delete(unit);
    unit.then(forget, forget);
    return unit;
  }

  private joinGroup<T>(fn: (trx: Tx) => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.pending.push({ fn, resolve: resolve as (v: unknown) => void, reject });
      if (this.pending.length === 1 && !this.flushing) setImmediate(() => void this.flush());
    });
  }

  private async flush(): Promise<void> {
    if (this.flushing || this.pending.length === 0) return;
    this.flushing = true;
    const group = this.pending.splice(0, MAX_GROUP);
    const settled: Array<() => void> = [];
    let committed = false;
    let locked = false;
    try {
      await this.db.transaction().execute(async (trx) => {
        for (const unit of group) {
          await sql`SAVEPOINT unit`.execute(trx);
          try {
            // As in write(): the unit's events in one INSERT when it returns (a batch of delivery
            // finishes records one per message).
            const outcome = await withDeferredEvents(trx, unit.fn);
            await sql`RELEASE SAVEPOINT unit`.execute(trx);
            settled.push(() => unit.resolve(this.settleUnit(outcome)));
          } catch (error) {
            // The database is away or the disk is full: the transaction itself may be gone (SQLite
            // rolls it back on SQLITE_FULL), so the whole group fails with the cause.
            if (error instanceof StoreUnavailableError) throw error;
            await sql`ROLLBACK TO SAVEPOINT unit`.execute(trx);
            await sql`RELEASE SAVEPOINT unit`.execute(trx);
            settled.push(() => unit.reject(error));
          }
        }
      });
      committed = true;
    } catch (error) {
      if (error instanceof WriteLockBusyError && this.waitForWriteLock()) {
        // Nothing ran: the group goes back to the front, and grows with what arrives meanwhile.
        locked = true;
        this.pending = group.concat(this.pending);
      } else {
        const cause = error instanceof WriteLockBusyError ? new StoreUnavailableError(error.message, { cause: error, reason: LOCKED }) : error;
        for (const unit of group) unit.reject(cause);
      }
    } finally {
      this.flushing = false;
      if (locked) {
        // Another connection (serve's other process) holds the write lock for the length of its
        // transaction, well under a millisecond as a rule: one more try at the next turn, then one
        // per millisecond. SQLite's own busy handler would sleep 1, 2, 5, 10... ms with the whole
        // event loop stopped (docs/decisions/0003-performance.md, "Two writers on one file").
        if (this.lockedTries === 1) setImmediate(() => void this.flush());
        else setTimeout(() => void this.flush(), 1);
      } else if (this.pending.length > 0) setImmediate(() => void this.flush());
    }
    if (locked) return;
    this.lockedSince = null;
    this.lockedTries = 0;
    if (!committed) return;
    // Nobody is answered before the group is on disk. Where the dialect syncs off the event loop,
    // the next group's transaction runs while this fsync is in flight (docs/decisions/0003).
    if (this.dialect.syncCommitted) {
      const synced = this.dialect.syncCommitted();
      this.inflight.add(synced);
      try {
        await synced;
      } catch (error) {
        for (const unit of group) unit.reject(error);
        return;
      } finally {
        this.inflight.delete(synced);
      }
    }
    for (const settle of settled) settle();
  }

  /**
   * Whether a group that found the write lock held should wait for it: yes until it has waited as
   * long as SQLite's busy handler would have (BUSY_TIMEOUT_MS); then it fails as unavailable.
   */
  private waitForWriteLock(): boolean {
    const now = performance.now();
    this.lockedSince ??= now;
    this.lockedTries++;
    return now - this.lockedSince < BUSY_TIMEOUT_MS;
  }

  /**
   * A committed unit's value; an event it recorded that waits for the webhook fan-out wakes it
   * (events.ts): the writers of events need not, and a unit whose events nobody can hear (no
   * endpoint) wakes no one.
   */
  private settleUnit<T>(outcome: UnitOutcome<T>): T {
    if (outcome.eventsWaiting) this.wake('events');
    return outcome.value;
  }

  /** Tells workers (in this process, and in others where the dialect can) that work is due. */
  wake(channel: WakeChannel): void {
    this.wakes.emit(channel);
    this.dialect.notify?.(`posthorn_${channel}`).catch(() => {});
  }

  /** Subscribes to wake-ups; returns the unsubscribe function. */
  async onWake(channel: WakeChannel, listener: () => void): Promise<() => Promise<void>> {
    this.wakes.on(channel, listener);
    const unlisten = this.dialect.listen ? await this.dialect.listen(`posthorn_${channel}`, listener) : null;
    return async () => {
      this.wakes.off(channel, listener);
      await unlisten?.();
    };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    while (this.flushing || this.pending.length > 0) {
      if (!this.flushing) await this.flush();
      else await new Promise((r) => setImmediate(r));
      // A group waiting for the write lock is tried again by its own timer, not in a tight loop.
      if (this.lockedSince !== null) await new Promise((r) => setTimeout(r, 1));
    }
    await Promise.allSettled([...this.inflight]);
    await this.dialect.close();
  }
}

export type TxOrDb = Tx | Transaction<Database>;

/** Whether an error means the database is away or full (a 503, a pause), not a defect. */
export function isStoreUnavailable(error: unknown): error is StoreUnavailableError {
  return error instanceof StoreUnavailableError;
}

export { StoreUnavailableError };

/**
 * Opens the database named by the configuration: PostgreSQL for postgres:// URLs, else the SQLite
 * file of the URL or of the data directory. `acceptanceThread`:
 * on a SQLite file, accepted messages are written by a thread of their own
 * (dialects/sqlite-acceptance.ts); for a process that accepts and does not deliver (`--role api`),
 * where the store's own connection mostly reads. A process that also delivers writes on its own
 * connection all the time, and a second connection in it cost more than it saved: each one's
 * commits empty the other's page cache, and they hand the write lock back and forth
 * (docs/decisions/0003-performance.md, "The acceptance thread").
 */
export async function openStore(opts: { databaseUrl: string | null; data: string; dbPoolSize?: number; dbTimeoutMs?: number; log?: Logger; acceptanceThread?: boolean }): Promise<Store> {
  const url = opts.databaseUrl;
  if (url !== null && isPostgresUrl(url)) {
    const { openPostgres } = await import('./dialects/postgres.ts');
    return new Store(await openPostgres(url, { poolSize: opts.dbPoolSize ?? 10, timeoutMs: opts.dbTimeoutMs, log: opts.log }));
  }
  return new Store(openSqlite(sqliteFileFrom(url, opts.data), { acceptanceThread: opts.acceptanceThread ?? false }));
}

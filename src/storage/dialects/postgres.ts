// PostgreSQL through node-postgres: a connection pool per process, one transaction per write on
// its own pooled connection (PostgreSQL groups the fsyncs of concurrent commits itself, so the
// store's group commit is off), claims with FOR UPDATE SKIP LOCKED, and cross-process wake-ups
// with LISTEN/NOTIFY on one dedicated connection that reconnects by itself.
//
// Invariants:
// - int8 (bigint: ids, every *_at column, count(*)) and numeric come back as JS numbers, as they do
//   on SQLite. The parsers are given to this pool only (`types`), never installed globally, so
//   other pg users in the same process are unaffected. A value past 2^53 would lose precision:
//   that is refused loudly rather than rounded (epoch ms and ids stay far below it).
// - No idle-connection error may crash the process: the pool's 'error' event is handled (pg drops
//   the broken client and opens a new one on the next checkout).
// - Losing the LISTEN connection loses no work: notifications are only a hint that shortens the
//   poll. After a reconnect every listener is called once, because a notification may have been
//   sent while nobody was listening.
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import type { Logger } from 'pino';
import { StoreUnavailableError } from '../../domain/errors.ts';
import { serverStatementName, type StoreDialect } from '../dialect.ts';
import { AcceptanceGroups } from './postgres-acceptance.ts';
import type { Database } from '../schema.ts';

const INT8_OID = 20;
const NUMERIC_OID = 1700;

export interface PostgresOptions {
  /** connections in this process's pool (config.dbPoolSize) */
  poolSize: number;
  log?: Logger;
  /**
   * How long a statement waits for a pooled connection (a new one included: its TCP connect and
   * start-up), and then for the server's answer, before it fails as unavailable (config.dbTimeoutMs,
   * default 5 s). A server that is frozen or cut off by the network refuses nothing: without this
   * bound a request would wait as long as the freeze (docs/operations.md, "When the database is away").
   */
  timeoutMs?: number;
  /** first and largest delay between LISTEN reconnect attempts */
  reconnectMinMs?: number;
  reconnectMaxMs?: number;
}

function parseSafeInteger(text: string): number {
  const value = Number(text);
  if (!Number.isSafeInteger(value)) throw new RangeError(`bigint value ${text} does not fit a JS number`);
  return value;
}

/** Type parsers of this pool only: int8 and numeric as numbers, everything else as pg parses it. */
const typeParsers: pg.CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') => {
    if (format !== 'binary') {
      if (oid === INT8_OID) return parseSafeInteger;
      if (oid === NUMERIC_OID) return (text: string) => Number(text);
    }
    return pg.types.getTypeParser(oid, format as 'text');
  }) as pg.CustomTypesConfig['getTypeParser'],
};

export async function openPostgres(url: string, opts: PostgresOptions): Promise<StoreDialect> {
  const log = opts.log;
  const timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const connection = {
    connectionString: url,
    types: typeParsers,
    application_name: 'posthorn',
    // TCP keepalive: a connection to a server that vanished (a partition, a host that froze) is
    // found dead by the kernel even while it is idle in the pool or LISTENing.
    keepAlive: true,
    keepAliveInitialDelayMillis: KEEPALIVE_IDLE_MS,
    connectionTimeoutMillis: timeoutMs,
  };
  const pool = new pg.Pool({
    ...connection,
    max: Math.max(1, opts.poolSize),
    // The wait for a pooled connection, or for a new one to connect and start up.
    connectionTimeoutMillis: timeoutMs,

    // A write unit only does database work, so a transaction idle for a minute is a stuck process:
    // the server ends it and releases its row locks rather than blocking every other process.
    idle_in_transaction_session_timeout: 60_000,
    // The server gives up on a statement soon after this process has (its answer is waited for
    // timeoutMs): a statement nobody waits for any more (blocked on a lock, on a server that was
    // frozen) is cancelled there instead of running, and committing, later. Without it, a claim
    // whose answer was lost could take rows after the next claim looked for strays, and they would
    // wait for their lease (docs/operations.md, "When the database is away"). The margin keeps this
    // process's own timeout first, so what it reports is the timeout, not the cancellation.
    statement_timeout: timeoutMs + SERVER_TIMEOUT_MARGIN_MS,
  });
  pool.on('error', (error) => log?.warn({ err: describeError(error) }, 'idle PostgreSQL connection failed; it is replaced on next use'));
  // A connection that breaks while checked out (between two statements of a transaction: a server
  // shutdown sends 57P01 then closes) emits 'error' with nobody listening, which would end the
  // process. The statement in progress, or the next one, fails with the cause instead, and the
  // pool drops the broken client when it is released.
  pool.on('connect', (client) => {
    client.on('error', (error) => log?.debug({ err: describeError(error) }, 'PostgreSQL connection failed while in use'));
  });
  // Fail at start, with the server's own message, rather than on the first request.
  let collation: { name: string; linguistic: boolean } | undefined;
  try {
    const client = await pool.connect();
    try {
      // Asked by behaviour, so ICU collations count too: by code point 'B' (0x42) sorts before 'a'.
      const { rows } = await client.query<{ name: string; linguistic: boolean }>(
        `select datcollate as name, ('a' < 'B') as linguistic from pg_database where datname = current_database()`,
      );
      collation = rows[0];
    } finally {
      client.release();
    }
  } catch (error) {
    await pool.end().catch(() => {});
    throw new Error(`cannot connect to PostgreSQL: ${describeError(error).message}`);
  }
  // SQLite orders text by bytes (code points); so does PostgreSQL under the C collation. Under a
  // linguistic one (en_US.UTF-8, ...) listings ordered by text (template slugs, addresses) come
  // out in another order than on SQLite. Not fatal: said once, at start.
  if (collation?.linguistic) {
    log?.warn({ collation: collation.name }, 'database collation is not C: text is ordered differently than on SQLite; create the database with --locale=C (docs/operations.md)');
  }
  // The wait for each statement's answer (pg's client-side timer, per statement): past it the
  // statement fails as `database unreachable (timeout)`, and its connection is closed, not reused
  // (guardPool). Migrations are not bounded: one may rewrite a large table.
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool: guardPool(pool, timeoutMs) }) });
  const migrationDb = new Kysely<Database>({ dialect: new PostgresDialect({ pool: guardPool(pool, null) }) });
  const listener = new NotificationListener(() => new pg.Client(connection), {
    log,
    reconnectMinMs: opts.reconnectMinMs ?? 100,
    reconnectMaxMs: opts.reconnectMaxMs ?? 10_000,
  });

  const notifier = new CoalescingNotifier((channel) => pool.query({ text: 'select pg_notify($1, $2)', values: [channel, ''], query_timeout: timeoutMs } as pg.QueryConfig).then(() => {}));

  // An acceptance is one statement that commits on its own.
  const acceptance = new AcceptanceGroups(pool, timeoutMs, (error) => postgresUnavailable(error, true) ?? error, (error) => postgresUnavailable(error) !== null);
  return {
    name: 'postgres',
    db,
    migrationDb,
    groupCommit: false,
    poolStats: () => ({ total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount }),
    insertMessageWithTransmissions: (message, transmissions) => acceptance.accept(message, transmissions),
    bigintType: 'bigint',
    textType: 'text',
    addIdColumn: (table) => table.addColumn('id', 'bigint', (c) => c.primaryKey().generatedByDefaultAsIdentity()),
    notify: (channel) => notifier.notify(channel),
    listen: (channel, onNotify) => listener.listen(channel, onNotify),
    async close() {
      await listener.close();
      await db.destroy();
      // Kysely ends the pool only through a handle that has been used: a process that stops before
      // its first statement (a port in use at start) has used the migrations' handle alone, and an
      // idle connection left open would keep it alive for the pool's idle timeout.
      if (!pool.ending) await pool.end();
    },
  };
}

/**
 * At most one NOTIFY in flight per channel, plus one queued behind it: a burst of wake-ups (one per
 * accepted message under load) costs two round trips, not one per message, and the last wake-up of
 * a burst is still followed by a NOTIFY sent after it, so no listener misses work committed before.
 */
export class CoalescingNotifier {
  private readonly state = new Map<string, { again: boolean; done: Promise<void> }>();

  constructor(private readonly send: (channel: string) => Promise<void>) {}

  notify(channel: string): Promise<void> {
    const current = this.state.get(channel);
    if (current) {
      current.again = true;
      return current.done;
    }
    const entry = { again: false, done: Promise.resolve() };
    entry.done = (async () => {
      try {
        do {
          entry.again = false;
          await this.send(channel);
        } while (entry.again);
      } finally {
        this.state.delete(channel);
      }
    })();
    this.state.set(channel, entry);
    return entry.done;
  }
}

/**
 * The pool as Kysely sees it, with every failure of a lost or refused connection turned into a
 * StoreUnavailableError naming its cause (docs/operations.md, "When the database is away"). Other
 * errors (constraint violations, ...) pass unchanged.
 */
function guardPool(pool: pg.Pool, timeoutMs: number | null): { connect(): Promise<pg.PoolClient>; end(): Promise<void> } {
  const translate = (error: unknown): never => {
    throw postgresUnavailable(error) ?? error;
  };
  return {
    async connect() {
      const pooled = await pool.connect().catch(translate);
      // The migrations' handle is not bounded here, so not on the server either (for as long as
      // it holds the connection).
      const client = timeoutMs === null ? await unboundedOnServer(pooled).catch(translate) : pooled;
      // A statement that got no answer in time leaves its connection in an unknown state (the
      // answer may still come, to the next statement): the rest of its transaction fails at once
      // (its ROLLBACK included, which would wait as long again), and it is closed on release.
      let lost: StoreUnavailableError | null = null;
      // Between BEGIN and its end a statement commits nothing on its own; outside, a write does.
      let inTransaction = false;
      return new Proxy(client, {
        get(target, key, receiver) {
          if (key === 'release') return (error?: Error | boolean) => target.release(error ?? lost ?? undefined);
          if (key !== 'query') return Reflect.get(target, key, receiver);
          return (...args: unknown[]) => {
            if (lost) return Promise.reject(lost);
            const text = typeof args[0] === 'string' ? args[0] : '';
            const commits = COMMIT_TEXT.test(text) || (!inTransaction && WRITE_TEXT.test(text));
            if (BEGIN_TEXT.test(text)) inTransaction = true;
            else if (COMMIT_TEXT.test(text) || ROLLBACK_TEXT.test(text)) inTransaction = false;
            // A hot statement of fixed text (dialect.ts preparedOnServer) runs as a named one: parsed
            // and planned once per connection.
            if (typeof args[0] === 'string') {
              const name = serverStatementName(args[0]);
              args = [{ ...(name !== undefined ? { name } : {}), text: args[0], values: args[1], ...(timeoutMs !== null ? { query_timeout: timeoutMs } : {}) }];
            }
            const result = (target.query as (...a: unknown[]) => unknown)(...args);
            if (!(result instanceof Promise)) return result;
            return result.catch((error: unknown) => {
              const unavailable = postgresUnavailable(error, commits);
              if (unavailable?.reason === TIMED_OUT) {
                lost = unavailable;
                (target as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy();
              }
              throw unavailable ?? error;
            });
          };
        },
      });
    },
    // Both handles (bounded and the migrations') share the pool: ended once.
    end: async () => {
      if (!pool.ending) await pool.end();
    },
  };
}

/**
 * A pooled connection without the server's statement bound until it is released (migrations: one
 * may rewrite a large table); released, it has the pool's bound again.
 */
async function unboundedOnServer(client: pg.PoolClient): Promise<pg.PoolClient> {
  try {
    await client.query('SET statement_timeout = 0');
  } catch (error) {
    client.release(true);
    throw error;
  }
  const release = client.release.bind(client);
  client.release = (error?: Error | boolean) => {
    if (error) return release(error);
    client.query('RESET statement_timeout').then(
      () => release(),
      (failed: Error) => release(failed),
    );
  };
  return client;
}

/**
 * SQLSTATEs that mean the server cannot serve writes now, whatever the statement (docs/reliability.md,
 * "What PostgreSQL errors count as unavailable"): the connection ends (57P01 admin shutdown, 57P02
 * crash shutdown, 57P05 idle-session timeout, class 08) or is refused (57P03 starting up or in
 * recovery, 53300 too many connections), each named `database unreachable`; the server is read-only
 * (25006: a standby, a demoted primary after a failover, or default_transaction_read_only set by the
 * operator; Posthorn never opens a read-only transaction itself); its disk is full (53100) or
 * failing (58030 io_error, named as SQLite's SQLITE_IOERR is: the server's storage, not the
 * statement). Not here, because one statement can cause them and a pause would hide it: 53200 out of memory (one
 * query's allocation), 53000/53400 (too many locks or files of one transaction), 55000 (a
 * prerequisite state; writes during recovery fail with 25006), 57014 (a statement cancelled or
 * timed out), 25P03 (a transaction left idle: a stuck process), 57P04 (the database was dropped:
 * gone, not away).
 */
const UNAVAILABLE_STATES = new Map<string, string>([
  ['57P01', 'database unreachable'],
  ['57P02', 'database unreachable'],
  ['57P03', 'database unreachable'],
  ['57P05', 'database unreachable'],
  ['53300', 'database unreachable'],
  ['25006', 'database read-only'],
  ['53100', 'database disk full'],
  ['58030', 'database I/O error'],
]);
/** Connection errors of the operating system, by what a client is told of them (no address). */
const UNAVAILABLE_ERRNOS = new Map([
  ['ECONNREFUSED', 'connection refused'],
  ['ECONNRESET', 'connection reset'],
  ['EPIPE', 'connection lost'],
  ['ENOTCONN', 'connection lost'],
  ['ETIMEDOUT', 'timeout'],
  ['EHOSTUNREACH', 'no route to the server'],
  ['ENETUNREACH', 'no route to the server'],
]);
/** pg's own messages of a connection that timed out (connecting, waiting for the pool, a statement's answer). */
const TIMEOUT_TEXT = /connection timeout|timeout exceeded when trying to connect|Query read timeout/i;
const UNAVAILABLE_TEXT = /Connection terminated|not queryable|Client was closed|Connection ended/i;
/** Failures of a statement that reached the server, whose answer was lost: it may have run. */
const ANSWER_LOST_TEXT = /Query read timeout|Connection terminated unexpectedly/i;
const ANSWER_LOST_ERRNOS = new Set(['ECONNRESET', 'EPIPE', 'ETIMEDOUT']);
/** Statement texts that open or end a transaction, or write (guardPool's guess at what a lost answer may have written). */
const BEGIN_TEXT = /^\s*(begin|start\s+transaction)\b/i;
const COMMIT_TEXT = /^\s*(commit|end)\b/i;
const ROLLBACK_TEXT = /^\s*rollback\b/i;
const WRITE_TEXT = /\b(insert|update|delete)\b/i;
/** The reason of a statement or connection that got no answer within the bound (PostgresOptions.timeoutMs). */
const TIMED_OUT = 'database unreachable (timeout)';
/** The default of PostgresOptions.timeoutMs (config.dbTimeoutMs). */
const DEFAULT_TIMEOUT_MS = 5000;
/** How much longer than this process the server waits for a statement (the pool's statement_timeout). */
const SERVER_TIMEOUT_MARGIN_MS = 100;
/** Idle time before the kernel's first keepalive probe on a connection. */
const KEEPALIVE_IDLE_MS = 10_000;

/**
 * The StoreUnavailableError for a lost, refused or timed-out connection, or a server that cannot
 * write now (read-only, disk full), naming the cause; null for any other error. Its message (for
 * the log) is the driver's; its reason (for clients) the kind and the SQLSTATE or errno, never
 * the server's address.
 */
export function postgresUnavailable(error: unknown, commits = false): StoreUnavailableError | null {
  if (error instanceof StoreUnavailableError) return error;
  if (!(error instanceof Error)) return null;
  const code = String((error as { code?: unknown }).code ?? '');
  let reason: string | null = null;
  const state = UNAVAILABLE_STATES.get(code);
  if (state !== undefined) reason = `${state} (${code})`;
  else if (code.startsWith('08')) reason = `database unreachable (${code})`;
  else if (UNAVAILABLE_ERRNOS.has(code)) reason = `database unreachable (${UNAVAILABLE_ERRNOS.get(code)})`;
  else if (TIMEOUT_TEXT.test(error.message)) reason = TIMED_OUT;
  else if (UNAVAILABLE_TEXT.test(error.message)) reason = 'database unreachable (connection lost)';
  if (reason === null) return null;
  const what = reason.slice(0, reason.indexOf(' ('));
  // Not when connecting (the errno's syscall): no statement was sent yet.
  const connecting = (error as { syscall?: unknown }).syscall === 'connect';
  const mayHaveWritten = commits && !connecting && (ANSWER_LOST_TEXT.test(error.message) || ANSWER_LOST_ERRNOS.has(code));
  return new StoreUnavailableError(`${what}: ${code && !error.message.includes(code) ? `${code} ` : ''}${error.message}`, { cause: error, reason, mayHaveWritten });
}

/** An error as a log field: message and code, never the connection string. */
function describeError(error: unknown): { message: string; code?: string } {
  if (error instanceof Error) return { message: error.message, code: (error as { code?: string }).code };
  return { message: String(error) };
}

interface ListenerOptions {
  log?: Logger;
  reconnectMinMs: number;
  reconnectMaxMs: number;
}

/**
 * One dedicated connection that LISTENs on every channel someone subscribed to. It connects on
 * the first listen(); if the connection drops it reconnects with exponential backoff, LISTENs
 * again and wakes every listener once.
 */
export class NotificationListener {
  private readonly handlers = new Map<string, Set<() => void>>();
  private client: pg.Client | null = null;
  private connecting: Promise<void> | null = null;
  private retryTimer: NodeJS.Timeout | null = null;
  private failures = 0;
  private closed = false;
  /** the connection was lost since the last successful one: wake everyone when it is back */
  private dropped = false;
  /** reconnects completed after a drop; for tests and logs */
  reconnects = 0;

  constructor(
    private readonly createClient: () => pg.Client,
    private readonly opts: ListenerOptions,
  ) {}

  async listen(channel: string, onNotify: () => void): Promise<() => Promise<void>> {
    if (this.closed) throw new Error('listener is closed');
    let set = this.handlers.get(channel);
    const isNew = !set;
    if (!set) this.handlers.set(channel, (set = new Set()));
    set.add(onNotify);
    if (this.client === null) {
      // A failed first connection is retried in the background: until it succeeds the workers
      // still poll, so a subscriber is never refused.
      await this.connect().catch((error) => {
        this.opts.log?.warn({ err: describeError(error) }, 'PostgreSQL LISTEN connection failed; retrying');
        this.dropped = true; // wake everyone once it succeeds: work may have come meanwhile
        this.scheduleReconnect();
      });
    } else if (isNew) {
      // If the connection dies under this LISTEN, its 'error' or 'end' brings the reconnect, which
      // LISTENs on every channel, this one included.
      await this.client.query(`LISTEN ${quoteIdent(channel)}`).catch((error) => {
        this.opts.log?.warn({ err: describeError(error), channel }, 'LISTEN failed; it is repeated on reconnect');
      });
    }
    return async () => {
      const handlers = this.handlers.get(channel);
      if (!handlers?.delete(onNotify) || handlers.size > 0) return;
      this.handlers.delete(channel);
      await this.client?.query(`UNLISTEN ${quoteIdent(channel)}`).catch(() => {});
    };
  }

  /** Connects (once, however many callers wait) and LISTENs on every known channel. */
  private connect(): Promise<void> {
    if (this.client !== null) return Promise.resolve();
    this.connecting ??= this.openClient().finally(() => {
      this.connecting = null;
    });
    return this.connecting;
  }

  private async openClient(): Promise<void> {
    const client = this.createClient();
    // Attached before connect(): an error with no listener would crash the process.
    client.on('error', (error) => this.onLost(client, error));
    client.on('end', () => this.onLost(client, null));
    client.on('notification', (msg) => this.dispatch(msg.channel));
    try {
      await client.connect();
      if (this.closed) throw new Error('listener is closed');
      for (const channel of this.handlers.keys()) await client.query(`LISTEN ${quoteIdent(channel)}`);
    } catch (error) {
      client.on('error', () => {});
      await client.end().catch(() => {});
      if (this.closed) return;
      throw error;
    }
    this.client = client;
    this.failures = 0;
    if (this.dropped) {
      this.dropped = false;
      this.reconnects++;
      this.opts.log?.info({ channels: [...this.handlers.keys()] }, 'PostgreSQL LISTEN connection restored');
      // Anything notified while we were away is unknown: wake everyone once.
      for (const channel of this.handlers.keys()) this.dispatch(channel);
    }
  }

  private dispatch(channel: string): void {
    for (const handler of this.handlers.get(channel) ?? []) {
      try {
        handler();
      } catch (error) {
        this.opts.log?.error({ err: error, channel }, 'wake-up listener threw');
      }
    }
  }

  private onLost(client: pg.Client, error: Error | null): void {
    if (this.closed || this.client !== client) return;
    this.client = null;
    this.dropped = true;
    client.removeAllListeners('notification');
    client.on('error', () => {});
    client.end().catch(() => {});
    this.opts.log?.warn({ err: error ? describeError(error) : undefined }, 'PostgreSQL LISTEN connection lost; reconnecting');
    this.scheduleReconnect();
  }

  private scheduleReconnect(): void {
    if (this.closed || this.retryTimer) return;
    const delayMs = Math.min(this.opts.reconnectMaxMs, this.opts.reconnectMinMs * 2 ** this.failures);
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      // A listen() in the meantime may have connected already.
      if (this.closed || this.client !== null) return;
      this.connect().then(
        () => {},
        (error) => {
          this.failures++;
          this.opts.log?.warn({ err: describeError(error), retryInMs: delayMs }, 'PostgreSQL LISTEN reconnect failed');
          this.scheduleReconnect();
        },
      );
    }, delayMs);
    this.retryTimer.unref();
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = null;
    await this.connecting?.catch(() => {});
    const client = this.client;
    this.client = null;
    if (client) await client.end().catch(() => {});
  }
}

function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

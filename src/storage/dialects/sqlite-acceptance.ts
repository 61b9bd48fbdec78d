// Acceptance on SQLite (docs/decisions/0003-performance.md, "The acceptance thread"): the messages
// an API process accepts (store.ts openStore, `acceptanceThread`) are written by a thread of its
// own, with its own connection to the file, in group commits, while the event loop goes on
// reading, checking and answering requests.
//
// better-sqlite3 is synchronous: on the event loop, the inserts, COMMIT and page writes of
// acceptance were about a third of a send_message's CPU, on the one core that also parses,
// validates and answers. The thread moves them to another core. What crosses to it is values only
// (each message's column values and its transmissions'), posted once per event-loop turn for all of
// the turn's acceptances; what comes back is each message's id, or null where its (project_id, uid)
// was taken.
//
//   group     what the thread has received when it is free: ONE transaction (BEGIN IMMEDIATE), the
//             rows of every message, COMMIT, then an fdatasync of the WAL before any of them is
//             answered: the durability of the store's group commit (store.ts). The next group is
//             written while that sync is in flight. A taken uid is skipped by the INSERT itself (ON
//             CONFLICT DO NOTHING), not by an error. Should any other row fail, the group is rolled
//             back and written again with one SAVEPOINT per message, so that the bad row fails
//             alone; a SAVEPOINT for every message of every group cost about a fifth of the
//             thread's SQLite work (its statements, and the statement journal's copies of pages).
//   lock      the thread waits for the write lock itself, trying again every LOCK_RETRY_MS up to
//             BUSY_TIMEOUT_MS: that stops the thread alone, never the event loop, and takes the lock
//             soon after it is free (SQLite's busy handler sleeps 1, 2, 5, 10... ms). The store's
//             own groups (the process's other writes) and other processes on the file take turns
//             with it.
//   failure   the file unavailable (a full disk, an I/O error, the lock held past the timeout)
//             fails the whole group with StoreUnavailableError, as the store does; after a full
//             disk the thread shrinks its WAL before its next transaction, as the store's connection
//             does (sqlite.ts shrinkWal). A thread that dies fails what it held as unavailable
//             (whether it was written is not known), and the next acceptance starts another.
//
// The thread is plain CommonJS (no loader, no build step), like sqlite-checkpointer.ts.
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import { StoreUnavailableError } from '../../domain/errors.ts';
import type { AcceptedTransmission, MessageRow } from '../schema.ts';
import { MESSAGE_COLUMNS, TRANSMISSION_COLUMNS } from './acceptance-columns.ts';

const placeholders = (n: number) => Array.from({ length: n }, () => '?').join(', ');
const quoted = (columns: readonly string[]) => columns.map((c) => `"${c}"`).join(', ');
/** The thread's statements; a transmission's first value is its message's id, set by the thread. */
const INSERT_MESSAGE = `insert into "messages" (${quoted(MESSAGE_COLUMNS)}) values (${placeholders(MESSAGE_COLUMNS.length)}) on conflict ("project_id", "uid") do nothing`;
const INSERT_TRANSMISSION = `insert into "transmissions" ("message_id", ${quoted(TRANSMISSION_COLUMNS)}) values (${placeholders(TRANSMISSION_COLUMNS.length + 1)})`;

/** A failure as it crosses back from the thread. */
interface ThreadError {
  message: string;
  code: string | null;
}

/** Per message: its id, null where its uid was taken, or the failure of its own rows. */
type ThreadResult = number | null | ThreadError;

/**
 * How often the thread tries again for a write lock held by another connection (a delivery
 * process's group holds it for about a millisecond): the wait stops the thread alone.
 */
const LOCK_RETRY_MS = 0.1;

type ThreadAnswer = { batch: number; results: ThreadResult[] } | { batch: number; failed: ThreadError };

const THREAD_SOURCE = `
const fs = require('node:fs');
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.driver);
const db = new Database(workerData.file, { fileMustExist: true });
db.pragma('synchronous = NORMAL');
// The write lock is waited for by beginWrite, not by SQLite's busy handler (which sleeps 1, 2, 5,
// 10... ms, long after a lock held for a millisecond is free again).
db.pragma('busy_timeout = 0');
db.pragma('foreign_keys = ON');
db.pragma('wal_autocheckpoint = ' + workerData.autocheckpointPages);
const begin = db.prepare('BEGIN IMMEDIATE');
const commit = db.prepare('COMMIT');
const savepoint = db.prepare('SAVEPOINT acceptance');
const release = db.prepare('RELEASE SAVEPOINT acceptance');
const rollbackTo = db.prepare('ROLLBACK TO SAVEPOINT acceptance');
const insertMessage = db.prepare(workerData.insertMessage);
const insertTransmission = db.prepare(workerData.insertTransmission);
let walFd = null;
const isUnique = (error) => error.code === 'SQLITE_CONSTRAINT_UNIQUE' || error.code === 'SQLITE_CONSTRAINT_PRIMARYKEY';
const describe = (error) => ({ message: String((error && error.message) || error), code: error && error.code ? String(error.code) : null });
const pause = new Int32Array(new SharedArrayBuffer(4));
/** BEGIN IMMEDIATE, tried again every LOCK_RETRY_MS while another connection holds the write lock. */
function beginWrite() {
  const started = Date.now();
  for (;;) {
    try {
      begin.run();
      return;
    } catch (error) {
      if (!String(error && error.code).startsWith('SQLITE_BUSY') || Date.now() - started >= workerData.busyTimeoutMs) throw error;
      Atomics.wait(pause, 0, 0, workerData.lockRetryMs);
    }
  }
}
let queue = [];
let scheduled = false;
let syncing = 0;
let stopping = false;
let diskFull = false;

/**
 * Every message's rows; results[b][i] its id, or null where its uid was taken. Careful: each
 * message in its own SAVEPOINT, a row that fails taken back alone (results[b][i] its failure);
 * otherwise the first failure is thrown, the group's rows left to the caller to roll back.
 */
function writeRows(batches, results, careful) {
  for (let b = 0; b < batches.length; b++) {
    const items = batches[b].items;
    for (let i = 0; i < items.length; i++) {
      if (careful) savepoint.run();
      try {
        const written = insertMessage.run(items[i].m);
        if (written.changes === 0) {
          results[b][i] = null;
        } else {
          const id = Number(written.lastInsertRowid);
          const rows = items[i].t;
          for (let r = 0; r < rows.length; r++) {
            rows[r][0] = id;
            insertTransmission.run(rows[r]);
          }
          results[b][i] = id;
        }
        if (careful) release.run();
      } catch (error) {
        // SQLITE_FULL and some I/O errors roll the transaction back by themselves.
        if (!careful || !db.inTransaction) throw error;
        rollbackTo.run();
        release.run();
        results[b][i] = isUnique(error) ? null : describe(error);
      }
    }
  }
}

function writeGroup() {
  scheduled = false;
  if (queue.length === 0) return;
  const batches = queue;
  queue = [];
  const results = batches.map((batch) => new Array(batch.items.length));
  try {
    if (diskFull) shrinkWal();
    beginWrite();
    try {
      try {
        writeRows(batches, results, false);
      } catch (error) {
        if (!db.inTransaction) throw error;
        // A bad row: the group again, each message in its own savepoint, so that it fails alone.
        db.exec('ROLLBACK');
        beginWrite();
        writeRows(batches, results, true);
      }
      commit.run();
    } catch (error) {
      if (db.inTransaction) { try { db.exec('ROLLBACK'); } catch {} }
      throw error;
    }
  } catch (error) {
    if (error && (error.code === 'SQLITE_FULL' || error.code === 'ENOSPC')) diskFull = true;
    fail(batches, error);
    return;
  }
  try {
    // Opened at the first commit, as the store's connection does (the -wal file exists by then).
    if (walFd === null) walFd = fs.openSync(workerData.file + '-wal', 'r');
  } catch (error) {
    fail(batches, error);
    return;
  }
  syncing++;
  fs.fdatasync(walFd, (error) => {
    syncing--;
    if (error) fail(batches, error);
    else for (let b = 0; b < batches.length; b++) parentPort.postMessage({ batch: batches[b].batch, results: results[b] });
    closeWhenDone();
  });
}

function fail(batches, error) {
  const failed = describe(error);
  for (const batch of batches) parentPort.postMessage({ batch: batch.batch, failed });
}

function shrinkWal() {
  try {
    db.pragma('wal_autocheckpoint = ' + workerData.tightAutocheckpointPages);
    const [result] = db.pragma('wal_checkpoint(TRUNCATE)');
    if (!result || result.busy === 0) diskFull = false;
  } catch {
    // Still full: the transaction that follows fails with the cause.
  }
}

function closeWhenDone() {
  if (!stopping || scheduled || queue.length > 0 || syncing > 0) return;
  try { db.close(); } catch {}
  if (walFd !== null) { try { fs.closeSync(walFd); } catch {} }
  parentPort.close();
}

parentPort.on('message', (message) => {
  if (message === 'stop') {
    stopping = true;
    writeGroup();
    closeWhenDone();
    return;
  }
  queue.push(message);
  if (!scheduled) {
    scheduled = true;
    setImmediate(writeGroup);
  }
});
`;

interface Waiting {
  resolve: (id: number | null) => void;
  reject: (error: unknown) => void;
}

export interface AcceptanceThreadOptions {
  file: string;
  busyTimeoutMs: number;
  autocheckpointPages: number;
  tightAutocheckpointPages: number;
  /** the error a caller sees for a failure of the file (StoreUnavailableError), or null for another */
  unavailable: (error: Error) => Error | null;
  /** after each group is durable (the store's connection watches the WAL's size: sqlite-checkpointer.ts) */
  onCommitted: () => void;
}

/** The acceptance thread of one SQLite store, started at its first acceptance. */
export class SqliteAcceptanceThread {
  private worker: Worker | null = null;
  private pending: Array<{ m: unknown[]; t: unknown[][]; waiting: Waiting }> = [];
  /** batches posted and not yet answered */
  private readonly sent = new Map<number, Waiting[]>();
  private nextBatch = 1;
  private stopped: Promise<void> | null = null;

  constructor(private readonly options: AcceptanceThreadOptions) {}

  /** The message's id, or null when its (project_id, uid) is taken (nothing written for it). */
  accept(message: MessageRow, transmissions: readonly AcceptedTransmission[]): Promise<number | null> {
    if (this.stopped) return Promise.reject(new Error('store is closed'));
    const m = MESSAGE_COLUMNS.map((column) => message[column] ?? null);
    const t = transmissions.map((row) => [0, ...TRANSMISSION_COLUMNS.map((column) => row[column] ?? null)]);
    return new Promise((resolve, reject) => {
      this.pending.push({ m, t, waiting: { resolve, reject } });
      if (this.pending.length === 1) setImmediate(() => this.post());
    });
  }

  /** Posts the turn's acceptances to the thread as one batch. */
  private post(): void {
    const items = this.pending;
    if (items.length === 0) return;
    this.pending = [];
    const batch = this.nextBatch++;
    this.sent.set(batch, items.map((item) => item.waiting));
    let worker: Worker;
    try {
      worker = this.thread();
    } catch (error) {
      this.sent.delete(batch);
      for (const item of items) item.waiting.reject(error);
      return;
    }
    // Answers are awaited: the thread keeps the process alive until they come.
    worker.ref();
    worker.postMessage({ batch, items: items.map(({ m, t }) => ({ m, t })) });
  }

  private thread(): Worker {
    if (this.worker) return this.worker;
    const { file, busyTimeoutMs, autocheckpointPages, tightAutocheckpointPages } = this.options;
    const worker = new Worker(THREAD_SOURCE, {
      eval: true,
      workerData: {
        file,
        driver: createRequire(import.meta.url).resolve('better-sqlite3'),
        busyTimeoutMs,
        lockRetryMs: LOCK_RETRY_MS,
        autocheckpointPages,
        tightAutocheckpointPages,
        insertMessage: INSERT_MESSAGE,
        insertTransmission: INSERT_TRANSMISSION,
      },
      stdout: false,
      stderr: false,
    });
    worker.on('message', (answer: ThreadAnswer) => this.answer(worker, answer));
    // 'error' is followed by 'exit': the first of them fails what this thread held, once (by
    // then another thread may hold the next acceptances).
    let dead = false;
    const died = (cause: Error) => {
      if (dead) return;
      dead = true;
      if (this.worker === worker) this.worker = null;
      // Whether what it held was written is not known: the callers are told to try again (a
      // message that was written then answers as a duplicate of its uid, never a second copy).
      const error = this.options.unavailable(cause) ?? new StoreUnavailableError(`the acceptance thread stopped: ${cause.message}`, { cause, reason: 'database unavailable: the acceptance thread stopped', mayHaveWritten: true });
      for (const waiting of this.sent.values()) for (const w of waiting) w.reject(error);
      this.sent.clear();
    };
    worker.on('error', died);
    worker.on('exit', (code) => died(new Error(`the acceptance thread exited (code ${code})`)));
    this.worker = worker;
    return worker;
  }

  private answer(worker: Worker, answer: ThreadAnswer): void {
    const waiting = this.sent.get(answer.batch);
    if (!waiting) return;
    this.sent.delete(answer.batch);
    // Idle, the thread does not keep the process alive; while stopping, it does until it has exited.
    if (this.sent.size === 0 && !this.stopped) worker.unref();
    if ('failed' in answer) {
      const error = this.errorOf(answer.failed);
      for (const w of waiting) w.reject(error);
      return;
    }
    this.options.onCommitted();
    for (let i = 0; i < waiting.length; i++) {
      const result = answer.results[i];
      if (result === null || typeof result === 'number') waiting[i].resolve(result);
      else waiting[i].reject(this.errorOf(result));
    }
  }

  private errorOf(failed: ThreadError): Error {
    const error = Object.assign(new Error(failed.message), { code: failed.code ?? undefined });
    return this.options.unavailable(error) ?? error;
  }

  /** Writes what is pending, waits for every answer, and ends the thread. */
  stop(): Promise<void> {
    return (this.stopped ??= (async () => {
      this.post();
      const worker = this.worker;
      if (!worker) return;
      worker.ref();
      await new Promise<void>((resolve) => {
        worker.once('exit', () => resolve());
        worker.postMessage('stop');
      });
    })());
  }
}

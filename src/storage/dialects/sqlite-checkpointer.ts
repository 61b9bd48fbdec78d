// Background WAL checkpoints for a SQLite file (docs/decisions/0003-performance.md: item j, and
// the round of 09:00-10:30).
//
// better-sqlite3 is synchronous, so the checkpoint SQLite runs inside the COMMIT that takes the WAL
// past wal_autocheckpoint pages (copying every page of the WAL into the database file and syncing
// it) stopped the process's event loop for ~10 ms, a few times a second under load: requests in
// flight waited, and p99 latency was made of these stops. A worker thread with its own connection
// now copies the WAL into the database every CHECKPOINT_EVERY_MS with PASSIVE checkpoints (they
// never wait for, nor block, the process's reads and writes). The connection's own automatic
// checkpoint stays as it was: it still decides when the WAL starts over, but finds the pages
// already copied and synced, so what remains in the COMMIT is a few pages and a small sync.
//
// The thread starts once the WAL has grown past START_AFTER_WAL_BYTES (a small database, and most
// test databases, never pay for it), holds no transaction, and is stopped with the store. Several
// processes on one file each run one: a checkpoint that finds another in progress is skipped.
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

const CHECKPOINT_EVERY_MS = 100;
export const START_AFTER_WAL_BYTES = 1024 * 1024;

/** What the thread runs: plain CommonJS, so it needs no loader or build step of its own. */
const THREAD_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.driver);
let db = null;
const checkpoint = () => {
  try {
    if (db === null) {
      db = new Database(workerData.file, { fileMustExist: true });
      db.pragma('busy_timeout = 0');
      db.pragma('wal_autocheckpoint = 0');
    }
    const [result] = db.pragma('wal_checkpoint(PASSIVE)');
    if (result && result.busy === 0 && result.checkpointed > 0) parentPort.postMessage({ checkpointed: result.checkpointed, log: result.log });
  } catch {
    // A busy lock, a full disk or a file going away: the connection's own checkpoint still runs.
  }
};
const timer = setInterval(checkpoint, workerData.everyMs);
parentPort.on('message', (message) => {
  if (message !== 'stop') return;
  clearInterval(timer);
  try { if (db) db.close(); } catch {}
  parentPort.close();
});
`;

export interface Checkpointer {
  /** Called with the pages each background checkpoint copied (tests, observability). */
  onCheckpoint(listener: (pages: { checkpointed: number; log: number }) => void): void;
  stop(): Promise<void>;
}

/** Starts the background checkpoints of `file` (in WAL mode). */
export function startCheckpointer(file: string): Checkpointer {
  const driver = createRequire(import.meta.url).resolve('better-sqlite3');
  const worker = new Worker(THREAD_SOURCE, {
    eval: true,
    workerData: { file, driver, everyMs: CHECKPOINT_EVERY_MS },
    // Pages are copied by SQLite in C: the thread's own JavaScript heap stays tiny.
    resourceLimits: { maxOldGenerationSizeMb: 16, maxYoungGenerationSizeMb: 2 },
    stdout: false,
    stderr: false,
  });
  worker.unref();
  // A failure of the thread itself (out of memory, say) leaves the connection's own checkpoints.
  worker.on('error', () => {});
  const listeners: Array<(pages: { checkpointed: number; log: number }) => void> = [];
  worker.on('message', (pages: { checkpointed: number; log: number }) => {
    for (const listener of listeners) listener(pages);
  });
  let stopped: Promise<void> | null = null;
  return {
    onCheckpoint: (listener) => void listeners.push(listener),
    stop: () =>
      (stopped ??= new Promise<void>((resolve) => {
        const done = () => resolve();
        worker.once('exit', done);
        // Until it has exited, the thread keeps the event loop alive for whoever awaits this.
        worker.ref();
        worker.postMessage('stop');
        // A thread stuck in a checkpoint is not waited for beyond this.
        setTimeout(() => void worker.terminate().then(done, done), 2000).unref();
      })),
  };
}

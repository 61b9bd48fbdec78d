// DKIM signatures off the event loop (docs/domains-and-bounces.md, "Sending domains and DKIM"). An
// RSA-2048 signature costs ~0.5 ms of CPU, several times the rest of a delivery, and both
// Nodemailer's signer and crypto's synchronous sign() compute it on the calling thread: a delivery
// process signing every message would do nothing else. Here a few threads (one per core beyond the
// first, at most MAX_THREADS, started on the first signature) run Nodemailer's own signer over the
// message and hand the signed bytes back, so that signing spreads over the machine's cores.
//
// The message is copied to the thread and back (a few KB); the key (a KeyObject) is passed by
// reference to its parsed form, never as PEM text. A thread that fails, or dies with signatures in
// flight, costs nothing but time: those messages are signed on the event loop instead, and the next
// signature starts a new thread. Large messages (sent in parts, delivery/smtp-client.ts) are signed
// as streams on the event loop, never copied whole.
import { createRequire } from 'node:module';
import os from 'node:os';
import { Worker } from 'node:worker_threads';
import DKIM from 'nodemailer/lib/dkim/index.js';
import type { DkimKey } from './dkim.ts';

/** Threads at most, whatever the cores: signing then outruns what one delivery process composes and sends. */
const MAX_THREADS = 4;

const THREAD_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const DKIM = require(workerData.signer);
parentPort.on('message', ({ id, message, domainName, keySelector, privateKey }) => {
  const chunks = [];
  try {
    const signed = new DKIM({ domainName, keySelector, privateKey }).sign(Buffer.from(message.buffer, message.byteOffset, message.byteLength));
    signed.on('data', (chunk) => chunks.push(chunk));
    signed.on('error', (error) => parentPort.postMessage({ id, error: String(error && error.message) }));
    signed.on('end', () => parentPort.postMessage({ id, signed: Buffer.concat(chunks) }));
  } catch (error) {
    parentPort.postMessage({ id, error: String(error && error.message) });
  }
});
`;

interface Thread {
  worker: Worker;
  /** signatures sent to it and not answered */
  inFlight: Set<number>;
}

interface Pending {
  message: Buffer;
  key: DkimKey;
  resolve: (signed: Buffer) => void;
  reject: (error: unknown) => void;
}

/** Nodemailer's signer for the key, on the calling thread. */
export function nodemailerSigner(key: DkimKey): DKIM {
  // The key goes to crypto's sign(), which takes a KeyObject as well as PEM (Nodemailer's types say PEM).
  return new DKIM({ domainName: key.domainName, keySelector: key.keySelector, privateKey: key.privateKey as unknown as string });
}

/** Signs a message on the calling thread: Nodemailer's signer, its output gathered. */
export async function signOnEventLoop(message: Buffer, key: DkimKey): Promise<Buffer> {
  return Buffer.concat(await nodemailerSigner(key).sign(message).toArray());
}

export class DkimSigners {
  private readonly threads: Thread[] = [];
  private readonly pending = new Map<number, Pending>();
  private nextId = 0;
  private closed = false;

  /** `threads`: how many at most (0: sign on the event loop); by default one per core beyond the first. */
  constructor(private readonly maxThreads = Math.min(MAX_THREADS, os.availableParallelism() - 1)) {}

  /** The message with its DKIM-Signature header, the same bytes Nodemailer's signer writes. */
  sign(message: Buffer, key: DkimKey): Promise<Buffer> {
    if (this.closed || this.maxThreads < 1) return signOnEventLoop(message, key);
    const thread = this.leastBusy();
    const id = this.nextId++;
    return new Promise<Buffer>((resolve, reject) => {
      this.pending.set(id, { message, key, resolve, reject });
      thread.inFlight.add(id);
      if (thread.inFlight.size === 1) thread.worker.ref();
      thread.worker.postMessage({ id, message, domainName: key.domainName, keySelector: key.keySelector, privateKey: key.privateKey });
    });
  }

  /** Stops the threads; what they still held is signed on the event loop. */
  async close(): Promise<void> {
    this.closed = true;
    const threads = this.threads.splice(0);
    for (const thread of threads) this.fallBack(thread);
    await Promise.all(threads.map((t) => t.worker.terminate()));
  }

  private leastBusy(): Thread {
    let best: Thread | null = null;
    for (const t of this.threads) if (!best || t.inFlight.size < best.inFlight.size) best = t;
    if (best && (best.inFlight.size === 0 || this.threads.length >= this.maxThreads)) return best;
    return this.start();
  }

  private start(): Thread {
    const worker = new Worker(THREAD_SOURCE, { eval: true, workerData: { signer: createRequire(import.meta.url).resolve('nodemailer/lib/dkim/index.js') } });
    const thread: Thread = { worker, inFlight: new Set() };
    this.threads.push(thread);
    worker.unref();
    worker.on('message', (answer: { id: number; signed?: Uint8Array; error?: string }) => {
      thread.inFlight.delete(answer.id);
      if (thread.inFlight.size === 0) worker.unref();
      const pending = this.pending.get(answer.id);
      if (!pending) return;
      this.pending.delete(answer.id);
      if (answer.signed) pending.resolve(Buffer.from(answer.signed.buffer, answer.signed.byteOffset, answer.signed.byteLength));
      else signOnEventLoop(pending.message, pending.key).then(pending.resolve, pending.reject);
    });
    const lost = () => {
      const at = this.threads.indexOf(thread);
      if (at !== -1) this.threads.splice(at, 1);
      this.fallBack(thread);
    };
    worker.on('error', lost);
    worker.on('exit', lost);
    return thread;
  }

  /** The signatures a thread held, signed on the event loop instead. */
  private fallBack(thread: Thread): void {
    for (const id of thread.inFlight) {
      const pending = this.pending.get(id);
      if (!pending) continue;
      this.pending.delete(id);
      signOnEventLoop(pending.message, pending.key).then(pending.resolve, pending.reject);
    }
    thread.inFlight.clear();
  }
}

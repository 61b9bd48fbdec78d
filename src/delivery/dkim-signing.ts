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
//
// Signing never throws past its caller: every failure is a rejected promise (DkimSigningError), which
// delivery records as a failed attempt and retries (docs/delivery.md, "DKIM"). Nodemailer's signer
// throws from inside its own stream events, where no caller can catch it, when a message has no
// empty line after its header section (it writes a header it never found): such a message is
// refused here before the signer sees it. A key crypto cannot sign with makes Nodemailer write the
// message without a signature: that too is a failure here, never mail sent unsigned. A thread that
// dies of an uncaught exception fails the signatures it held (they are not retried on the event
// loop, where the same exception would end the process).
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

/** Why a message could not be signed: the attempt fails and is retried, nothing is sent. */
export class DkimSigningError extends Error {
  constructor(message: string) {
    super(`DKIM signing failed: ${message}`);
    this.name = 'DkimSigningError';
  }
}

/**
 * True when the message has the empty line that ends its header section as Nodemailer's signer
 * looks for it (nodemailer/lib/dkim/message-parser.js: an LF followed by LF or by CRLF).
 */
export function hasHeaderEnd(message: Buffer): boolean {
  for (let i = message.indexOf(0x0a); i !== -1 && i + 1 < message.length; i = message.indexOf(0x0a, i + 1)) {
    if (message[i + 1] === 0x0a || (message[i + 1] === 0x0d && message[i + 2] === 0x0a)) return true;
  }
  return false;
}

/** The refusal of a message the signer must not be given, or null. */
function unsignable(message: Buffer): DkimSigningError | null {
  return hasHeaderEnd(message) ? null : new DkimSigningError('the message has no empty line after its header section');
}

/** The signed bytes, or the failure when the signer wrote the message without a signature (a key crypto refused). */
function checkedSignature(signed: Buffer): Buffer {
  if (signed.subarray(0, 15).toString('latin1').toLowerCase() !== 'dkim-signature:') throw new DkimSigningError('the key did not sign (no DKIM-Signature was made)');
  return signed;
}

/** Nodemailer's signer for the key, on the calling thread. */
export function nodemailerSigner(key: DkimKey): DKIM {
  // The key goes to crypto's sign(), which takes a KeyObject as well as PEM (Nodemailer's types say PEM).
  return new DKIM({ domainName: key.domainName, keySelector: key.keySelector, privateKey: key.privateKey as unknown as string });
}

/** Signs a message on the calling thread: Nodemailer's signer, its output gathered. */
export async function signOnEventLoop(message: Buffer, key: DkimKey): Promise<Buffer> {
  const refused = unsignable(message);
  if (refused) throw refused;
  let chunks: Buffer[];
  try {
    chunks = await nodemailerSigner(key).sign(message).toArray();
  } catch (error) {
    throw new DkimSigningError(error instanceof Error ? error.message : String(error));
  }
  return checkedSignature(Buffer.concat(chunks));
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
    const refused = unsignable(message);
    if (refused) return Promise.reject(refused);
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
      if (answer.signed) {
        try {
          pending.resolve(checkedSignature(Buffer.from(answer.signed.buffer, answer.signed.byteOffset, answer.signed.byteLength)));
        } catch (error) {
          pending.reject(error);
        }
      } else signOnEventLoop(pending.message, pending.key).then(pending.resolve, pending.reject);
    });
    const forget = () => {
      const at = this.threads.indexOf(thread);
      if (at !== -1) this.threads.splice(at, 1);
    };
    // An uncaught exception in the thread: one of the messages it held made the signer throw, and
    // the event loop would throw the same. Those signatures fail (their attempts are retried).
    worker.on('error', (error: Error) => {
      forget();
      this.fail(thread, new DkimSigningError(`the signing thread failed: ${error.message}`));
    });
    // Ended otherwise (terminated): what it held is signed on the event loop.
    worker.on('exit', () => {
      forget();
      this.fallBack(thread);
    });
    return thread;
  }

  /** The signatures a thread held, failed with `error`. */
  private fail(thread: Thread, error: DkimSigningError): void {
    for (const id of thread.inFlight) {
      const pending = this.pending.get(id);
      if (!pending) continue;
      this.pending.delete(id);
      pending.reject(error);
    }
    thread.inFlight.clear();
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

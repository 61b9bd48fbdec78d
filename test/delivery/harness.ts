// A Posthorn for delivery tests: the real app (HTTP API, database) without background loops, and a
// delivery worker the test drives with runOnce() (no sleeping, no polling), mail sent through the
// real send_message API.
import type { Clock } from '../../src/domain/clock.ts';
import type { Config } from '../../src/config.ts';
import type { Services } from '../../src/services.ts';
import { createDeliveryWorker, type DeliveryOptions, type DeliveryWorker } from '../../src/delivery/deliver-transmissions.ts';
import { listAttempts } from '../../src/storage/delivery-queue.ts';
import { startTestApp, type Seed, type TestApp } from '../helpers/app.ts';

export interface DeliveryHarness {
  t: TestApp;
  seed: Seed;
  worker: DeliveryWorker;
  /** send_message with the project key; returns the API reply body */
  send(args: Record<string, unknown>): Promise<any>;
  /** runOnce() until nothing is due (bounded) */
  drain(): Promise<number>;
  transmissions(messageUid?: string): Promise<any[]>;
  transmission(recipient: string): Promise<any>;
  attempts(transmissionId: number): Promise<any[]>;
  events(type?: string): Promise<Array<{ type: string; payload: any }>>;
  close(): Promise<void>;
}

export interface HarnessOptions {
  config?: Partial<Config>;
  clock?: Clock;
  /** the worker's options, or a function of the app's services that makes them */
  delivery?: DeliveryOptions | ((services: Services) => DeliveryOptions);
}

export async function startDeliveryHarness(opts: HarnessOptions = {}): Promise<DeliveryHarness> {
  const t = await startTestApp({
    background: false,
    clock: opts.clock,
    config: { workers: 16, connectTimeoutMs: 2000, greetingTimeoutMs: 2000, socketTimeoutMs: 2000, ...opts.config },
  });
  const seed = await t.seed();
  const worker = createDeliveryWorker(t.app.services, typeof opts.delivery === 'function' ? opts.delivery(t.app.services) : opts.delivery);
  const db = t.app.services.store.db;
  const h: DeliveryHarness = {
    t,
    seed,
    worker,
    async send(args) {
      const r = await t.call('send_message', { api_key: seed.projectKey, arguments: args });
      if (r.status !== 200) throw new Error(`send_message answered ${r.status}: ${JSON.stringify(r.body)}`);
      return r.body;
    },
    async drain() {
      let total = 0;
      for (let i = 0; i < 100; i++) {
        const n = await worker.runOnce();
        if (n === 0) return total;
        total += n;
      }
      throw new Error('drain: still claiming after 100 rounds');
    },
    async transmissions(messageUid) {
      let q = db.selectFrom('transmissions').innerJoin('messages', 'messages.id', 'transmissions.message_id').selectAll('transmissions');
      if (messageUid) q = q.where('messages.uid', '=', messageUid);
      return q.orderBy('transmissions.id').execute();
    },
    async transmission(recipient) {
      return db.selectFrom('transmissions').selectAll().where('recipient', '=', recipient).orderBy('id', 'desc').executeTakeFirstOrThrow();
    },
    attempts: (id) => listAttempts(db, id),
    async events(type) {
      let q = db.selectFrom('events').select(['type', 'payload']);
      if (type) q = q.where('type', '=', type);
      const rows = await q.orderBy('id').execute();
      return rows.map((r) => ({ type: r.type, payload: JSON.parse(r.payload) }));
    },
    async close() {
      await worker.stop();
      await t.close();
    },
  };
  return h;
}

/** send_message arguments for a simple message. */
export function simpleMessage(recipients: unknown, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    recipients,
    headers: { from: 'Sender <sender@posthorn.test>', subject: 'Hello' },
    content: { 'text/plain': 'Hello there', 'text/html': '<p>Hello there</p>' },
    ...extra,
  };
}

// The outbound feature, run in every worker process (role all or worker): two jobs, the events
// fan-out (fan-out-events.ts: events -> webhook requests, a sweep) and the dispatch of every due
// outbound request, webhooks and mailbox postbacks alike (dispatch-outbound.ts, a leased job).
// docs/webhooks.md describes what endpoints receive.
import type { BackgroundFactory, BackgroundService, ProcessLiveness, Services } from '../services.ts';
import { hasUndispatchedEvents } from '../storage/events.ts';
import { hasDueOutbound } from '../storage/outbound.ts';
import { createDispatchWorker } from './dispatch-outbound.ts';
import { createFanOutJob } from './fan-out-events.ts';

export interface OutboundDispatcher extends BackgroundService {
  /** Runs fan-out and dispatch until nothing is due and nothing is in flight (tests, CLI). */
  drain(): Promise<void>;
}

export function createOutboundDispatcher(services: Services, workerId?: string, liveness?: ProcessLiveness): OutboundDispatcher {
  const fanOut = createFanOutJob(services);
  const dispatch = createDispatchWorker(services, workerId, liveness);
  let stopped = false;
  return {
    name: 'webhooks',
    async start() {
      await fanOut.start();
      await dispatch.start();
    },
    async stop() {
      stopped = true;
      await fanOut.stop();
      await dispatch.stop();
    },
    async drain() {
      for (let i = 0; i < 10_000 && !stopped; i++) {
        await fanOut.runNow();
        if ((await dispatch.runOnce()) > 0) continue;
        await dispatch.idle();
        const { store, clock } = services;
        if (!(await hasDueOutbound(store.db, clock.now())) && !(await hasUndispatchedEvents(store.db))) return;
      }
    },
  };
}

export const createWebhookDispatcher: BackgroundFactory = (services, process) => createOutboundDispatcher(services, process?.workerId, process?.liveness);

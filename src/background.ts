// The long-running parts of a worker process: each module contributes a factory; a factory returns
// null where its feature is not configured.
import type { Services } from './services.ts';
import { createDeliveryService } from './delivery/index.ts';
import { createBounceListener, createSubmissionListener } from './smtp/index.ts';
import { createWebhookDispatcher } from './webhooks/index.ts';
import { createMailboxWatcher } from './ingress/index.ts';
import { createOperationsService } from './http/ops/listener.ts';
import { createPurgeJob } from './workers/purge-expired.ts';

export interface BackgroundService {
  readonly name: string;
  start(): Promise<void>;
  /** Stops taking work, lets work in flight finish (bounded), releases resources. */
  stop(): Promise<void>;
}

/** What the jobs of one process share: the registry id every claim of this process is locked_by. */
export interface WorkerProcessContext {
  readonly workerId: string;
}

export type BackgroundFactory = (services: Services, process?: WorkerProcessContext) => BackgroundService | null;

export const BACKGROUND_FACTORIES: readonly BackgroundFactory[] = [
  createDeliveryService,
  createBounceListener,
  createSubmissionListener,
  createWebhookDispatcher,
  createMailboxWatcher,
  createPurgeJob,
  // Last: marks the loops above as running for /readyz (docs/operations.md).
  createOperationsService,
];

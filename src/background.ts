// The long-running parts of a worker process: each module contributes a factory; a factory returns
// null where its feature is not configured. The types (BackgroundService, BackgroundFactory) are in
// services.ts, so the features name them without importing this list.
import type { BackgroundFactory } from './services.ts';
import { createDeliveryService } from './delivery/index.ts';
import { createBounceListener, createSubmissionListener } from './smtp/index.ts';
import { createWebhookDispatcher } from './webhooks/index.ts';
import { createMailboxWatcher } from './ingress/index.ts';
import { createOperationsService } from './http/ops/listener.ts';
import { createPurgeJob } from './workers/purge-expired.ts';

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

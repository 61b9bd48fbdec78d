// The long-running parts of a worker process: each module contributes a factory; a factory returns
// null where its feature is not configured.
import type { Services } from './services.ts';
import { createDeliveryService } from './delivery/index.ts';
import { createBounceListener } from './smtp/index.ts';
import { createWebhookDispatcher } from './webhooks/index.ts';
import { createMailboxWatcher } from './ingress/index.ts';

export interface BackgroundService {
  readonly name: string;
  start(): Promise<void>;
  /** Stops taking work, lets work in flight finish (bounded), releases resources. */
  stop(): Promise<void>;
}

export type BackgroundFactory = (services: Services) => BackgroundService | null;

export const BACKGROUND_FACTORIES: readonly BackgroundFactory[] = [
  createDeliveryService,
  createBounceListener,
  createWebhookDispatcher,
  createMailboxWatcher,
];

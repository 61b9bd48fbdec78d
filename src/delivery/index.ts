// The delivery feature's entry: the job that turns queued transmissions into SMTP deliveries
// (deliver-transmissions.ts, run by workers/lease-runner.ts). docs/delivery.md describes routing,
// TLS, retries and result codes. --workers 0 runs no delivery in this process (an API-only process
// can also use --role api).
import type { BackgroundFactory } from '../services.ts';
import { createDeliveryWorker } from './deliver-transmissions.ts';

export const createDeliveryService: BackgroundFactory = (services, process) => (services.config.workers > 0 ? createDeliveryWorker(services, { workerId: process?.workerId, liveness: process?.liveness }) : null);

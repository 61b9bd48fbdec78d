// The delivery feature's entry: the worker that turns queued transmissions into SMTP deliveries
// (delivery-service.ts). docs/delivery.md describes routing, TLS, retries and result codes.
// --workers 0 runs no delivery in this process (an API-only process can also use --role api).
import type { BackgroundFactory } from '../background.ts';
import { DeliveryService } from './delivery-service.ts';

export { DeliveryService };

export const createDeliveryService: BackgroundFactory = (services, process) => (services.config.workers > 0 ? new DeliveryService(services, { workerId: process?.workerId }) : null);

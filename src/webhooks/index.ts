// The outbound dispatcher runs in every worker process (role all or worker): webhooks and mailbox
// postbacks share it (webhooks/dispatcher.ts).
import type { BackgroundFactory } from '../background.ts';
import { createOutboundDispatcher } from './dispatcher.ts';

export const createWebhookDispatcher: BackgroundFactory = (services, process) => createOutboundDispatcher(services, process?.workerId);

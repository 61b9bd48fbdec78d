import type { BackgroundFactory } from '../background.ts';

export const createWebhookDispatcher: BackgroundFactory = () => null;

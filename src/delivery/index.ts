import type { BackgroundFactory } from '../background.ts';

export const createDeliveryService: BackgroundFactory = () => null;

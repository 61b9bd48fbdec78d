import type { BackgroundFactory } from '../background.ts';

export const createBounceListener: BackgroundFactory = () => null;

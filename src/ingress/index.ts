import type { BackgroundFactory } from '../background.ts';

export const createMailboxWatcher: BackgroundFactory = () => null;

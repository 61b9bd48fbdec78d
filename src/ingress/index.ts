// Inbound mailboxes: the watcher runs in every worker process (role all or worker).
import type { BackgroundFactory } from '../background.ts';
import { createWatcher } from './watcher.ts';

export const createMailboxWatcher: BackgroundFactory = (services, process) => createWatcher(services, process?.workerId);

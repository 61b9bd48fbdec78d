// Inbound mailboxes: the mailbox job (watch-mailboxes.ts, one IMAP session per leased mailbox)
// runs in every worker process (role all or worker).
import type { BackgroundFactory } from '../services.ts';
import { createWatcher } from './watch-mailboxes.ts';

export const createMailboxWatcher: BackgroundFactory = (services, process) => createWatcher(services, process?.workerId);

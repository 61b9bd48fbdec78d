// The kinds of due work a process can be told about (store.wake / onWake; NOTIFY on PostgreSQL,
// relayed by the supervisor between the processes of one SQLite database): new transmissions to
// deliver, events to fan out to webhooks, outbound requests to post, mailboxes to look at.
export const WAKE_CHANNELS = ['transmissions', 'events', 'outbound', 'mailboxes'] as const;

export type WakeChannel = (typeof WAKE_CHANNELS)[number];

// How outbound requests name what they are about, in the words receivers and listings see.
//
// - An event's public id is "evt_<events.id>": the webhook body's event_id, the
//   X-Posthorn-Event-Id header receivers de-duplicate on, and list_webhook_deliveries' event_id.
// - A mailbox postback's outbound_requests.ref is "mailbox:<mailbox uid>": the dispatcher follows
//   the mailbox's current postback URL through it, and list_webhook_deliveries shows the uid.

const MAILBOX_REF_PREFIX = 'mailbox:';

export function eventIdOf(eventId: number): string {
  return `evt_${eventId}`;
}

export function postbackRefOf(mailboxUid: string): string {
  return `${MAILBOX_REF_PREFIX}${mailboxUid}`;
}

/** The mailbox uid a postback's ref names; null for any other ref. */
export function mailboxUidOfRef(ref: string | null): string | null {
  return ref !== null && ref.startsWith(MAILBOX_REF_PREFIX) ? ref.slice(MAILBOX_REF_PREFIX.length) : null;
}

// Transmissions to bounce, written straight into the store (the bounce tests do not depend on the
// delivery engine), and bounce mails to send to the listener.
import { randomUUID } from 'node:crypto';
import type { Services } from '../../src/services.ts';

export interface FixtureTransmission {
  messageId: number;
  messageUid: string;
  transmissionId: number;
}

export async function insertTransmission(
  services: Services,
  opts: { projectId: number; recipient: string; status?: 'queued' | 'retry' | 'completed' | 'failed'; now?: number },
): Promise<FixtureTransmission> {
  const now = opts.now ?? services.clock.now();
  const status = opts.status ?? 'completed';
  const uid = randomUUID();
  return services.store.write(async (trx) => {
    const message = await trx
      .insertInto('messages')
      .values({
        project_id: opts.projectId,
        uid,
        unique_id: `${uid}@posthorn.test`,
        template: null,
        subject: 'Hello',
        from_address: 'sender@example.org',
        recipient_count: 1,
        deliver: 1,
        created_at: now,
        payload: '{}',
      })
      .returning('id')
      .executeTakeFirstOrThrow();
    const t = await trx
      .insertInto('transmissions')
      .values({
        message_id: message.id,
        project_id: opts.projectId,
        recipient: opts.recipient,
        status,
        attempts: 0,
        // far in the future: no delivery worker may pick a fixture up
        next_attempt_at: now + 365 * 86_400_000,
        created_at: now,
        updated_at: now,
        completed_at: status === 'completed' ? now : null,
        result_code: status === 'completed' ? 'SMTP_250' : null,
        result_message: status === 'completed' ? '250 OK' : null,
      })
      .returning('id')
      .executeTakeFirstOrThrow();
    return { messageId: message.id, messageUid: uid, transmissionId: t.id };
  });
}

/** An RFC 3464 multipart/report, as Postfix writes them. */
export function dsnMail(opts: {
  to: string;
  recipient: string;
  action?: string;
  status?: string;
  diagnostic?: string | null;
  subject?: string;
}): string {
  const action = opts.action ?? 'failed';
  const status = opts.status ?? '5.1.1';
  const diagnostic = opts.diagnostic === undefined ? `smtp; 550 5.1.1 <${opts.recipient}>: Recipient address\r\n    rejected: User unknown in virtual mailbox table` : opts.diagnostic;
  return [
    'From: MAILER-DAEMON@mx.example.net (Mail Delivery System)',
    `To: ${opts.to}`,
    `Subject: ${opts.subject ?? 'Undelivered Mail Returned to Sender'}`,
    'Auto-Submitted: auto-replied',
    'MIME-Version: 1.0',
    'Content-Type: multipart/report; report-type=delivery-status; boundary="BOUNDARY-1"',
    '',
    'This is a MIME-encapsulated message.',
    '',
    '--BOUNDARY-1',
    'Content-Type: text/plain; charset=us-ascii',
    '',
    'I\'m sorry to have to inform you that your message could not be delivered.',
    '',
    '--BOUNDARY-1',
    'Content-Type: message/delivery-status',
    '',
    'Reporting-MTA: dns; mx.example.net',
    'Arrival-Date: Sun, 22 Nov 2026 05:00:00 +0000',
    '',
    `Final-Recipient: rfc822; ${opts.recipient}`,
    `Original-Recipient: rfc822;${opts.recipient}`,
    `Action: ${action}`,
    `Status: ${status}`,
    'Remote-MTA: dns; mail.example.net',
    ...(diagnostic === null ? [] : [`Diagnostic-Code: ${diagnostic}`]),
    '',
    '--BOUNDARY-1',
    'Content-Type: text/rfc822-headers',
    '',
    'Message-ID: <x@posthorn.test>',
    'From: sender@example.org',
    `To: ${opts.recipient}`,
    'Subject: Hello',
    '',
    '--BOUNDARY-1--',
    '',
  ].join('\r\n');
}

// Rows written straight into the store, with chosen statuses and timestamps, for tests of what
// reads them (reports, metrics). They go through store.write like any writer, so they respect the
// group commit. Not a substitute for send_message where the send itself is under test.
import type { Services } from '../../src/services.ts';
import type { Message, Suppression, Transmission } from '../../src/storage/schema.ts';
import { normalizeAddress, suppressionKey } from '../../src/domain/suppression-policy.ts';

export interface TransmissionFixture {
  recipient: string;
  status?: 'queued' | 'retry' | 'completed' | 'failed';
  /** defaults to the message's created_at */
  created_at?: number;
  completed_at?: number | null;
  failed_at?: number | null;
  opened_at?: number | null;
  clicked_at?: number | null;
  result_code?: string | null;
  result_message?: string | null;
  attempts?: number;
}

export interface MessageFixture {
  projectId: number;
  uid: string;
  created_at: number;
  /** messages.send_at: when a scheduled message was due */
  send_at?: number | null;
  template?: string | null;
  /** addresses, or full transmission fixtures */
  recipients: Array<string | TransmissionFixture>;
}

export interface InsertedMessage {
  message: Message;
  transmissions: Transmission[];
}

/** One message and its transmissions, as send_message (and then delivery) would have left them. */
export async function insertMessage(services: Services, fixture: MessageFixture): Promise<InsertedMessage> {
  const mailerHost = services.config.mailerHost;
  return services.store.write(async (trx) => {
    const message = await trx
      .insertInto('messages')
      .values({
        project_id: fixture.projectId,
        uid: fixture.uid,
        unique_id: `${fixture.uid}@${mailerHost}`,
        template: fixture.template ?? null,
        subject: 'Fixture',
        from_address: 'sender@example.com',
        recipient_count: fixture.recipients.length,
        deliver: 1,
        created_at: fixture.created_at,
        send_at: fixture.send_at ?? null,
        payload: '{"v":1}',
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    const transmissions: Transmission[] = [];
    for (const r of fixture.recipients) {
      const t: TransmissionFixture = typeof r === 'string' ? { recipient: r } : r;
      const created = t.created_at ?? fixture.created_at;
      const row = await trx
        .insertInto('transmissions')
        .values({
          message_id: message.id,
          project_id: fixture.projectId,
          recipient: t.recipient,
          recipient_name: null,
          variables: null,
          status: t.status ?? 'queued',
          next_attempt_at: created,
          attempts: t.attempts ?? 0,
          created_at: created,
          updated_at: created,
          completed_at: t.completed_at ?? null,
          failed_at: t.failed_at ?? null,
          opened_at: t.opened_at ?? null,
          clicked_at: t.clicked_at ?? null,
          result_code: t.result_code ?? null,
          result_message: t.result_message ?? null,
        })
        .returningAll()
        .executeTakeFirstOrThrow();
      transmissions.push(row);
    }
    return { message, transmissions };
  });
}

export interface SuppressionFixture {
  projectId: number;
  address: string;
  status: 'rejected' | 'warning';
  suppression_state: string;
  blocked_until?: number | null;
  message?: string | null;
  now: number;
}

export async function insertSuppression(services: Services, s: SuppressionFixture): Promise<Suppression> {
  return services.store.write((trx) =>
    trx
      .insertInto('suppressions')
      .values({
        project_id: s.projectId,
        // As storage/suppressions.ts stores an entry: under its key, showing its spelling.
        address: suppressionKey(s.address),
        display_address: normalizeAddress(s.address),
        status: s.status,
        suppression_state: s.suppression_state,
        blocked_until: s.blocked_until ?? null,
        message: s.message ?? null,
        soft_failures: 0,
        created_at: s.now,
        updated_at: s.now,
      })
      .returningAll()
      .executeTakeFirstOrThrow(),
  );
}

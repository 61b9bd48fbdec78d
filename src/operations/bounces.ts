// A bounce that arrived by mail (docs/domains-and-bounces.md): the SMTP edge (src/smtp/) hands over the raw message and
// the transmissions its VERP recipients name; this reads the report and records what it means.
//
//   1. read the mail: the message/delivery-status part if any (RFC 3464), else text heuristics
//   2. for each named transmission, in ONE transaction:
//        failed  -> transmission `failed` (even if `completed`: the receiving MX accepted, then
//                   bounced, so it was not delivered), the address suppressed (hard) or counted
//                   (soft), a `bounced` event
//        delayed -> a soft failure counted against the address; the transmission is unchanged
//        ignore  -> nothing
// A transmission already `failed` keeps its first result and gets no second event (a duplicate or
// late report), but the suppression is still applied.
import { simpleParser, type ParsedMail } from 'mailparser';
import { bounceFromText, classifyDeliveryStatus, parseDeliveryStatus, type BounceVerdict } from '../domain/dsn.ts';
import { buildEventPayload, transmissionStatusName } from '../domain/events.ts';
import { parsePayload } from '../domain/message-payload.ts';
import { failTransmissionByBounce, findBounceTarget, type BounceTarget } from '../storage/bounces.ts';
import { recordEvent } from '../storage/events.ts';
import type { Tx } from '../storage/store.ts';
import { recordBounce } from '../storage/suppressions.ts';
import type { Services } from '../services.ts';

export interface IncomingBounce {
  /** transmissions named by the verified VERP recipients of the mail */
  transmissionIds: readonly number[];
  raw: Buffer;
}

export interface BounceOutcome {
  transmissionId: number;
  /** what was done: failed (transmission failed now), suppressed (already failed: suppression only), counted (soft), ignored, unknown */
  action: 'failed' | 'suppressed' | 'counted' | 'ignored' | 'unknown';
  verdict: BounceVerdict;
}

/** Reads a bounce mail into a verdict (no I/O). */
export async function readBounceMail(raw: Buffer): Promise<BounceVerdict> {
  const mail: ParsedMail = await simpleParser(raw, { keepDeliveryStatus: true, skipHtmlToText: false, skipImageLinks: true, skipTextLinks: true });
  const report = mail.attachments.find((a) => /^message\/(global-)?delivery-status$/i.test(a.contentType));
  if (report) {
    const status = parseDeliveryStatus(report.content.toString('utf8'));
    // A report part without any recipient group is unusable: the heuristics get a chance.
    if (status.recipients.length > 0) return classifyDeliveryStatus(status);
  }
  const autoSubmitted = mail.headers.get('auto-submitted');
  return bounceFromText({
    subject: mail.subject ?? '',
    from: mail.from?.text ?? '',
    autoSubmitted: typeof autoSubmitted === 'string' ? autoSubmitted : null,
    text: mail.text ?? '',
  });
}

export async function processBounceMail(services: Services, input: IncomingBounce): Promise<BounceOutcome[]> {
  const verdict = await readBounceMail(input.raw).catch(
    // Mail that cannot even be parsed is accepted and ignored: a retry would not parse it either.
    (): BounceVerdict => ({ outcome: 'ignore', severity: 'soft', resultCode: '', resultMessage: 'unparseable mail', reportedRecipient: null, source: 'heuristic' }),
  );
  const ids = [...new Set(input.transmissionIds)];
  const now = services.clock.now();
  const outcomes =
    verdict.outcome === 'ignore'
      ? ids.map((transmissionId): BounceOutcome => ({ transmissionId, action: 'ignored', verdict }))
      : await services.store.write(async (trx) => {
          const out: BounceOutcome[] = [];
          for (const transmissionId of ids) out.push({ transmissionId, action: await applyVerdict(trx, transmissionId, verdict, now), verdict });
          return out;
        });
  for (const o of outcomes) {
    services.log.info({ transmissionId: o.transmissionId, action: o.action, resultCode: verdict.resultCode, source: verdict.source, why: o.action === 'ignored' ? verdict.resultMessage : undefined }, 'bounce processed');
  }
  return outcomes;
}

async function applyVerdict(trx: Tx, transmissionId: number, verdict: BounceVerdict, now: number): Promise<BounceOutcome['action']> {
  const t = await findBounceTarget(trx, transmissionId);
  if (!t) return 'unknown';

  // The address the mail really went to: with recipient_override, the override (as delivery does).
  const deliveredTo = deliveredAddressOf(t);
  const bounce = { projectId: t.project_id, address: deliveredTo, message: verdict.resultMessage, now, transmissionId };
  if (verdict.outcome === 'delayed') {
    await recordBounce(trx, { ...bounce, kind: 'soft' });
    return 'counted';
  }
  await recordBounce(trx, { ...bounce, kind: verdict.severity });
  if (t.status === 'failed') return 'suppressed';

  await failTransmissionByBounce(trx, t.id, { code: verdict.resultCode, message: verdict.resultMessage, now });
  const payload = buildEventPayload(
    {
      transmissionId: t.id,
      messageId: t.message_id,
      messageUid: t.message_uid,
      uniqueId: t.unique_id,
      projectUid: t.project_uid,
      recipient: t.recipient,
      sandbox: Number(t.sandbox) === 1,
    },
    {
      kind: 'bounced',
      deliveredTo,
      status: 'failed',
      outcome: 'failed',
      resultCode: verdict.resultCode,
      resultMessage: verdict.resultMessage,
      host: null,
      attempts: Number(t.attempts),
      createdAt: Number(t.created_at),
      nextAttemptAt: null,
      bounce: { type: verdict.severity, source: verdict.source, previousStatus: transmissionStatusName(t.status) },
    },
    now,
  );
  await recordEvent(trx, { accountId: t.account_id, projectId: t.project_id, type: 'bounced', payload, now });
  return 'failed';
}

function deliveredAddressOf(t: BounceTarget): string {
  try {
    return parsePayload(t.payload).recipientOverride ?? t.recipient;
  } catch {
    return t.recipient;
  }
}

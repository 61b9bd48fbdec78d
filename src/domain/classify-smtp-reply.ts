// What an SMTP exchange means for a transmission: sent, deferred (try again later) or failed
// (permanent), the result code clients see (`SMTP_250`, `SMTP_451`, `CONNECTION_REFUSED`, ...),
// and whether it counts as a bounce against the address. Pure: the SMTP adapter reduces whatever
// happened on the wire to an SmtpExchange, and this decides.
//
// Policy, in one place:
// - 2xx after the message: sent.
// - 4xx anywhere: deferred; counts as a soft bounce when it came from the server after the session
//   was established (MAIL, RCPT, DATA, the message), not when it is about the connection or our
//   own credentials.
// - 5xx on RCPT (unless its status is 5.7.x, a policy refusal: a blocked sender, a denied relay),
//   or any 5xx whose text says the mailbox does not exist: failed, a hard bounce.
// - Other 5xx (MAIL FROM, DATA, the message, the greeting): failed, not a bounce of the address
//   (a content or policy rejection says nothing about whether the mailbox exists).
// - 5xx on AUTH (relay credentials) and TLS that is required but missing or unverifiable: deferred.
//   They are our configuration's fault; failing the mail would lose it.
// - No reply at all (refused, timed out, dropped, protocol garbage): deferred, no bounce.
// - A message the server cannot take by what its EHLO announced (UTF-8 addresses or headers without
//   SMTPUTF8, an 8-bit body without 8BITMIME; docs/delivery.md, "SMTP"): failed, not a bounce,
//   decided before MAIL FROM. Postfix does the same ("5.6.7 SMTPUTF8 is required").

export type SmtpStage = 'connect' | 'greeting' | 'ehlo' | 'starttls' | 'auth' | 'mail' | 'rcpt' | 'data' | 'message';

/** Why no reply came, when none did. */
export type SmtpFailure = 'refused' | 'timeout' | 'dropped' | 'tls' | 'tls_required' | 'protocol' | 'unreachable' | 'no_smtputf8' | 'no_8bitmime';

export interface SmtpExchange {
  /** the reply code of the last command, when the server answered one */
  code: number | null;
  /** the server's reply text (without the code), or a description of what went wrong */
  text: string;
  /** where the exchange ended */
  stage: SmtpStage;
  /** set when the exchange ended without a reply */
  failure?: SmtpFailure;
}

export type OutcomeKind = 'sent' | 'deferred' | 'failed';

export interface Classification {
  kind: OutcomeKind;
  /** SMTP_250 style when there was a reply, else one of the codes below */
  resultCode: string;
  resultMessage: string;
  bounce: 'hard' | 'soft' | null;
}

const FAILURE_CODES: Record<SmtpFailure, string> = {
  refused: 'CONNECTION_REFUSED',
  timeout: 'TIMEOUT',
  dropped: 'CONNECTION_LOST',
  tls: 'TLS_FAILED',
  tls_required: 'TLS_REQUIRED',
  protocol: 'PROTOCOL_ERROR',
  unreachable: 'HOST_UNREACHABLE',
  no_smtputf8: 'SMTPUTF8_UNSUPPORTED',
  no_8bitmime: '8BITMIME_UNSUPPORTED',
};

/** What the server lacks for this message: permanent, as no retry gives it the extension. */
const PERMANENT_FAILURES: ReadonlySet<SmtpFailure> = new Set(['no_smtputf8', 'no_8bitmime']);

/**
 * An RFC 3463 security or policy status (5.7.x: blocked, relay denied, rejected by policy): a
 * refusal of the sender or the message, not a statement that the mailbox does not exist.
 */
const POLICY_STATUS = /^5\.7\.\d{1,3}\b/;

/** Reply texts that mean the mailbox does not exist (RFC 3463 X.1.1/X.1.10 and common wordings). */
const MAILBOX_UNKNOWN =
  /\b5\.1\.(1|10)\b|user unknown|unknown user|no such (user|mailbox|recipient)|mailbox (unavailable|not found|does not exist)|recipient (address )?(rejected|unknown|not found)|address rejected|does not exist|invalid recipient|unknown recipient|account (has been )?disabled/i;

const SESSION_STAGES: ReadonlySet<SmtpStage> = new Set(['mail', 'rcpt', 'data', 'message']);

export function classifySmtpReply(exchange: SmtpExchange): Classification {
  const text = oneLine(exchange.text);
  if (exchange.code === null || exchange.failure) {
    const failure = exchange.failure ?? 'protocol';
    if (PERMANENT_FAILURES.has(failure)) return { kind: 'failed', resultCode: FAILURE_CODES[failure], resultMessage: text, bounce: null };
    return { kind: 'deferred', resultCode: FAILURE_CODES[failure], resultMessage: text, bounce: null };
  }
  const code = exchange.code;
  const resultCode = `SMTP_${code}`;
  if (code >= 200 && code < 300) return { kind: 'sent', resultCode, resultMessage: text, bounce: null };
  if (code >= 400 && code < 500) {
    return { kind: 'deferred', resultCode, resultMessage: text, bounce: SESSION_STAGES.has(exchange.stage) ? 'soft' : null };
  }
  if (code >= 500 && code < 600) {
    if (exchange.stage === 'auth') return { kind: 'deferred', resultCode, resultMessage: text, bounce: null };
    const hard = (exchange.stage === 'rcpt' && !POLICY_STATUS.test(text)) || MAILBOX_UNKNOWN.test(text);
    return { kind: 'failed', resultCode, resultMessage: text, bounce: hard ? 'hard' : null };
  }
  // 1xx/3xx as a final reply, or nonsense: the server broke the protocol.
  return { kind: 'deferred', resultCode, resultMessage: text, bounce: null };
}

/** Multi-line replies joined, control characters removed, bounded for storage. */
export function oneLine(text: string): string {
  const flat = text.replace(/[\r\n]+/g, ' ').replace(/[\x00-\x1f\x7f]/g, '').replace(/\s+/g, ' ').trim();
  return flat.length > 500 ? flat.slice(0, 497) + '...' : flat;
}

/** Splits "250 2.0.0 Ok: queued" into code and text; null code when the line has none. */
export function splitReply(reply: string): { code: number | null; text: string } {
  const m = /^([2-5]\d\d)[ -]?(.*)$/s.exec(utf8Reply(reply).trim());
  if (!m) return { code: null, text: reply.trim() };
  // Multi-line replies: drop the repeated code prefix of continuation lines.
  const text = m[2].replace(/(\r?\n)[2-5]\d\d[ -]/g, '$1');
  return { code: Number(m[1]), text };
}

/**
 * A reply as its bytes say in UTF-8: Nodemailer reads replies one byte per character (latin1), so a
 * server's UTF-8 text (RFC 6531 allows it; localised servers send it) arrives as mojibake. Text
 * that is not valid UTF-8 stays as read; ASCII, the usual reply, costs one regex test.
 */
function utf8Reply(reply: string): string {
  if (!/[\x80-\xff]/.test(reply) || /[^\x00-\xff]/.test(reply)) return reply;
  const decoded = Buffer.from(reply, 'latin1').toString('utf8');
  return decoded.includes('\ufffd') ? reply : decoded;
}
